//! Following a copy as it grows, for `chainship monitor`: one arm per sink
//! that can be followed, each in its sink's module. What was read is a
//! [`TailPositions`] the caller saves with what it verified, so a restart
//! reads nothing twice.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::file_tail::{FilePosition, FileTail};
use crate::kafka::tail::KafkaTail;
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
}

/// A copy being followed.
pub enum CopyTail {
    Kafka(KafkaTail),
    File(FileTail),
}

impl CopyTail {
    /// Follows `cfg` (a shard's part of it) from `saved`.
    pub fn open(cfg: &SinkConfig, shard: Option<Shard>, saved: TailPositions) -> Result<Self, SinkError> {
        match cfg {
            SinkConfig::Kafka(k) => {
                let shape = crate::kafka::reader::shared_shape(k, shard)?;
                Ok(CopyTail::Kafka(KafkaTail::open(k, &shape.read, &saved.partitions)?))
            }
            SinkConfig::File(path) => Ok(CopyTail::File(FileTail::open(path, saved.files))),
            SinkConfig::S3(_) | SinkConfig::Stdout => Err(SinkError::permanent(format!(
                "{cfg}: the monitor follows Kafka and file copies; an S3 copy is checked by the scheduled `verify-export`"
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
        notice: &mut dyn FnMut(&Path, String),
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
        }
    }

    /// Whether the whole copy was read to its end at least once (a file
    /// copy is, after every poll that did not fail).
    pub fn caught_up(&self) -> bool {
        match self {
            CopyTail::Kafka(k) => k.caught_up(),
            CopyTail::File(_) => true,
        }
    }

    /// Whether the copy can be reached now.
    pub fn reachable(&self) -> Result<(), SinkError> {
        match self {
            CopyTail::Kafka(k) => k.reachable(),
            CopyTail::File(_) => Ok(()),
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
        }
    }
}
