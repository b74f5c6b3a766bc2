//! Following a copy as it grows, for `chainship monitor`: one arm per sink
//! that can be followed (a topic, files, an S3 prefix), each in its sink's module. What was read is a
//! [`TailPositions`] the caller saves with what it verified, so a restart
//! reads nothing twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::file_tail::{FilePosition, FileTail, Notice};
use crate::kafka::tail::KafkaTail;
use crate::s3::tail::S3Tail;
use crate::{OnSharedRecord, Shard, SinkConfig, SinkError};

/// Where a copy was read to.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct TailPositions {
    /// A topic: partition → the next offset.
    #[serde(default)]
    pub partitions: BTreeMap<i32, i64>,
    /// Files: path → how far each was read.
    #[serde(default)]
    pub files: BTreeMap<PathBuf, FilePosition>,
    /// An S3 prefix: origin → the last object key read.
    #[serde(default)]
    pub objects: BTreeMap<String, String>,
}

/// A copy being followed.
pub enum CopyTail {
    Kafka(KafkaTail),
    File(FileTail),
    /// An S3 prefix, listed at most every [`S3_EVERY`], and whether it was read whole once.
    S3(Box<S3Tail>, Option<std::time::Instant>, bool),
}

/// How often an S3 copy is listed (each listing is one request per origin).
pub const S3_EVERY: Duration = Duration::from_secs(2);

impl CopyTail {
    /// Follows `cfg` (a shard's part of it) from `saved`.
    pub fn open(cfg: &SinkConfig, shard: Option<Shard>, saved: TailPositions) -> Result<Self, SinkError> {
        match cfg {
            SinkConfig::Kafka(k) => {
                let shape = crate::kafka::reader::shared_shape(k, shard)?;
                Ok(CopyTail::Kafka(KafkaTail::open(k, &shape.read, &saved.partitions)?))
            }
            SinkConfig::File(path) => Ok(CopyTail::File(FileTail::open(path, saved.files))),
            SinkConfig::S3(s3) => Ok(CopyTail::S3(
                Box::new(S3Tail::open(s3, shard, saved.objects)?),
                None,
                false,
            )),
            SinkConfig::Stdout => Err(SinkError::permanent(format!(
                "{cfg}: standard output cannot be read back"
            ))),
        }
    }

    /// Hands on what arrived since the last poll (each line with its
    /// partition and place); `notice` is told what the copy did that a
    /// growing copy never does (a file shrank or was replaced).
    pub fn poll(
        &mut self,
        wait: Duration,
        each: &mut OnSharedRecord<'_>,
        notice: &mut dyn FnMut(&Path, Notice),
    ) -> Result<usize, SinkError> {
        match self {
            CopyTail::Kafka(k) => k.poll(wait, 200_000, each),
            CopyTail::File(f) => {
                let n = f.poll(each, notice)?;
                if n == 0 {
                    std::thread::sleep(wait);
                }
                Ok(n)
            }
            CopyTail::S3(t, last, whole) => {
                if last.is_some_and(|l| l.elapsed() < S3_EVERY) {
                    std::thread::sleep(wait);
                    return Ok(0);
                }
                *last = Some(std::time::Instant::now());
                let n = t.poll(each)?;
                *whole = true;
                Ok(n)
            }
        }
    }

    /// Whether the whole copy was read to its end at least once (a file
    /// copy is, after every poll that did not fail).
    pub fn caught_up(&self) -> bool {
        match self {
            CopyTail::Kafka(k) => k.caught_up(),
            CopyTail::File(_) => true,
            CopyTail::S3(_, _, whole) => *whole,
        }
    }

    /// Whether the copy can be reached now.
    pub fn reachable(&self) -> Result<(), SinkError> {
        match self {
            CopyTail::Kafka(k) => k.reachable(),
            CopyTail::File(_) | CopyTail::S3(..) => Ok(()),
        }
    }

    pub fn positions(&self) -> TailPositions {
        match self {
            CopyTail::Kafka(k) => TailPositions {
                partitions: k.positions().clone(),
                ..Default::default()
            },
            CopyTail::File(f) => TailPositions {
                files: f.positions().clone(),
                ..Default::default()
            },
            CopyTail::S3(t, _, _) => TailPositions {
                objects: t.positions().clone(),
                ..Default::default()
            },
        }
    }
}
