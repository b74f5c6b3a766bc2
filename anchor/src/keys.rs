//! Signing keys on disk: `chainship keygen` writes one, the follower loads it.
//!
//! The file holds one line in the Go `note` package's private key form,
//! `PRIVATE+KEY+<name>+<hex key id>+<base64(0x01 || 32-byte seed)>`. It is
//! created with mode 0600 and never overwritten; a key file that group or
//! others can read is refused.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use ed25519_dalek::SigningKey;

use crate::note::{ED25519, VerifierKey, key_id, valid_key_name};

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
    pub fn generate(name: &str) -> Result<SignerKey, String> {
        if !valid_key_name(name) {
            return Err(format!(
                "key name {name:?}: a key name must be non-empty, without spaces or '+'"
            ));
        }
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| format!("no randomness for a key: {e}"))?;
        Ok(SignerKey {
            name: name.to_owned(),
            key: SigningKey::from_bytes(&seed),
        })
    }

    pub fn verifier(&self) -> VerifierKey {
        VerifierKey::new(&self.name, self.key.verifying_key())
    }

    fn to_text(&self) -> String {
        let mut blob = vec![ED25519];
        blob.extend_from_slice(self.key.as_bytes());
        let id = key_id(&self.name, self.key.verifying_key().as_bytes());
        format!("PRIVATE+KEY+{}+{}+{}\n", self.name, hex::encode(id), B64.encode(blob))
    }

    /// Writes the key to a new file (mode 0600); refuses to overwrite.
    pub fn write_new(&self, path: &Path) -> Result<(), String> {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        file.write_all(self.to_text().as_bytes())
            .and_then(|_| file.sync_all())
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Loads a key file, refusing one that group or others can read.
    pub fn load(path: &Path) -> Result<SignerKey, String> {
        let err = |why: String| format!("{}: {why}", path.display());
        let meta = std::fs::metadata(path).map_err(|e| err(e.to_string()))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(err(format!("mode {mode:o} lets group or others read it; chmod 600 it")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
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

/// Reads trusted verifier keys: each argument is a key, or a file of keys
/// (one a line, `#` comments allowed). A key may be followed by
/// ` until=SEQ`: retired at a rotation, it is trusted for heads up to SEQ
/// only (see the README, "Rotating the signing key").
pub fn load_trusted(args: &[String]) -> Result<Vec<VerifierKey>, String> {
    let mut keys = Vec::new();
    for arg in args {
        if arg.contains('+') && !Path::new(arg).exists() {
            keys.push(parse_trusted(arg)?);
            continue;
        }
        let text = std::fs::read_to_string(arg).map_err(|e| format!("{arg}: {e}"))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            keys.push(parse_trusted(line).map_err(|e| format!("{arg} line {}: {e}", n + 1))?);
        }
    }
    if keys.is_empty() {
        return Err("at least one trusted key is needed".into());
    }
    Ok(keys)
}

/// `KEY`, then optionally `until=SEQ` and `origin=ORIGIN`.
fn parse_trusted(text: &str) -> Result<VerifierKey, String> {
    let mut words = text.split_whitespace();
    let mut key = VerifierKey::parse(words.next().unwrap_or_default())?;
    for word in words {
        if let Some(seq) = word.strip_prefix("until=") {
            if key.retired_after.is_some() {
                return Err(format!("{word:?}: a key is retired once (one until=SEQ)"));
            }
            let seq = seq
                .parse::<u64>()
                .map_err(|_| format!("{word:?}: until=SEQ takes the last seq the key vouches for"))?;
            key.retired_after = Some(seq);
        } else if let Some(origin) = word.strip_prefix("origin=") {
            if key.only_origin.is_some() || origin.is_empty() {
                return Err(format!("{word:?}: one origin=ORIGIN a key"));
            }
            key.only_origin = Some(origin.to_owned());
        } else {
            return Err(format!(
                "{word:?}: after a key only until=SEQ (the last seq it vouches for) and origin=ORIGIN (the one log it vouches for) may follow"
            ));
        }
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(SignerKey::load(&path).unwrap_err().contains("chmod 600"));
    }

    #[test]
    fn trusted_keys_from_arguments_and_files() {
        let dir = tempfile::tempdir().unwrap();
        let a = SignerKey::generate("a").unwrap().verifier().to_text();
        let b = SignerKey::generate("b").unwrap().verifier().to_text();
        let file = dir.path().join("keys");
        std::fs::write(&file, format!("# old and new\n{a}\n\n{b}\n")).unwrap();
        assert_eq!(load_trusted(&[file.to_str().unwrap().into()]).unwrap().len(), 2);
        assert_eq!(load_trusted(std::slice::from_ref(&a)).unwrap()[0].name, "a");
        assert!(load_trusted(&[]).is_err());
        let retired = load_trusted(&[format!("{a} until=200")]).unwrap();
        assert_eq!(retired[0].retired_after, Some(200));
        assert!(retired[0].trusted_for("o", 200) && !retired[0].trusted_for("o", 201));
        let scoped = load_trusted(&[format!("{a} origin=prod/agentrt until=9")]).unwrap();
        assert!(scoped[0].trusted_for("prod/agentrt", 9));
        assert!(!scoped[0].trusted_for("evil/agentrt", 9) && !scoped[0].trusted_for("prod/agentrt", 10));
        assert!(load_trusted(&[format!("{a} origin=")]).is_err());
        std::fs::write(&file, format!("{a} until=7\n{b}\n")).unwrap();
        let both = load_trusted(&[file.to_str().unwrap().into()]).unwrap();
        assert_eq!((both[0].retired_after, both[1].retired_after), (Some(7), None));
        assert!(
            load_trusted(&[format!("{a} until=soon")])
                .unwrap_err()
                .contains("until=SEQ")
        );
    }
}
