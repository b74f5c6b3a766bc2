//! Exit codes and the one error type every command returns.
//!
//! 0: all good. 1: verification failed (a break, a cut, a fork, a bad
//! signature). 2: usage or setup error (bad arguments, a file that cannot
//! be read, a service that refuses us).

use std::fmt;

use chainship_chain::{ErrorKind, HasKind};

pub const OK: u8 = 0;
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;

/// A one-line message and the exit code it maps to.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    /// Bad arguments, or something needed cannot be opened or reached: exit 2.
    pub fn usage(message: impl fmt::Display) -> Self {
        CliError {
            code: USAGE,
            message: message.to_string(),
        }
    }

    /// The data failed a check: exit 1.
    pub fn failed(message: impl fmt::Display) -> Self {
        CliError {
            code: FAILED,
            message: message.to_string(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// The one mapping from an error's kind to an exit code: the data failed a
/// check (1), or anything else stopped the command (2).
pub fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Integrity => FAILED,
        ErrorKind::Transient | ErrorKind::Permanent => USAGE,
    }
}

impl CliError {
    /// Any error of the workspace, with the exit code its kind maps to.
    pub fn from_kind(e: &impl HasKind) -> Self {
        CliError {
            code: code_for(e.kind()),
            message: e.to_string(),
        }
    }
}

impl From<chainship_chain::DbError> for CliError {
    fn from(e: chainship_chain::DbError) -> Self {
        CliError::from_kind(&e)
    }
}

pub type CmdResult = Result<u8, CliError>;
