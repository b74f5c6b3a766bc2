//! Exit codes and the one error type every command returns.
//!
//! 0: all good. 1: verification failed (a break, a cut, a fork, a bad
//! signature). 2: usage or setup error (bad arguments, a file that cannot
//! be read, a service that refuses us).

use std::fmt;

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

impl From<chainship_chain::DbError> for CliError {
    fn from(e: chainship_chain::DbError) -> Self {
        CliError::usage(e)
    }
}

pub type CmdResult = Result<u8, CliError>;
