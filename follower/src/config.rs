//! What a follower is told: the database, the origin, batching, where to
//! start without a cursor, and what to do when the chain breaks.

use std::path::PathBuf;
use std::time::Duration;

use chainship_chain::OpenOptions;

use crate::retry::RetryPolicy;
use crate::run_check::RunRules;

/// Where a follower without a cursor starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartFrom {
    /// Only from the cursor: a missing cursor is an error.
    Cursor,
    /// From seq 1 when there is no cursor.
    Start,
    /// From this seq when there is no cursor (the event before it is trusted as stored).
    Seq(u64),
}

/// What to do when the chain breaks under the follower.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OnBreak {
    /// Exit 1.
    #[default]
    Exit,
    /// Keep serving metrics and health, deliver nothing more, wait for an operator.
    Wait,
}

#[derive(Clone, Debug)]
pub struct FollowConfig {
    pub db: PathBuf,
    pub open: OpenOptions,
    pub origin: String,
    pub batch_size: usize,
    pub batch_bytes: usize,
    /// Compress each batch as it is built (the S3 sink's objects), so a
    /// batch being filled holds compressed bytes, not the whole object.
    pub compression: Option<chainship_sinks::s3::compression::Compression>,
    /// The shape records are written in.
    pub record_format: chainship_chain::record::RecordFormat,
    /// Deliver a partial batch once its first event has waited this long.
    pub batch_linger: Duration,
    /// Group commit: deliver what has checked out as soon as no delivery is
    /// in flight, instead of lingering; while one is, the batch fills for at
    /// most `batch_linger` (every sink but S3, whose objects are meant to be
    /// large and wait for their size or age).
    pub group_commit: bool,
    pub poll_interval: Duration,
    /// Deliver what is there at start, then return.
    pub once: bool,
    pub start: StartFrom,
    pub on_break: OnBreak,
    pub retry: RetryPolicy,
    /// The run check's rules; `None` turns it off.
    pub runs: Option<RunRules>,
    /// Warnings about the setup to log once following has started (after
    /// any setup error, which stays the one line a bad start prints).
    pub start_warnings: Vec<String>,
}
