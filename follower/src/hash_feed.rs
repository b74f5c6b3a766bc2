//! The stored hashes of delivered events, handed from the delivery thread
//! to the tree builder ([`crate::tree_log`]), so the transparency log is
//! extended from what the follower already checked instead of reading the
//! events again from the database.
//!
//! Bounded: past [`CAPACITY`] hashes the oldest are dropped (an anchor
//! store that is down, a builder that lags), and the builder reads that
//! range from the database instead, as it does after a restart. The feed
//! only ever holds a contiguous run of seqs.

use std::collections::VecDeque;
use std::sync::Mutex;

use chainship_chain::{Head, HexHash};

/// At most this many hashes are held (64 bytes each: 16 MiB).
pub const CAPACITY: usize = 1 << 18;

#[derive(Default)]
pub struct HashFeed {
    inner: Mutex<Run>,
}

/// Hashes of seqs `first, first + 1, ...`.
#[derive(Default)]
struct Run {
    first: u64,
    hashes: VecDeque<HexHash>,
}

impl HashFeed {
    /// Adds the hashes of a delivered batch, seqs in order; a batch that
    /// does not continue the run (a restart, a gap) starts a new one.
    pub fn push(&self, hashes: impl IntoIterator<Item = (u64, HexHash)>) {
        let Ok(mut run) = self.inner.lock() else { return };
        for (seq, hash) in hashes {
            if run.hashes.is_empty() || run.first + run.hashes.len() as u64 != seq {
                run.hashes.clear();
                run.first = seq;
            }
            run.hashes.push_back(hash);
            if run.hashes.len() > CAPACITY {
                run.hashes.pop_front();
                run.first += 1;
            }
        }
    }

    /// Moves to `out` the hashes of seqs `after + 1 ..= through` the feed
    /// holds from `after + 1` on (none if it does not hold `after + 1`),
    /// dropping any at or below `after`. Returns the head of the last one.
    pub fn take(&self, after: u64, through: u64, out: &mut Vec<HexHash>) -> Option<Head> {
        let mut run = self.inner.lock().ok()?;
        while run.first <= after && !run.hashes.is_empty() {
            run.hashes.pop_front();
            run.first += 1;
        }
        if run.first != after + 1 {
            return None;
        }
        let mut last = None;
        while run.first <= through {
            let Some(hash) = run.hashes.pop_front() else { break };
            last = Some(Head::new(run.first, hash));
            out.push(hash);
            run.first += 1;
        }
        last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(seq: u64) -> HexHash {
        let mut hash = [b'0'; 64];
        hash[..20].copy_from_slice(format!("{seq:020}").as_bytes());
        hash
    }

    #[test]
    fn hands_out_a_contiguous_run_and_nothing_across_a_gap() {
        let feed = HashFeed::default();
        feed.push((1..=10).map(|s| (s, h(s))));
        let mut out = Vec::new();
        assert_eq!(feed.take(0, 4, &mut out).map(|h| h.seq), Some(4));
        assert_eq!(out, (1..=4).map(h).collect::<Vec<_>>());
        out.clear();
        // Asked from after 6: 5 and 6 are dropped, 7..=10 handed out.
        assert_eq!(feed.take(6, 100, &mut out).map(|h| h.seq), Some(10));
        assert_eq!(out.len(), 4);
        // A batch that does not continue the run starts a new one.
        feed.push((20..=22).map(|s| (s, h(s))));
        out.clear();
        assert_eq!(feed.take(10, 30, &mut out), None, "11..=19 are not in the feed");
        assert_eq!(feed.take(19, 30, &mut out).map(|h| h.seq), Some(22));
    }

    #[test]
    fn holds_at_most_its_capacity() {
        let feed = HashFeed::default();
        let n = CAPACITY as u64 + 10;
        feed.push((1..=n).map(|s| (s, h(s))));
        let mut out = Vec::new();
        assert_eq!(feed.take(0, n, &mut out), None, "the oldest were dropped");
        assert_eq!(feed.take(10, n, &mut out).map(|h| h.seq), Some(n));
        assert_eq!(out.len(), CAPACITY);
    }
}
