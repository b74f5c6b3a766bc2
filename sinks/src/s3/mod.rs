//! `s3://BUCKET/PREFIX`: both directions of the S3 sink. [`config`],
//! [`compression`] (gzip, zstd), [`objects`] (naming, listing, reading a
//! batch object), [`writer`] (the sink) and [`reader`] (`verify-export`).
//! The S3 plumbing itself (client, errors, write-once upload) is the
//! `chainship-s3` crate, shared with the anchor store.

pub mod compression;
pub mod config;
pub mod objects;
pub mod reader;
pub mod tail;
pub mod tombstone;
pub mod writer;

pub use config::S3Config;
pub use objects::{ObjectRange, parse_object_name};
pub use writer::S3Sink;
