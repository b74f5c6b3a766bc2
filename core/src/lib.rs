//! The vocabulary every chainship crate shares, and nothing else (no I/O,
//! no dependencies): the one error shape ([`Error`], whose [`ErrorKind`]
//! alone decides what happens next, and the [`Setting`] at fault), and how
//! an origin becomes one segment of a key or an id ([`origin_segment`]).
//! Crates that must not pull in SQLite (the `s3` crate) depend on this one
//! instead of `chain`.

pub mod error;
pub mod origin;

pub use error::{Error, ErrorKind, HasKind, Setting};
pub use origin::{origin_from_segment, origin_segment, parse_origin};
