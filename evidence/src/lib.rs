//! What an exported copy proves, and what is rebuilt from it.
//!
//! A SIEM's copy (a file, a bucket, a topic) is read once and every record
//! checked against the chain and against the anchor store, in the same pass
//! `anchor verify` runs ([`copy`]); each checked record is handed on as it
//! goes, so the three readers of a copy judge it alike and never hold it
//! whole: `verify-export` (the verdict alone), `diff` (the copy against the
//! database, event by event: [`diff`]) and `restore` (a new database built
//! from the copy up to its last trusted head: [`restore`], written through
//! [`new_database`], the only place chainship makes an events database from
//! a copy). [`bundle`] is one run's evidence: its records with a proof
//! each, checked offline (`evidence`, `check-evidence`). [`redact`] takes a
//! logged secret out of a copy while it stays evidence (`redact`).

pub mod bundle;
pub mod copy;
pub mod diff;
pub mod fleet;
pub mod new_database;
pub mod redact;
pub mod restore;
pub mod run_events;

#[cfg(test)]
mod tests;
