//! Anchoring: putting a log's head where its writer cannot reach.
//!
//! Owns the signed head format (a C2SP signed note, [`signed_head`],
//! [`note`]), what signs them ([`signer`]: key files, PKCS#11 tokens,
//! ssh-agent), witness cosignatures and the policy that counts them
//! ([`cosignature`], [`policy`]), the write-once anchor stores kept in
//! another trust domain ([`store`]: `file:DIR`, `s3://BUCKET/PREFIX`, its
//! layout in [`store::layout`]), publishing one head ([`publish`]), and the
//! transparency log beside the heads: signed C2SP checkpoints
//! ([`checkpoint`]) and tiles published write-once ([`log_publish`]) and
//! read back ([`tile_reader`]), and the signed statements that withhold one
//! event's payload ([`redaction`]). When to publish is the follower's business;
//! judging what was published is `chainship-verify`'s.

pub mod batch_verify;
pub mod checkpoint;
pub mod cosignature;
pub mod files;
pub mod keys;
pub mod log_publish;
pub mod note;
pub mod policy;
pub mod publish;
pub mod redaction;
pub mod signed_head;
pub mod signer;
pub mod store;
pub mod tile_reader;
pub mod url;

pub use note::VerifierKey;
pub use publish::{highest_verified_head, publish_head, publish_heartbeat};
pub use signed_head::SignedHead;
pub use signer::SignerKey;
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
