//! Anchor stores: where signed heads are kept, in another trust domain.
//!
//! Each backend is a small module implementing [`ObjectStore`] (create
//! once, replace the one pointer, fetch, list); the anchor layout above it
//! ([`AnchorStore`]: which names are heads, checkpoints and tiles, where an
//! origin lives) is written once, in [`layout`], for all of them.

pub mod file;
pub mod layout;
pub mod memory;
pub mod s3;

use async_trait::async_trait;

/// A head note as kept in a store.
#[derive(Clone, Debug)]
pub struct StoredNote {
    /// The file or object name, for messages.
    pub name: String,
    /// The seq the name says it holds.
    pub seq_in_name: Option<u64>,
    pub bytes: Vec<u8>,
}

/// A kept note's or checkpoint's name, parsed: the seq (or tree size) it
/// says it holds and, for a heartbeat or a checkpoint written beside a
/// squatted name, the unix seconds in it (0 for the plain name). Sixteen
/// bytes: a listing of millions stays small, and sorts by seq.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NameKey {
    pub seq: u64,
    pub beside: u64,
}

impl NameKey {
    /// From a head or heartbeat name (`<seq>.head`, `<seq>.<unix>.head`).
    pub fn from_note_name(name: &str) -> Option<NameKey> {
        let stem = name.strip_suffix(".head")?;
        NameKey::from_log_name(stem)
    }

    /// From a checkpoint's name (`<size>`, `<size>.<unix>`).
    pub fn from_log_name(name: &str) -> Option<NameKey> {
        let key = match name.split_once('.') {
            None => NameKey {
                seq: twenty_digits(name)?,
                beside: 0,
            },
            Some((seq, at)) => NameKey {
                seq: twenty_digits(seq)?,
                // 0 is the plain name's: a name claiming it is not a note.
                beside: twenty_digits(at).filter(|t| *t > 0)?,
            },
        };
        Some(key)
    }

    /// The head or heartbeat name it was parsed from.
    pub fn note_name(&self) -> String {
        match self.beside {
            0 => head_name(self.seq),
            at => heartbeat_name(self.seq, at),
        }
    }

    /// The checkpoint name it was parsed from.
    pub fn log_name(&self) -> String {
        match self.beside {
            0 => format!("{:020}", self.seq),
            at => format!("{:020}.{at:020}", self.seq),
        }
    }
}

/// Where a listing by seq starts: every name of `seq` or above sorts after
/// it (`<seq>.head`, `<seq>.<unix>.head` and `<seq>` itself follow it).
pub fn listing_start(seq: u64) -> Option<String> {
    // "<seq-1>" + "~" sorts after every name of seq-1 ('~' follows '.' and
    // every digit) and before "<seq>".
    seq.checked_sub(1).map(|s| format!("{s:020}~"))
}

/// What a write found.
#[derive(Debug)]
pub enum PutOutcome {
    Created,
    /// A note for that seq was already there (its bytes).
    AlreadyThere(Vec<u8>),
}

/// Store errors are the workspace's one error shape: a heads-disagree
/// finding is [`chainship_chain::ErrorKind::Integrity`] (never retried; the
/// follower stops with exit 1).
pub use chainship_chain::Error as StoreError;

/// The names kept below a point, as a count and an order-free digest of
/// the names themselves: a name removed and another added in its place
/// (a swap) changes the digest though not the count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Below {
    pub count: u64,
    /// The wrapping sum of the first 8 bytes of each name's SHA-256.
    pub digest: u64,
}

impl Below {
    pub fn add(&mut self, name: &str) {
        use sha2::{Digest, Sha256};
        let h = Sha256::digest(name.as_bytes());
        let word = u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]);
        self.count += 1;
        self.digest = self.digest.wrapping_add(word);
    }
}

/// Names in a listed part of the store that are none of the layout's
/// (`checkpoints/foo`, a tile path out of the grammar, a heartbeat in the
/// wrong format): planted, or left by another tool. Never read as notes, and
/// never silent: verifiers say them as a warning (the first few, and how many).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Junk {
    pub first: Vec<String>,
    pub count: u64,
}

impl Junk {
    /// Names kept to show; the rest are counted.
    const SHOWN: usize = 5;

    pub fn add(&mut self, path: String) {
        self.count += 1;
        if self.first.len() < Self::SHOWN {
            self.first.push(path);
        }
    }

    pub fn extend(&mut self, other: Junk) {
        self.count += other.count;
        for path in other.first {
            if self.first.len() < Self::SHOWN {
                self.first.push(path);
            }
        }
    }

    /// The warning, when there is anything to say.
    pub fn warning(&self, origin: &str) -> Option<String> {
        (self.count > 0).then(|| {
            let more = self.count.saturating_sub(self.first.len() as u64);
            format!(
                "the anchor store holds {} name(s) under {origin} that are not part of its layout, ignored: {}{}",
                self.count,
                self.first
                    .iter()
                    .map(|p| format!("{p:?}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            )
        })
    }
}

/// A listing of notes or checkpoints from a seq: their keys, those below
/// the start when the store can tell, and the names that are neither.
#[derive(Debug, Default)]
pub struct Listed {
    pub keys: Vec<NameKey>,
    pub below: Option<Below>,
    pub junk: Junk,
}

/// Objects fetched at once by the default [`ObjectStore::fetch_many`]:
/// enough to hide a network store's round trips.
pub const FETCHES_IN_FLIGHT: usize = 16;

/// What a backend provides: bytes under keys relative to the store's root
/// (`<origin>/<name>`, `<origin>/tile/0/000`), each written once, except
/// the one pointer tlog clients read first. Everything about names (which
/// are heads, checkpoints, tiles; where an origin lives; what a listing
/// from a seq means) is written once above it, in [`layout`]: a new store
/// (GCS, Azure) is one module implementing these methods.
#[async_trait]
pub trait ObjectStore: Send + Sync {
    /// Writes `bytes` at `key` unless an object is there (then its bytes):
    /// never replaces, and an object appears whole or not at all.
    async fn create(&self, key: &str, bytes: &[u8]) -> Result<PutOutcome, StoreError>;
    /// Writes `bytes` at `key`, replacing what is there (only the pointer).
    async fn replace(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// The object at `key`, if there is one.
    async fn fetch(&self, key: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// The objects at `keys`, in order: a pass over years of heads reads
    /// them a chunk at a time. Here, [`FETCHES_IN_FLIGHT`] at once; a store
    /// that can read many with less overhead per object does so.
    async fn fetch_many(&self, keys: &[String]) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
        use futures::StreamExt;
        // A loop, not a stream combinator: async_trait's boxed futures
        // trip the compiler's higher-ranked lifetime check in a closure.
        let mut read = Vec::with_capacity(keys.len());
        let mut in_flight = futures::stream::FuturesOrdered::new();
        for key in keys {
            if in_flight.len() == FETCHES_IN_FLIGHT
                && let Some(object) = in_flight.next().await
            {
                read.push(object?);
            }
            in_flight.push_back(self.fetch(key));
        }
        while let Some(object) = in_flight.next().await {
            read.push(object?);
        }
        Ok(read)
    }
    /// Calls `each` with the name, relative to `prefix` (which ends in
    /// `/`), of every object directly under it, or at any depth when
    /// `deep`; from after `start_after` where the store can start a listing
    /// there. True when it visited every name anyway (a directory).
    async fn scan(
        &self,
        prefix: &str,
        deep: bool,
        start_after: Option<&str>,
        each: &mut (dyn for<'n> FnMut(&'n str) + Send),
    ) -> Result<bool, StoreError>;
    /// Checks that the store is reachable and writable, writing nothing it keeps.
    async fn probe(&self) -> Result<String, StoreError>;
    /// Whether the store can be used at all, writing nothing: a setting that
    /// can never work (no credentials anywhere) is a permanent error, said
    /// before anything is shipped; a store that is only away is not an
    /// error here.
    async fn ready(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// A short description for logs (no secrets).
    fn location(&self) -> String;

    /// [`ObjectStore::create`] for many objects (tiles): each outcome in
    /// order. A store may overlap the writes or make them durable together.
    async fn create_many(&self, objects: &[(String, &[u8])]) -> Result<Vec<PutOutcome>, StoreError> {
        let mut outcomes = Vec::with_capacity(objects.len());
        for (key, bytes) in objects {
            outcomes.push(self.create(key, bytes).await?);
        }
        Ok(outcomes)
    }
    /// Where `origin`'s objects live: `<origin>/`.
    fn origin_prefix(&self, origin: &str) -> String {
        format!("{origin}/")
    }
    /// The origin a key of a deep listing from the store's root is under,
    /// and the key's path under it: the inverse of [`Self::origin_prefix`].
    /// An origin's path holds `/`, but never a layout name after its first
    /// part (`chainship_core::parse_origin`), so the first such part ends it.
    fn split_origin<'k>(&self, key: &'k str) -> Option<(String, &'k str)> {
        let mut at = key.find('/')?;
        loop {
            let rest = &key[at + 1..];
            let part = rest.split('/').next().unwrap_or_default();
            if matches!(
                part,
                LATEST_CHECKPOINT | CHECKPOINTS_DIR | COSIGNED_DIR | REDACTIONS_DIR | "tile"
            ) || note_seq(part).is_some()
            {
                let origin = chainship_chain::origin::parse_origin(&key[..at]).ok()?;
                return Some((origin, rest));
            }
            at += 1 + rest.find('/')?;
        }
    }
    /// The full name of `key`, for messages (a path, a URL).
    fn locate(&self, key: &str) -> String {
        format!("{}/{key}", self.location())
    }
}

pub use layout::{AnchorStore, OriginNames};

/// Where standard tlog clients read the newest checkpoint (C2SP tlog-tiles).
pub const LATEST_CHECKPOINT: &str = "checkpoint";
/// The directory of the kept checkpoints, one per published size.
pub const CHECKPOINTS_DIR: &str = "checkpoints";
/// The directory of the cosigned checkpoints (see `crate::cosignature`).
pub const COSIGNED_DIR: &str = "cosigned";
/// The directory of the redaction statements (see `crate::redaction`).
pub const REDACTIONS_DIR: &str = "redactions";

/// A transparency-log object's path: `checkpoint`, `checkpoints/<name>`,
/// `cosigned/<name>` or `tile/...`, or a redaction statement's
/// (`redactions/<name>`), each part made of `[A-Za-z0-9._-]`, none starting with a dot.
pub fn valid_log_path(path: &str) -> bool {
    let part_ok = |p: &str| {
        !p.is_empty() && !p.starts_with('.') && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    let top_ok = path == LATEST_CHECKPOINT
        || path.starts_with("checkpoints/")
        || path.starts_with("cosigned/")
        || path.starts_with("redactions/")
        || path.starts_with("tile/");
    top_ok && path.split('/').all(part_ok)
}

/// Head names sort by seq: 20 digits, zero-padded.
pub fn head_name(seq: u64) -> String {
    format!("{seq:020}.head")
}

/// A heartbeat: the same head published again while the log is idle, so a
/// kept note younger than `--max-age` means "the follower vouched within
/// this time", not "the runtime was busy". Its own name, write-once like a
/// head's: `<seq, 20 digits>.<unix seconds, 20 digits>.head`.
pub fn heartbeat_name(seq: u64, unix_seconds: u64) -> String {
    format!("{seq:020}.{unix_seconds:020}.head")
}

/// The seq a head name (`<seq>.head`, not a heartbeat) says it holds.
pub fn seq_from_name(name: &str) -> Option<u64> {
    let digits = name.rsplit('/').next()?.strip_suffix(".head")?;
    twenty_digits(digits)
}

/// The seq any kept note's name says it holds: a head or a heartbeat.
pub fn note_seq(name: &str) -> Option<u64> {
    let stem = name.rsplit('/').next()?.strip_suffix(".head")?;
    match stem.split_once('.') {
        None => twenty_digits(stem),
        Some((seq, at)) => twenty_digits(at).and(twenty_digits(seq)),
    }
}

fn twenty_digits(digits: &str) -> Option<u64> {
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}
