//! Exit codes and the one error type every command returns.
//!
//! 0: all good. 1: verification failed (a break, a cut, a fork, a bad
//! signature). 2: usage or setup error (bad arguments, a file that cannot
//! be read, a service that refuses us).

use std::fmt;

use chainship_chain::{ErrorKind, HasKind, Setting};
use chainship_verify::Verdict;

pub const OK: u8 = 0;
pub const FAILED: u8 = 1;
pub const USAGE: u8 = 2;
/// The exit status of a tool whose stdout reader has gone (128 + SIGPIPE).
pub const CLOSED_STDOUT: u8 = 141;

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

/// The exit code of every check, from its one verdict: 0 when it passed,
/// 1 when it found something ([`Verdict::passed`]).
pub fn of<C>(verdict: &Verdict<C>) -> u8 {
    if verdict.passed() { OK } else { FAILED }
}

/// The exit code of a check giving one verdict per origin: 0 when there is
/// at least one and each passed, else 1.
pub fn of_each<C>(verdicts: &[Verdict<C>]) -> u8 {
    if !verdicts.is_empty() && verdicts.iter().all(Verdict::passed) {
        OK
    } else {
        FAILED
    }
}

/// The exit code of a fleet check: 0 when the fleet and every origin passed
/// ([`chainship_evidence::fleet::FleetVerdict::passed`]), else 1.
pub fn of_fleet(verdict: &chainship_evidence::fleet::FleetVerdict) -> u8 {
    if verdict.passed() { OK } else { FAILED }
}

/// The one mapping from an error's kind to an exit code: the data failed a
/// check (1), the output's reader left (141), or anything else stopped the
/// command (2).
pub fn code_for(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Integrity => FAILED,
        ErrorKind::Closed => CLOSED_STDOUT,
        ErrorKind::Transient | ErrorKind::Permanent => USAGE,
    }
}

/// The flag that sets what a library error points at: libraries name
/// settings by meaning, and only the command line knows its flags.
pub fn flag_for(setting: Setting) -> &'static str {
    match setting {
        Setting::AllowSymlink => "--allow-symlink",
        Setting::Table => "--table",
        Setting::Column(column) => match column {
            "seq column" => "--seq-column",
            "run_id column" => "--run-id-column",
            "step_id column" => "--step-id-column",
            "at column" => "--at-column",
            "type column" => "--type-column",
            "payload_json column" => "--payload-column",
            "hash column" => "--hash-column",
            _ => "the column flags",
        },
        Setting::StartFrom => "--from-start or --from-seq N",
        Setting::KafkaClient => "--kafka-opt",
        Setting::KafkaPartition => "--kafka-partition",
        Setting::SinkS3Profile => "--s3-profile",
        Setting::AnchorS3Profile => "--anchor-s3-profile",
        Setting::SinkS3CredentialsFile => "--s3-credentials-file",
        Setting::AnchorS3CredentialsFile => "--anchor-s3-credentials-file",
        Setting::ProofSeq => "--seq",
        Setting::ProofCheckpoint => "--checkpoint",
        Setting::SigningKeyName => "--signing-key-name",
        Setting::RunProfile => "--profile",
        Setting::Append => "--append",
        Setting::MaxUnvouched => "--max-unvouched",
        Setting::VerifyState => "--state",
        Setting::Out => "--out",
    }
}

impl CliError {
    /// Any error of the workspace, with the exit code its kind maps to and
    /// the flag it points at.
    pub fn from_kind(e: &impl HasKind) -> Self {
        let message = match e.setting() {
            Some(s) => format!("{} ({})", e.bare_message(), flag_for(s)),
            None => e.bare_message(),
        };
        CliError {
            code: code_for(e.kind()),
            message,
        }
    }
}

impl From<chainship_chain::DbError> for CliError {
    fn from(e: chainship_chain::DbError) -> Self {
        CliError::from_kind(&e)
    }
}

pub type CmdResult = Result<u8, CliError>;
