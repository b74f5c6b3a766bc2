//! What signs heads and checkpoints: one narrow interface, so a key kept
//! off the follower's disk (a PKCS#11 token, an ssh-agent) is one module
//! beside the key file's ([`key_file::SignerKey`]). The implementations
//! depend on this trait; only [`open`] knows them all.
//!
//! A signer names its key (the name in a signed note's signature line),
//! gives its Ed25519 public key, and signs a message. Signing may fail (a
//! token removed, an agent gone): the failure is transient, so the
//! follower retries the publication, as it does for a store that is down.

use std::sync::Arc;

use ed25519_dalek::{Signature, VerifyingKey};

use crate::note::{NoteSignature, SignedNote, VerifierKey, key_id};
use crate::store::StoreError;

pub mod key_file;
mod open;
pub mod pkcs11;
pub mod ssh_agent;

pub use key_file::SignerKey;
pub use open::{open, shown};

/// Signs the follower's notes (see the module doc).
pub trait Signer: Send + Sync {
    /// The key's name, written in each signature line.
    fn name(&self) -> &str;
    /// The Ed25519 public key the signatures verify with.
    fn public_key(&self) -> VerifyingKey;
    /// An Ed25519 signature of `message`.
    fn sign(&self, message: &[u8]) -> Result<Signature, StoreError>;
    /// Where the key lives, for logs (never the secret).
    fn describe(&self) -> String;
}

/// The signers a follower holds (more than one while a key is rotated).
pub type Signers = [Arc<dyn Signer>];

/// The verifier key of `signer`, as `--trusted-key` takes it.
pub fn verifier(signer: &dyn Signer) -> VerifierKey {
    VerifierKey::new(signer.name(), signer.public_key())
}

/// The verifier keys of `signers`.
pub fn verifiers(signers: &Signers) -> Vec<VerifierKey> {
    signers.iter().map(|s| verifier(s.as_ref())).collect()
}

/// `text` as a signed note, one signature line per signer. A signature
/// that does not verify with the signer's own public key (a token that
/// answered with junk) is refused here, never published.
pub fn sign_note(text: &str, signers: &Signers) -> Result<SignedNote, StoreError> {
    let mut signatures = Vec::with_capacity(signers.len());
    for signer in signers {
        let signature = signer.sign(text.as_bytes())?;
        let key = signer.public_key();
        if key.verify_strict(text.as_bytes(), &signature).is_err() {
            return Err(StoreError::transient(format!(
                "{} returned a signature that does not verify with its public key",
                signer.describe()
            )));
        }
        signatures.push(NoteSignature {
            name: signer.name().to_owned(),
            id: key_id(signer.name(), key.as_bytes()),
            signature: signature.to_bytes().to_vec(),
        });
    }
    Ok(SignedNote {
        text: text.to_owned(),
        signatures,
    })
}

#[cfg(test)]
mod tests {
    use super::SignerKey;
    use super::*;

    /// A signer whose key is not the one it claims (a token answering with
    /// another key's signature), or that is gone.
    struct Broken {
        claims: VerifyingKey,
        signs_with: Option<SignerKey>,
    }

    impl Signer for Broken {
        fn name(&self) -> &str {
            "o"
        }
        fn public_key(&self) -> VerifyingKey {
            self.claims
        }
        fn sign(&self, message: &[u8]) -> Result<Signature, StoreError> {
            use ed25519_dalek::Signer as _;
            match &self.signs_with {
                Some(k) => Ok(k.key.sign(message)),
                None => Err(StoreError::transient("the token was removed")),
            }
        }
        fn describe(&self) -> String {
            "a broken token".into()
        }
    }

    #[test]
    fn a_note_is_signed_by_each_signer_and_verifies() {
        let (a, b) = (SignerKey::generate("o").unwrap(), SignerKey::generate("o").unwrap());
        let note = sign_note("o\n5\n", &[a.shared(), b.shared()]).unwrap();
        assert_eq!(note.signatures.len(), 2);
        let reparsed = SignedNote::parse(note.to_text().as_bytes()).unwrap();
        assert_eq!(a.verifier().check(&reparsed), Some(true));
        assert_eq!(verifier(b.shared().as_ref()).check(&reparsed), Some(true));
    }

    #[test]
    fn a_signature_that_does_not_verify_or_a_signer_that_is_gone_signs_nothing() {
        let real = SignerKey::generate("o").unwrap();
        let wrong: Arc<dyn Signer> = Arc::new(Broken {
            claims: real.key.verifying_key(),
            signs_with: Some(SignerKey::generate("o").unwrap()),
        });
        let e = sign_note("o\n5\n", &[real.shared(), wrong]).unwrap_err();
        assert!(e.message.contains("does not verify with its public key"), "{e}");
        let gone: Arc<dyn Signer> = Arc::new(Broken {
            claims: real.key.verifying_key(),
            signs_with: None,
        });
        let e = sign_note("o\n5\n", &[gone]).unwrap_err();
        assert_eq!(e.kind, chainship_chain::ErrorKind::Transient);
    }
}
