//! The follower: tails the events table, checks every event against the
//! chain as it reads, ships batches to a sink, and keeps its position in a
//! crash-safe cursor.
//!
//! Owns what it is told ([`config`]) and why it stops ([`error`]), the
//! resume phase (cursor, database and sink must agree before anything is
//! shipped: [`resume`]), the tailing and batching loop ([`follow`]),
//! delivering and recording each batch ([`delivery`], retried by
//! [`retry`]), the run check applied to every event it ships
//! ([`run_check`], its state saved beside the cursor by [`run_state`]), the cursor file ([`cursor`]), publishing signed heads
//! ([`anchoring`]), and the metrics and health it reports ([`metrics`],
//! [`health`]); and the whole sidecar wired once, with its shutdown order
//! ([`pipeline`]).

pub mod anchoring;
pub mod config;
pub mod cursor;
pub mod delivery;
pub mod error;
pub mod follow;
pub mod hash_feed;
pub mod health;
pub mod metrics;
pub mod pipeline;
pub mod probe_server;
pub mod resume;
pub mod retry;
pub mod run_check;
pub mod run_state;
#[cfg(test)]
mod testing;
pub mod tree_log;
pub mod witness_http;
pub mod witnessing;

pub use config::{FollowConfig, OnBreak, StartFrom};
pub use cursor::{CursorError, FileCursor};
pub use error::FollowError;
pub use follow::{Follower, Outcome};
pub use health::Health;
pub use pipeline::{AnchorSetup, BoundedRuntime, Ending, Pipeline, Stopped};
pub use run_check::RunRules;
