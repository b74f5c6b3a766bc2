//! What the run check holds on the heap, by its own estimate.
//!
//! The cap that bounds the check's memory is on these bytes, not on counts
//! of runs or steps: a count assumes a size per entry, and a log that
//! writes long ids (or many small maps) holds several times that. The
//! estimate is a pure function of what the runs hold (the lengths of the
//! ids and names they keep and how many entries each map has), never of
//! the allocator, so the same log gives up the same runs whether the check
//! ran without a stop, was restored from a saved state, or runs in
//! `chainship runs`.
//!
//! Each text and box is counted as glibc's malloc holds it, and each map
//! as a table up to twice its entries (a table doubles when full), so the
//! estimate is at or above what is allocated, not below.

/// A heap block of `size` bytes as glibc's malloc holds it: an 8-byte
/// header, 16-byte steps, at least 32 bytes (nothing for an empty one).
pub(super) const fn block(size: usize) -> usize {
    if size == 0 { 0 } else { max((size + 8 + 15) & !15, 32) }
}

const fn max(a: usize, b: usize) -> usize {
    if a > b { a } else { b }
}

/// A kept id or name.
pub(super) fn text(s: &str) -> usize {
    block(s.len())
}

/// A map of `n` entries of `bucket` bytes: hashbrown's buckets (a control
/// byte each) up to twice the entries, at least four once it holds any.
pub(super) const fn table(n: usize, bucket: usize) -> usize {
    if n == 0 {
        0
    } else {
        block(max(2 * n, 4) * (bucket + 1) + 16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_as_malloc_does_and_tables_leave_room_to_double() {
        assert_eq!(block(0), 0);
        assert_eq!(block(1), 32);
        assert_eq!(block(24), 32);
        assert_eq!(block(25), 48);
        assert_eq!(block(128), 144);
        assert_eq!(table(0, 32), 0);
        assert_eq!(table(1, 32), block(4 * 33 + 16));
        assert_eq!(table(1000, 32), block(2000 * 33 + 16));
    }
}
