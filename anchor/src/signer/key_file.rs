//! Signing keys on disk: `chainship keygen` writes one, the follower loads it.
//!
//! The file holds one line in the Go `note` package's private key form,
//! `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || 32-byte seed)>`. It is
//! created with mode 0600 and never overwritten; a key file that group or
//! others can read is refused ([`crate::files`]).

use chainship_chain::{Error, permanent};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::SigningKey;

use super::Signer;
use crate::files::{read_small, readable_by_others};
use crate::note::{ED25519, VerifierKey, key_id, valid_key_name};
use crate::store::StoreError;

/// A key file's key, signing in this process.
struct FileSigner {
    name: String,
    key: SigningKey,
    path: Option<String>,
}

impl Signer for FileSigner {
    fn name(&self) -> &str {
        &self.name
    }

    fn public_key(&self) -> ed25519_dalek::VerifyingKey {
        self.key.verifying_key()
    }

    fn sign(&self, message: &[u8]) -> Result<ed25519_dalek::Signature, StoreError> {
        use ed25519_dalek::Signer as _;
        Ok(self.key.sign(message))
    }

    fn describe(&self) -> String {
        match &self.path {
            Some(path) => format!("the key file {path}"),
            None => format!("key {:?} in memory", self.name),
        }
    }
}

/// A named Ed25519 signing key.
pub struct SignerKey {
    pub name: String,
    pub key: SigningKey,
}

impl std::fmt::Debug for SignerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SignerKey({}, secret hidden)", self.name)
    }
}

impl SignerKey {
    /// A fresh key from the operating system's randomness.
    pub fn generate(name: &str) -> Result<SignerKey, Error> {
        if !valid_key_name(name) {
            return Err(permanent!(
                "key name {name:?}: a key name must be non-empty, without spaces or '+'"
            ));
        }
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| permanent!("no randomness for a key: {e}"))?;
        Ok(SignerKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    pub fn verifier(&self) -> VerifierKey {
        VerifierKey::new(&self.name, self.key.verifying_key())
    }

    /// The key as a [`Signer`] to hand to the publishers.
    pub fn shared(&self) -> Arc<dyn Signer> {
        Arc::new(FileSigner {
            name: self.name.clone(),
            key: self.key.clone(),
            path: None,
        })
    }

    /// Loads a key file as a [`Signer`].
    pub fn load_signer(path: &Path) -> Result<Arc<dyn Signer>, Error> {
        let key = SignerKey::load(path)?;
        Ok(Arc::new(FileSigner {
            name: key.name,
            key: key.key,
            path: Some(path.display().to_string()),
        }))
    }

    fn to_text(&self) -> String {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        let id = key_id(&self.name, self.key.verifying_key().as_bytes());
        format!("PRIVATE+KEY+{}+{}+{}\n", self.name, hex::encode(id), B64.encode(blob))
    }

    /// Writes the key to a new file (mode 0600); refuses to overwrite.
    pub fn write_new(&self, path: &Path) -> Result<(), Error> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| permanent!("{}: {}", path.display(), chainship_chain::access::explain(path, &e)))?;
        file.write_all(self.to_text().as_bytes())
            .and_then(|_| file.sync_all())
            .map_err(|e| permanent!("{}: {e}", path.display()))
    }

    /// Loads a key file, refusing one that anybody but its owner and this
    /// process can read (see [`readable_by_others`]).
    pub fn load(path: &Path) -> Result<SignerKey, Error> {
        let err = |why: String| permanent!("{}: {why}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| err(chainship_chain::access::explain(path, &e)))?;
        if let Some((who, fix)) = readable_by_others(path, &meta) {
            return Err(err(format!("{who} can read it; {fix}")));
        }
        let text = read_small(path, 64 * 1024).map_err(|e| err(e.message))?;
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| err("not a chainship signing key".into()))?;
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id), Some(blob)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(err("malformed key".into()));
        };
        let blob = B64.decode(blob).map_err(|_| err("malformed key".into()))?;
        if blob.len() != 33 || blob[0] != ED25519 || !valid_key_name(name) {
            return Err(err("malformed key".into()));
        }
        let seed: [u8; 32] = blob[1..].try_into().expect("32 bytes");
        let key = SignerKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        };
        if hex::encode(key_id(name, key.key.verifying_key().as_bytes())) != id {
            return Err(err("key id does not match the key".into()));
        }
        Ok(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn keygen_writes_0600_never_overwrites_and_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("k");
        let key = SignerKey::generate("prod-eu1/chainship").unwrap();
        key.write_new(&path).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert!(key.write_new(&path).is_err(), "must not overwrite");
        let back = SignerKey::load(&path).unwrap();
        assert_eq!(back.verifier(), key.verifier());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(SignerKey::load(&path).unwrap_err().message.contains("chmod 600"));
    }
}
