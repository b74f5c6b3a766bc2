//! Where the chain is shipped to, and read back from.
//!
//! Owns the [`Sink`] interface and its implementations, each in its own
//! module owning both directions (writing, and reading a copy back for
//! `verify-export`): [`file`] (JSON Lines), [`stdout`], [`kafka`] and
//! [`s3`]. A sink answers two questions, nothing more: "what do you already
//! hold for this origin?" (so a restarted follower resumes after it and
//! never delivers twice) and "deliver this batch" (acknowledged only once it
//! is durable). Positions, verification and retries live once, in the
//! follower, above this interface. Each sink declares how it wants its
//! batches built ([`policy`]). A redacted record's tombstone is put in a
//! copy by [`tombstone`], each sink its own way. Adding a sink is one module and its arms in
//! [`config`], the one list of sinks (parsing, showing, opening, reading
//! back and batching, each an exhaustive match the compiler checks).

pub mod batch;
pub mod config;
pub mod error;
pub mod file;
pub mod file_tail;
pub mod kafka;
pub mod lines;
pub mod policy;
pub mod s3;
pub mod shared;
pub mod stdout;
pub mod tail;
pub mod tombstone;

pub use batch::{Batch, RecordMeta};
pub use config::{SinkConfig, SinkUrlError};
pub use error::{ErrorKind, SinkError};
pub use lines::OnRecord;
pub use policy::BatchPolicy;
pub use shared::{OnSharedRecord, Shard, SharedRead};

use async_trait::async_trait;
use chainship_chain::Head;

/// A destination for batches of records of one origin.
#[async_trait]
pub trait Sink: Send {
    /// What this sink provably holds past `after` (the last trusted head,
    /// `None`: from seq 1): every record it holds for its origin with a
    /// higher seq is read back and fed to a [`chainship_chain::HeldCheck`],
    /// so the answer is the last of an unbroken run of records that re-hash
    /// and link from `after` — or `after` itself when nothing is past it.
    /// A record that does not fit (junk, a gap, another origin, a
    /// differing duplicate) is an integrity error naming where it is: a
    /// planted claim must never make the follower skip events. Sinks that
    /// cannot read back answer `after`.
    async fn held(&mut self, after: Option<Head>) -> Result<Option<Head>, SinkError>;

    /// Whether the sink still holds `head`'s own record (the cursor's: it was
    /// delivered before). A sink that lost it (restored from an older copy,
    /// truncated, an object deleted, retention) would otherwise get the next
    /// events appended after a silent gap. Sinks that cannot read back say yes.
    async fn holds(&mut self, head: Head) -> Result<bool, SinkError> {
        let _ = head;
        Ok(true)
    }

    /// Delivers a batch; returns only once the sink has made it durable.
    async fn deliver(&mut self, batch: &Batch) -> Result<(), SinkError>;

    /// Whether `held` can answer: a sink that cannot read back what it
    /// holds gives at-least-once delivery across crashes, not exactly-once.
    fn reads_back(&self) -> bool {
        true
    }

    /// Checks, without delivering anything, that the sink is reachable and
    /// writable (`chainship check`); returns what it found.
    async fn check(&mut self) -> Result<String, SinkError>;

    /// A short description for logs (no secrets).
    fn describe(&self) -> String;
}

/// Builds the sink `cfg` names, for records of `origin`.
pub fn open_sink(cfg: &SinkConfig, origin: &str) -> Box<dyn Sink> {
    cfg.open(origin)
}

/// What reading a copy found besides its records.
#[derive(Debug, Default)]
pub struct ReadReport {
    /// Records of the origin found where its records do not belong but a
    /// consumer of the copy reads them (another partition of the topic).
    pub strays: Vec<Stray>,
    /// What was left unread, when the reading was narrowed to a part.
    pub narrowed: Option<String>,
}

/// Records of the origin in one place they do not belong.
#[derive(Debug)]
pub struct Stray {
    pub place: String,
    pub records: u64,
}

/// Reads the copy `cfg` names back, calling `each(line, place)` for every
/// record line of `origin` in the order the copy holds them (a topic: the
/// origin's partition first, then every other): what `chainship
/// verify-export` checks.
pub async fn read_records(cfg: &SinkConfig, origin: &str, each: &mut OnRecord<'_>) -> Result<ReadReport, SinkError> {
    cfg.read(origin, each).await
}
