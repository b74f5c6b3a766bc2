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

/// What an entry of a run's table (or a run in the check's) holds beside
/// its key and bucket, as [`super::Run::held_by`] counts it.
pub(super) trait Holds {
    fn holds(&self) -> usize;
}

impl Holds for super::Step {
    fn holds(&self) -> usize {
        self.decided_tool.as_deref().map_or(0, text) + self.tool.as_deref().map_or(0, super::Pending::held)
    }
}

impl Holds for Box<super::Approval> {
    fn holds(&self) -> usize {
        self.held()
    }
}

impl Holds for Box<super::Pending> {
    fn holds(&self) -> usize {
        self.held()
    }
}

impl Holds for Box<super::Run> {
    /// Its own tables were counted as they were read.
    fn holds(&self) -> usize {
        block(size_of::<super::Run>())
    }
}

thread_local! {
    /// While a saved state is read on this thread: the bytes its tables may
    /// still take (see [`bounded`]).
    static READING: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    /// A table or list read past what the check keeps (the decoder's own
    /// error says only that deserializing failed).
    static OVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A saved state being read on this thread, its tables held to `budget`
/// bytes as they are read; over when dropped.
pub(super) struct Reading;

impl Reading {
    pub(super) fn start(budget: usize) -> Reading {
        READING.set(Some(budget));
        OVER.set(false);
        Reading
    }

    /// Whether a table was refused for passing the budget.
    pub(super) fn over(&self) -> bool {
        OVER.get()
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        READING.set(None);
    }
}

/// Reads a table of a saved state entry by entry, counting what each holds
/// against the [`Reading`] budget: a crafted state that would hold more
/// than the check keeps is refused as it is read, not once it is in memory.
pub(super) fn bounded<'de, D, V>(input: D) -> Result<super::Map<String, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    V: serde::Deserialize<'de> + Holds,
{
    struct Entries<V>(std::marker::PhantomData<V>);
    impl<'de, V: serde::Deserialize<'de> + Holds> serde::de::Visitor<'de> for Entries<V> {
        type Value = super::Map<String, V>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a table")
        }

        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut entries: A) -> Result<Self::Value, A::Error> {
            let mut table = super::Map::default();
            while let Some((key, value)) = entries.next_entry::<String, V>()? {
                let holds = 2 * (size_of::<(String, V)>() + 1) + text(&key) + value.holds();
                let within = READING.with(|left| match left.get() {
                    Some(n) if n < holds => false,
                    Some(n) => {
                        left.set(Some(n - holds));
                        true
                    }
                    None => true,
                });
                if !within {
                    OVER.set(true);
                    return Err(serde::de::Error::custom("its runs hold more than the check keeps"));
                }
                if table.insert(key, value).is_some() {
                    return Err(serde::de::Error::custom("a key twice"));
                }
            }
            Ok(table)
        }
    }
    input.deserialize_map(Entries(std::marker::PhantomData))
}

/// Reads a list of a saved state refusing it past `most` items, as they
/// are read (a crafted count of millions is never read whole).
fn at_most<'de, D, T>(input: D, most: usize) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::Deserialize<'de>,
{
    struct Items<T>(usize, std::marker::PhantomData<T>);
    impl<'de, T: serde::Deserialize<'de>> serde::de::Visitor<'de> for Items<T> {
        type Value = Vec<T>;

        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "at most {} items", self.0)
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut items: A) -> Result<Vec<T>, A::Error> {
            let mut list = Vec::new();
            while let Some(item) = items.next_element()? {
                if list.len() == self.0 {
                    OVER.set(true);
                    return Err(serde::de::Error::custom("a list longer than the check keeps"));
                }
                list.push(item);
            }
            Ok(list)
        }
    }
    input.deserialize_seq(Items(most, std::marker::PhantomData))
}

/// The read-only tools: as many as a command line holds.
pub(super) fn tools<'de, D: serde::Deserializer<'de>>(input: D) -> Result<Vec<String>, D::Error> {
    at_most(input, 4096)
}

/// The findings counted, one per kind.
pub(super) fn totals<'de, D: serde::Deserializer<'de>>(input: D) -> Result<Vec<(String, u64)>, D::Error> {
    at_most(input, crate::RunFindingKind::ALL.len())
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
