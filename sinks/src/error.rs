//! Sink errors carry the kind that decides what the follower does next.

use std::fmt;

/// What happens after an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Timeouts, 5xx, a broker or server away: retry with backoff.
    Transient,
    /// Bad configuration, access denied, a bucket missing: stop, exit 2.
    Permanent,
    /// The sink holds something the chain does not: stop, exit 1.
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

#[derive(Debug, Clone)]
pub struct SinkError {
    pub kind: ErrorKind,
    pub message: String,
}

impl SinkError {
    pub fn transient(message: impl fmt::Display) -> Self {
        SinkError {
            kind: ErrorKind::Transient,
            message: message.to_string(),
        }
    }

    pub fn permanent(message: impl fmt::Display) -> Self {
        SinkError {
            kind: ErrorKind::Permanent,
            message: message.to_string(),
        }
    }

    pub fn integrity(message: impl fmt::Display) -> Self {
        SinkError {
            kind: ErrorKind::Integrity,
            message: message.to_string(),
        }
    }

    /// Classifies an I/O error: a full disk or an interruption may pass,
    /// a missing permission will not.
    pub fn from_io(context: impl fmt::Display, e: &std::io::Error) -> Self {
        use std::io::ErrorKind as K;
        let message = format!("{context}: {e}");
        match e.kind() {
            K::PermissionDenied | K::NotFound | K::IsADirectory | K::NotADirectory | K::ReadOnlyFilesystem => {
                SinkError::permanent(message)
            }
            _ => SinkError::transient(message),
        }
    }
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for SinkError {}
