//! Why a follower stops: the workspace's one error shape, whose kind the
//! CLI maps to an exit code, or a shutdown that came while the sink failed.

use chainship_chain::{Error, ErrorKind, HasKind, Setting};

use crate::cursor::CursorError;

/// Errors that stop the follower.
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// Integrity (the database, cursor and sink disagree: exit 1), or
    /// anything else that stops it (bad configuration or input, a sink
    /// refusing us: exit 2).
    #[error("{0}")]
    Stop(Error),
    /// Shutdown came while the sink was still failing (handled inside the loop).
    #[error("{0}")]
    Interrupted(String),
}

impl FollowError {
    /// Bad configuration or input, or a sink refusing us.
    pub fn setup(message: impl std::fmt::Display) -> Self {
        FollowError::Stop(Error::permanent(message))
    }

    /// The database, cursor and sink disagree.
    pub fn integrity(message: impl std::fmt::Display) -> Self {
        FollowError::Stop(Error::integrity(message))
    }

    /// Any error of the workspace, by its kind (a transient one that reaches
    /// here was given up on: it stops the follower like a permanent one).
    pub fn from_kind(e: &impl HasKind) -> Self {
        let kind = match e.kind() {
            ErrorKind::Integrity => ErrorKind::Integrity,
            ErrorKind::Closed => ErrorKind::Closed,
            ErrorKind::Transient | ErrorKind::Permanent => ErrorKind::Permanent,
        };
        let error = Error::new(kind, e.bare_message());
        FollowError::Stop(match e.setting() {
            Some(s) => error.with_setting(s),
            None => error,
        })
    }
}

impl HasKind for FollowError {
    fn kind(&self) -> ErrorKind {
        match self {
            FollowError::Stop(e) => e.kind,
            FollowError::Interrupted(_) => ErrorKind::Transient,
        }
    }

    fn setting(&self) -> Option<Setting> {
        match self {
            FollowError::Stop(e) => e.setting,
            FollowError::Interrupted(_) => None,
        }
    }

    fn bare_message(&self) -> String {
        match self {
            FollowError::Stop(e) => e.message.clone(),
            FollowError::Interrupted(m) => m.clone(),
        }
    }
}

impl From<CursorError> for FollowError {
    fn from(e: CursorError) -> Self {
        FollowError::setup(e)
    }
}

impl From<chainship_chain::DbError> for FollowError {
    fn from(e: chainship_chain::DbError) -> Self {
        FollowError::from_kind(&e)
    }
}

impl From<Error> for FollowError {
    fn from(e: Error) -> Self {
        FollowError::from_kind(&e)
    }
}
