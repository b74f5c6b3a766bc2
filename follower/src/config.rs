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
    /// How batches are built, as the sink declares it.
    pub batch: chainship_sinks::BatchPolicy,
    /// The shape records are written in.
    pub record_format: chainship_chain::record::RecordFormat,
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
