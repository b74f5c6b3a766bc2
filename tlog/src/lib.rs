//! The transparency-log view of the chain: an RFC 6962 Merkle tree whose
//! entries are the events' stored hashes, in seq order.
//!
//! Owns the tree arithmetic ([`merkle`]: leaf and node hashes, roots,
//! inclusion and consistency proofs and their verification), the C2SP
//! `tlog-tiles` layout ([`tiles`]: building tiles and entry bundles while
//! keeping only the right edge, reading proofs back out of tiles, and
//! proving tiles read from elsewhere belong to a tree) and
//! the C2SP `tlog-proof` text ([`proof`]). No I/O: where tiles are kept and
//! how checkpoints are signed is the anchor crate's business.
//!
//! Entry `i` of the tree is the stored `hash` of the event with seq `i + 1`
//! (64 lower-case hex characters, as text); a tree of size `N` is the chain
//! up to seq `N`.

pub mod merkle;
pub mod proof;
pub mod range;
pub mod tiles;

pub use merkle::{CompactRange, Hash, leaf_hash, node_hash};

/// A hash in standard base64, as checkpoints and proofs write it.
pub fn hash_b64(hash: &Hash) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(hash)
}
