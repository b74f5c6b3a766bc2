//! The follower: tails the events table, checks every event against the
//! chain as it reads, ships batches to a sink, and keeps its position in a
//! crash-safe cursor.
//!
//! Owns the resume logic (cursor, database and sink must agree before
//! anything is shipped: [`resume`]), the tailing and batching loop
//! ([`follow`]), delivery retries ([`retry`]), the cursor file ([`cursor`]),
//! and the metrics and health it reports ([`metrics`], [`health`]).

pub mod anchoring;
pub mod cursor;
pub mod delivery;
pub mod follow;
pub mod health;
pub mod metrics;
pub mod resume;
pub mod retry;

pub use cursor::{CursorError, FileCursor};
pub use follow::{FollowConfig, FollowError, Follower, OnBreak, Outcome, StartFrom};
pub use health::Health;
