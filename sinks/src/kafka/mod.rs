//! `kafka://HOST:PORT[,HOST:PORT...]/TOPIC`: both directions of the Kafka
//! sink. [`config`] (URL and client settings), [`partition`] (which
//! partition an origin uses), `scan` (reading a partition to its end),
//! [`writer`] (the exactly-once sink) and [`reader`] (`verify-export`).

pub mod config;
pub mod partition;
pub mod reader;
mod scan;
pub mod tail;
pub mod tombstone;
pub mod writer;

use chainship_chain::record::{Record, RecordError};

pub use config::{KafkaConfig, parse_option, transactional_id};
pub use partition::partition_for;
pub use writer::KafkaSink;

/// Whether a message in the origin's partition is the origin's: keyed with
/// it, or — whatever its key — a record whose value names it (a record
/// filed under another key is still one a consumer of values would take as
/// this origin's, so it must be checked, never skipped).
pub fn belongs_to(origin: &str, key: Option<&[u8]>, parsed: &Result<Record<'_>, RecordError>) -> bool {
    let named = match parsed {
        Ok(r) => r.origin == origin,
        Err(e) => e.carried().is_some_and(|r| r.origin == origin),
    };
    key == Some(origin.as_bytes()) || named
}
