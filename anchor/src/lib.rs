//! Anchoring: turning an exported log into evidence.
//!
//! Owns the signed head format (a C2SP signed note, [`signed_head`],
//! [`note`]), what signs them ([`signer`]; key files: [`keys`]), the write-once anchor stores kept in
//! another trust domain ([`store`]: `file:DIR`, `s3://BUCKET/PREFIX`),
//! publishing one head ([`publish`]) and judging a database or a copy
//! against every kept head ([`stream_audit`], one pass for every verifier;
//! a copy through [`copy_audit`]); and the transparency log beside
//! the heads: signed C2SP checkpoints ([`checkpoint`]), tiles published
//! write-once ([`log_publish`]) and judged ([`log_audit`]). When to publish is the follower's
//! business; this crate only knows how.

pub mod audit;
pub mod checkpoint;
pub mod copy_audit;
pub mod cosignature;
pub mod db_audit;
pub mod db_ranges;
pub mod export_check;
pub mod job_textfile;
pub mod keys;
pub mod log_audit;
pub mod log_publish;
pub mod note;
pub mod pkcs11;
pub mod policy;
pub mod proof_check;
pub mod prove;
pub mod publish;
pub mod signed_head;
pub mod signer;
pub mod ssh_agent;
pub mod store;
pub mod stream_audit;
pub mod tile_audit;
pub mod tile_reader;
pub mod url;
pub mod verify_state;
pub mod went_backwards;

pub use audit::{Finding, HeadSet, Kind};
pub use keys::SignerKey;
pub use note::VerifierKey;
pub use publish::{highest_verified_head, publish_head, publish_heartbeat};
pub use signed_head::SignedHead;
pub use signer::{Signer, Signers};
pub use store::{AnchorStore, StoreError};
pub use url::{AnchorUrl, open_store};

/// Runs a future to completion on a one-thread runtime (the unit tests'
/// way into the async store interface).
#[cfg(test)]
pub(crate) fn test_run<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a test runtime")
        .block_on(f)
}
