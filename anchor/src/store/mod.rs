//! Anchor stores: where signed heads are kept, in another trust domain.
//!
//! A store does two things: write a head note for a seq if none is there
//! yet (never overwrite), and list the notes it holds for an origin. Every
//! backend is a small module implementing [`AnchorStore`].

pub mod file;
pub mod s3;

use std::fmt;

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

/// What a write found.
#[derive(Debug)]
pub enum PutOutcome {
    Created,
    /// A note for that seq was already there (its bytes).
    AlreadyThere(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct StoreError {
    /// Worth retrying (a server away, a timeout).
    pub transient: bool,
    pub message: String,
}

impl StoreError {
    pub fn transient(m: impl fmt::Display) -> Self {
        StoreError {
            transient: true,
            message: m.to_string(),
        }
    }
    pub fn permanent(m: impl fmt::Display) -> Self {
        StoreError {
            transient: false,
            message: m.to_string(),
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

#[async_trait]
pub trait AnchorStore: Send + Sync {
    /// Writes `note` as the head for `seq` unless one is already there.
    async fn put_new(&self, origin: &str, seq: u64, note: &[u8]) -> Result<PutOutcome, StoreError>;
    /// Every note kept for `origin`, sorted by name (so by seq).
    async fn list(&self, origin: &str) -> Result<Vec<StoredNote>, StoreError>;
    /// The seqs heads are kept for, ascending, from the names alone (no head
    /// is read: a name proves nothing, see [`crate::highest_verified_seq`]).
    async fn head_seqs(&self, origin: &str) -> Result<Vec<u64>, StoreError>;
    /// The note kept for `seq`, if there is one.
    async fn get_head(&self, origin: &str, seq: u64) -> Result<Option<StoredNote>, StoreError>;
    /// Checks that the store is reachable and writable, writing no head.
    async fn check(&self) -> Result<String, StoreError>;
    /// A short description for logs (no secrets).
    fn describe(&self) -> String;
}

/// Head names sort by seq: 20 digits, zero-padded.
pub fn head_name(seq: u64) -> String {
    format!("{seq:020}.head")
}

/// The seq a head name says it holds.
pub fn seq_from_name(name: &str) -> Option<u64> {
    let digits = name.rsplit('/').next()?.strip_suffix(".head")?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}
