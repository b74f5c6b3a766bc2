//! A copy many origins share (a fleet's topic, bucket or directory), read
//! once for all of them: which part one worker reads ([`Shard`]), and what
//! it is told with each record ([`OnSharedRecord`]).

use std::fmt;

use crate::kafka::partition_for;

/// One worker's part of a fleet's copy: worker `index` (0-based) of
/// `count`. A Kafka topic is split by partition (an origin's records live
/// on its home partition), an S3 prefix or files by a stable hash of the
/// origin: the parts are disjoint and together are the whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `I/N`, 1-based as a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX + 1`.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("{text:?}: expected I/N with 1 <= I <= N, e.g. 2/8");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (i, n): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if i == 0 || n == 0 || i > n {
            return Err(bad());
        }
        Ok(Shard { index: i - 1, count: n })
    }

    /// Whether partition `p` is this worker's.
    pub fn takes_partition(&self, p: i32) -> bool {
        p >= 0 && p as u32 % self.count == self.index
    }

    /// Whether `origin` is this worker's, where the copy is split by origin.
    pub fn takes_origin(&self, origin: &str) -> bool {
        partition_for(origin, self.count as usize) as u32 == self.index
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index + 1, self.count)
    }
}

/// Called with each line of a shared copy, the partition it was read from
/// (a topic), and a function naming its place for messages.
pub type OnSharedRecord<'a> = dyn FnMut(&[u8], Option<i32>, &dyn Fn() -> String) + 'a;

/// What reading a shared copy found out about its shape.
#[derive(Debug, Default, Clone)]
pub struct SharedRead {
    /// A topic's partitions, and the one every origin was pinned to
    /// (`--kafka-partition`), for each origin's home partition.
    pub partitions: Option<usize>,
    pub pinned: Option<i32>,
    /// The partitions read (all, or the shard's).
    pub read: Vec<i32>,
}

impl SharedRead {
    /// The partition `origin`'s records belong on, in a topic.
    pub fn home(&self, origin: &str) -> Option<i32> {
        let count = self.partitions?;
        Some(self.pinned.unwrap_or_else(|| partition_for(origin, count)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_everything() {
        let shards: Vec<Shard> = (1..=3).map(|i| Shard::parse(&format!("{i}/3")).unwrap()).collect();
        for p in 0..12 {
            assert_eq!(
                shards.iter().filter(|s| s.takes_partition(p)).count(),
                1,
                "partition {p}"
            );
        }
        for o in ["a", "team/b", "c", "prod-eu1/agentrt", "x"] {
            assert_eq!(shards.iter().filter(|s| s.takes_origin(o)).count(), 1, "origin {o}");
        }
        assert_eq!(shards[1].to_string(), "2/3");
        for bad in ["0/3", "4/3", "1/0", "a/b", "3", "/", "-1/2"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
    }
}
