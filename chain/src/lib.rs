//! The audit chain itself, shared by every other crate.
//!
//! Owns the event format and its netstring SHA-256 hash ([`hash`]), heads
//! (`SEQ:HASH`, [`head`]), the settable table and column names ([`schema`]),
//! reading the events table read-only and in bounded pages ([`db`],
//! [`read_ahead`], waking on writes: [`change_watch`]), the rule that decides where a chain breaks ([`check`]), walking a whole
//! database against kept heads ([`walk`]), the exact invalid ranges past a
//! break ([`ranges`]) and
//! the JSON record every sink ships, in chainship's own shape or a SIEM's
//! (OCSF, ECS) carrying it whole, read back in any of them ([`record`]), the
//! payload fields and event times the run rules and the SIEM mapping read
//! ([`payload`], [`time`]), the one table of a runtime's event types and the
//! part each plays, shared by the run check and the SIEM mapping ([`profile`]), and the error vocabulary
//! every crate speaks ([`error`]), and replacing a small file whole
//! ([`atomic_file`]), and what a redacted event must still match
//! ([`redaction`]). It never writes a database.

pub mod access;
pub mod atomic_file;
pub mod change_watch;
pub mod check;
pub mod db;
pub mod event;
pub mod hash;
pub mod head;
pub mod held;
pub mod payload;
pub mod profile;
pub mod ranges;
pub mod read_ahead;
pub mod record;
pub mod redaction;
pub mod schema;
pub mod time;
pub mod walk;

pub use chainship_core::{Error, ErrorKind, HasKind, Setting, error, origin};
pub use chainship_core::{integrity, permanent, transient};
pub use chainship_core::{origin_from_segment, origin_segment};
pub use check::{BreakKind, ChainBreak, ChainCheck};
pub use db::{DbError, EventDb, FileIdentity, OpenOptions};
pub use event::{EventBatch, EventRef};
pub use hash::{HexHash, PrevHash, event_hash};
pub use head::{Head, HeadParseError};
pub use held::HeldCheck;
pub use ranges::{InvalidRange, RangeClassifier, RangeKind, Vouch};
pub use read_ahead::{ReadAhead, ReadPlan, Recycler, Waited};
pub use schema::{AGENTRT_EVENTS_INDEX, AGENTRT_EVENTS_TABLE, Schema, SchemaError};
pub use walk::{HeadCheck, TreeGroups, WalkPlan, WalkReport, walk_chain};
