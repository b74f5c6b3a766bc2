//! How each sink wants its batches built, declared by the sink itself, so
//! the follower never asks which sink it is delivering to.

use std::time::Duration;

use crate::s3::compression::Compression;

/// Limits and timing of the batches a sink takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchPolicy {
    /// Events per batch, at most.
    pub max_events: usize,
    /// Bytes of records per batch, at most (a single larger event goes alone).
    pub max_bytes: usize,
    /// A partial batch is delivered once its first event waited this long.
    pub linger: Duration,
    /// Group commit: deliver what checked out as soon as no delivery is in
    /// flight, instead of waiting for size or `linger`.
    pub group_commit: bool,
    /// Compress each batch as it is built (objects), so a batch being
    /// filled holds compressed bytes, not the whole object.
    pub compression: Option<Compression>,
}

/// S3's own limits: SIEM loaders prefer fewer, larger objects, which wait
/// for their size or age (no group commit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectBatching {
    pub max_events: usize,
    pub max_bytes: usize,
    pub max_age: Duration,
}

impl Default for ObjectBatching {
    fn default() -> Self {
        ObjectBatching {
            max_events: 50_000,
            max_bytes: 64 << 20,
            max_age: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SinkConfig;

    #[test]
    fn each_sink_declares_its_batches() {
        let general = BatchPolicy {
            max_events: 10,
            max_bytes: 0,
            linger: Duration::from_millis(5),
            group_commit: false,
            compression: None,
        };
        let file: SinkConfig = "file:/x".parse().unwrap();
        let p = file.batch_policy(general);
        assert_eq!((p.max_events, p.max_bytes, p.group_commit), (10, 1, true));
        let s3: SinkConfig = "s3://bkt/p".parse().unwrap();
        let p = s3.batch_policy(general);
        assert_eq!(p.max_events, 50_000);
        assert_eq!(p.linger, Duration::from_secs(60));
        assert!(!p.group_commit && p.compression.is_some());
    }
}
