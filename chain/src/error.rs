//! The one error vocabulary of every chainship crate: what went wrong, in
//! one line naming the file, seq or setting at fault, and its [`ErrorKind`],
//! which alone decides what happens next (retry, stop, exit code).

use std::fmt;

/// What happens after an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Timeouts, 5xx, a broker or server away: retry with backoff.
    Transient,
    /// Bad configuration, access denied, a bucket missing: stop (exit 2).
    Permanent,
    /// The data contradicts the chain (a sink or store holds what the chain
    /// does not, a damaged record): never retried; stop (exit 1).
    Integrity,
}

impl ErrorKind {
    /// The label used in metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Transient => "transient",
            ErrorKind::Permanent => "permanent",
            ErrorKind::Integrity => "integrity",
        }
    }
}

/// Errors that know their kind (the typed errors of each crate).
pub trait HasKind: fmt::Display {
    fn kind(&self) -> ErrorKind;
}

/// A one-line message and its kind: what sinks, anchor stores and S3 calls
/// return.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl fmt::Display) -> Self {
        Error {
            kind,
            message: message.to_string(),
        }
    }

    pub fn transient(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Transient, message)
    }

    pub fn permanent(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Permanent, message)
    }

    pub fn integrity(message: impl fmt::Display) -> Self {
        Error::new(ErrorKind::Integrity, message)
    }

    pub fn is_transient(&self) -> bool {
        self.kind == ErrorKind::Transient
    }

    /// The same error, its message prefixed with where it happened.
    pub fn context(self, place: impl fmt::Display) -> Self {
        Error::new(self.kind, format!("{place}: {}", self.message))
    }

    /// Classifies an I/O error: a full disk or an interruption may pass,
    /// a missing permission will not.
    pub fn from_io(context: impl fmt::Display, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let message = format!("{context}: {e}");
        match e.kind() {
            K::PermissionDenied | K::NotFound | K::IsADirectory | K::NotADirectory | K::ReadOnlyFilesystem => {
                Error::permanent(message)
            }
            _ => Error::transient(message),
        }
    }
}

impl HasKind for Error {
    fn kind(&self) -> ErrorKind {
        self.kind
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_split_into_passing_and_lasting() {
        let full = std::io::Error::from_raw_os_error(28); // ENOSPC
        assert_eq!(Error::from_io("writing x", &full).kind, ErrorKind::Transient);
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let e = Error::from_io("writing x", &denied);
        assert_eq!(e.kind, ErrorKind::Permanent);
        assert!(e.message.starts_with("writing x: "), "{}", e.message);
        assert_eq!(e.context("sink").message.split(": ").next(), Some("sink"));
    }
}
