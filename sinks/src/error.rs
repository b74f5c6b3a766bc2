//! Sink errors are the workspace's one error shape ([`chainship_chain::Error`]):
//! the kind decides what the follower does next.

pub use chainship_chain::{Error as SinkError, ErrorKind};
