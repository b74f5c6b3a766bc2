//! The runs that finished lately, so an event after a run's finish is named.
//!
//! A run is kept as a keyed 64-bit hash of its id (8 bytes, whatever the
//! id; the key is secret, so ids cannot be chosen to collide). The newest
//! are in a hash set; older ones in generations of sorted arrays, dropped
//! oldest first, so between 150,000 and 200,000 of the last finished runs
//! are remembered. Sorted arrays are what make a restart cheap: they are
//! saved and read back as plain 8-byte words, with nothing rebuilt (a hash
//! set of 200,000 took most of a restart's time at 10M events).
//!
//! The set is only asked about runs that are not open (a run is never open
//! and finished at once), so the binary searches cost one lookup per new
//! run, not one per event.

use std::collections::{HashSet, VecDeque};

use super::RestoreError;

/// Runs remembered at most; at least this less two generations.
pub(super) const REMEMBERED: usize = 200_000;
/// How many new ones are hashed before they are frozen into a sorted generation.
const GENERATION: usize = 25_000;

/// A set of keyed hashes: they are uniform already, so the table uses them
/// as they are instead of hashing them again.
type IdSet = HashSet<u64, std::hash::BuildHasherDefault<KeyedId>>;

/// Passes a keyed hash through as its own hash (see [`IdSet`]).
#[derive(Default)]
struct KeyedId(u64);

impl std::hash::Hasher for KeyedId {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only u64s are hashed here; anything else is folded in, never lost.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[derive(Debug, Default)]
pub(super) struct FinishedRuns {
    /// Finished since the last freeze.
    newest: IdSet,
    /// Older generations, oldest first, each sorted ascending. A removed
    /// id is overwritten with the value before it (0 at the front: ids are
    /// never 0), which keeps the array sorted and the id gone.
    frozen: VecDeque<Vec<u64>>,
    frozen_len: usize,
}

impl FinishedRuns {
    /// The id kept for `run_id` under `key` (never 0: 0 marks a removed slot).
    pub(super) fn id(key: [u64; 2], run_id: &str) -> u64 {
        let mut h = siphasher::sip::SipHasher13::new_with_keys(key[0], key[1]);
        std::hash::Hasher::write(&mut h, run_id.as_bytes());
        std::hash::Hasher::finish(&h).max(1)
    }

    pub(super) fn insert(&mut self, id: u64) {
        self.newest.insert(id);
        if self.newest.len() >= GENERATION {
            let mut generation: Vec<u64> = self.newest.drain().collect();
            generation.sort_unstable();
            self.push_frozen(generation);
        }
    }

    /// Removes `id`; whether it was there.
    pub(super) fn take(&mut self, id: u64) -> bool {
        if self.newest.remove(&id) {
            return true;
        }
        let mut found = false;
        for generation in &mut self.frozen {
            let start = generation.partition_point(|x| *x < id);
            let end = start + generation[start..].partition_point(|x| *x == id);
            if start < end {
                let before = start.checked_sub(1).map_or(0, |i| generation[i]);
                generation[start..end].fill(before);
                found = true;
            }
        }
        found
    }

    /// How many ids are held (removed slots of older generations included).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.frozen_len + self.newest.len()
    }

    /// Adds a sorted generation after the others and lets the oldest go
    /// while a whole new generation would pass [`REMEMBERED`].
    fn push_frozen(&mut self, generation: Vec<u64>) {
        self.frozen_len += generation.len();
        self.frozen.push_back(generation);
        while self.frozen_len + GENERATION > REMEMBERED
            && let Some(oldest) = self.frozen.pop_front()
        {
            self.frozen_len -= oldest.len();
        }
    }

    /// Appends the set as it is: the older generations (a u32 count, then
    /// each as a u32 length and its 8-byte little-endian ids, ascending),
    /// then the newest ones the same way (sorted here), so a restore holds
    /// exactly what a check that never stopped holds.
    pub(super) fn save<W: std::io::Write + ?Sized>(&self, out: &mut W) -> std::io::Result<()> {
        let mut newest: Vec<u64> = self.newest.iter().copied().collect();
        newest.sort_unstable();
        // Every count here is bounded far below u32::MAX (REMEMBERED).
        out.write_all(&(self.frozen.len() as u32).to_le_bytes())?;
        for generation in self.frozen.iter().chain([&newest]) {
            out.write_all(&(generation.len() as u32).to_le_bytes())?;
            for id in generation {
                out.write_all(&id.to_le_bytes())?;
            }
        }
        Ok(())
    }

    /// Reads what [`FinishedRuns::save`] wrote, from `input` (left after
    /// it). Generations out of order, too many or too large are refused
    /// before they are read.
    pub(super) fn restore<R: std::io::Read + ?Sized>(input: &mut R) -> Result<FinishedRuns, RestoreError> {
        let bad = |why: &str| RestoreError::Unreadable(format!("the finished runs: {why}"));
        let word = |input: &mut R| -> Result<usize, RestoreError> {
            let mut bytes = [0u8; 4];
            input.read_exact(&mut bytes).map_err(|_| bad("cut short"))?;
            Ok(u32::from_le_bytes(bytes) as usize)
        };
        let count = word(input)?;
        if count > REMEMBERED / GENERATION {
            return Err(bad(&format!("{count} generations, more than are kept")));
        }
        let mut set = FinishedRuns::default();
        let mut bytes = Vec::new();
        // The older generations, then the newest ones.
        for n in 0..=count {
            let len = word(input)?;
            if len > GENERATION || set.frozen_len + len > REMEMBERED {
                return Err(bad("more than are kept"));
            }
            bytes.resize(len * 8, 0);
            input.read_exact(&mut bytes).map_err(|_| bad("cut short"))?;
            let ids = bytes
                .chunks_exact(8)
                .map(|id| u64::from_le_bytes(id.try_into().expect("8 bytes")));
            if n < count {
                let generation: Vec<u64> = ids.collect();
                if !generation.is_sorted() {
                    return Err(bad("a generation out of order"));
                }
                set.frozen_len += generation.len();
                set.frozen.push_back(generation);
            } else {
                set.newest.reserve(len);
                set.newest.extend(ids);
            }
        }
        Ok(set)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distinct ids, never 0, in a fixed order.
    fn ids(n: usize) -> Vec<u64> {
        (0..n as u64)
            .map(|i| FinishedRuns::id([7, 9], &format!("run-{i}")))
            .collect()
    }

    #[test]
    fn the_latest_are_remembered_the_oldest_let_go_within_the_bounds() {
        let all = ids(REMEMBERED * 2);
        let mut set = FinishedRuns::default();
        for (n, id) in all.iter().enumerate() {
            set.insert(*id);
            assert!(set.len() <= REMEMBERED, "after {n}: {}", set.len());
        }
        let floor = REMEMBERED - 2 * GENERATION;
        let (older, latest) = all.split_at(all.len() - floor);
        assert!(
            latest
                .iter()
                .all(|id| set.newest.contains(id) || set.frozen.iter().any(|g| g.binary_search(id).is_ok()))
        );
        let forgotten = older[..older.len() - (REMEMBERED - floor)].iter();
        assert!(
            forgotten.clone().all(|id| !set.take(*id)),
            "an id older than the bound was kept"
        );
        // Each remembered one is taken once.
        for id in latest {
            assert!(set.take(*id));
            assert!(!set.take(*id));
        }
    }

    #[test]
    fn taking_keeps_every_other_id_findable_even_at_the_front_and_among_equals() {
        let mut set = FinishedRuns::default();
        let mut all = ids(GENERATION * 3);
        for id in &all {
            set.insert(*id);
        }
        all.sort_unstable();
        // The smallest (front of a generation), neighbours, and one taken twice.
        for id in [all[0], all[1], all[2], all[500], all[501]] {
            assert!(set.take(id));
            assert!(!set.take(id), "taken twice");
        }
        for id in &all[3..500] {
            assert!(set.take(*id), "{id} lost when a neighbour was taken");
        }
    }

    #[test]
    fn saved_and_restored_it_holds_the_same_ids_and_refuses_damage() {
        let mut set = FinishedRuns::default();
        let all = ids(GENERATION * 2 + 1234);
        for id in &all {
            set.insert(*id);
        }
        set.take(all[10]);
        let mut bytes = Vec::new();
        set.save(&mut bytes).unwrap();
        bytes.extend_from_slice(b"rest");
        let mut rest = &bytes[..];
        let mut back = FinishedRuns::restore(&mut rest).unwrap();
        assert_eq!(rest, b"rest");
        assert!(!back.take(all[10]));
        for id in all.iter().filter(|id| **id != all[10]) {
            assert!(back.take(*id));
        }
        // Saved and restored every 997: the same generations as never stopped.
        let (mut stopping, mut never) = (FinishedRuns::default(), FinishedRuns::default());
        for chunk in ids(REMEMBERED + 3 * GENERATION).chunks(997) {
            for id in chunk {
                stopping.insert(*id);
                never.insert(*id);
            }
            let mut bytes = Vec::new();
            stopping.save(&mut bytes).unwrap();
            stopping = FinishedRuns::restore(&mut &bytes[..]).unwrap();
            assert_eq!(stopping.frozen, never.frozen);
            assert_eq!(stopping.newest, never.newest);
        }

        let mut bytes = Vec::new();
        back.save(&mut bytes).unwrap();
        // Out of order.
        let mut swapped = bytes.clone();
        swapped[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(FinishedRuns::restore(&mut &swapped[..]).is_err());
        for cut in [0, 3, 7, bytes.len() - 1] {
            assert!(FinishedRuns::restore(&mut &bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut many = Vec::new();
        many.extend_from_slice(&((REMEMBERED / GENERATION + 1) as u32).to_le_bytes());
        assert!(FinishedRuns::restore(&mut &many[..]).is_err());
        let mut large = Vec::new();
        large.extend_from_slice(&1u32.to_le_bytes());
        large.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(FinishedRuns::restore(&mut &large[..]).is_err());
    }
}
