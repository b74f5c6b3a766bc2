//! Verification: whether a log, a copy of it or its anchor store still
//! holds what was anchored, and exactly where it does not.
//!
//! Owns the one pass over an anchor store ([`pass`]: every kept head and
//! checkpoint judged in seq order, in bounded memory) and what it is judged
//! against: a database ([`database`], its exact invalid ranges in
//! [`ranges`]), an exported copy ([`copy`], record by record in
//! [`export`]) or the store alone. Beside the pass: the checkpoint rules
//! ([`checkpoints`]), the tiles ([`tiles`]), the went-backwards rule
//! ([`went_backwards`]), one record's proof built and checked ([`prove`],
//! [`proof`]), and what a scheduled run leaves behind ([`state`],
//! [`job_textfile`]), a fleet's store at a glance ([`status`]), and which
//! redaction statements are trusted and held to the chain ([`redactions`]). What
//! every check concludes is a [`finding::Finding`] of a closed [`Kind`].
//! Publishing is `chainship-anchor`'s; this crate only reads the store.

pub mod checkpoints;
pub mod copy;
#[cfg(test)]
mod damage_matrix;
pub mod database;
pub mod db_check;
pub mod export;
pub mod finding;
pub mod job_textfile;
pub mod pass;
pub mod proof;
pub mod prove;
pub mod ranges;
pub mod redactions;
pub mod run_rules;
pub mod state;
pub mod status;
pub mod tiles;
pub mod verdict;
pub mod watch;
pub mod went_backwards;

pub use finding::{Finding, HeadSet, Kind};
pub use verdict::Verdict;

/// Runs a future to completion on a one-thread runtime (the unit tests'
/// way into the async store interface).
#[cfg(test)]
pub(crate) fn test_run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a test runtime")
        .block_on(f)
}
