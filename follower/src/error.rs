//! Why a follower stops, sorted the way the CLI maps it to exit codes.

use chainship_chain::{ErrorKind, HasKind};

use crate::cursor::CursorError;

/// Errors that stop the follower.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// Bad configuration or input, or a sink refusing us: exit 2.
    #[error("{0}")]
    Setup(String),
    /// The database, cursor and sink disagree: exit 1.
    #[error("{0}")]
    Integrity(String),
    /// Shutdown came while the sink was still failing (handled inside the loop).
    #[error("{0}")]
    Interrupted(String),
}

impl FollowError {
    /// Any error of the workspace, by its kind: an integrity finding stops
    /// with exit 1, anything else that reaches here is a setup problem.
    pub fn from_kind(e: &impl HasKind) -> Self {
        match e.kind() {
            ErrorKind::Integrity => FollowError::Integrity(e.to_string()),
            ErrorKind::Transient | ErrorKind::Permanent => FollowError::Setup(e.to_string()),
        }
    }
}

impl HasKind for FollowError {
    fn kind(&self) -> ErrorKind {
        match self {
            FollowError::Integrity(_) => ErrorKind::Integrity,
            FollowError::Setup(_) => ErrorKind::Permanent,
            FollowError::Interrupted(_) => ErrorKind::Transient,
        }
    }
}

impl From<CursorError> for FollowError {
    fn from(e: CursorError) -> Self {
        FollowError::Setup(e.to_string())
    }
}

impl From<chainship_chain::DbError> for FollowError {
    fn from(e: chainship_chain::DbError) -> Self {
        FollowError::from_kind(&e)
    }
}

impl From<chainship_chain::Error> for FollowError {
    fn from(e: chainship_chain::Error) -> Self {
        FollowError::from_kind(&e)
    }
}
