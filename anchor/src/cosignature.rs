//! Witness cosignatures (C2SP `tlog-cosignature`, `cosignature/v1`,
//! Ed25519): what a witness adds to a checkpoint once it has checked that
//! the log only grew since the last checkpoint it saw.
//!
//! A witness key is a verifier key of signature type `0x04`:
//! `<name>+<hex key id>+<base64(0x04 || public key)>`, key id
//! `SHA-256(name || "\n" || 0x04 || public key)[:4]`. A cosignature line is
//! `— <name> base64(key id || u64 timestamp (big-endian) || signature)`,
//! the signature over `cosignature/v1\ntime <timestamp>\n` followed by the
//! checkpoint's note text.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chainship_chain::{Error, permanent};
use ed25519_dalek::{Signature, VerifyingKey};

use crate::note::{SignedNote, parse_vkey, typed_key_id};

/// The signature type byte of an Ed25519 cosignature key.
pub const COSIGNATURE_V1: u8 = 0x04;

/// A witness's verifier key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WitnessKey {
    pub name: String,
    pub id: [u8; 4],
    pub key: VerifyingKey,
    /// A policy's witness (its `name` is the policy's local one): a
    /// cosignature line of any name counts when its key id is this key's
    /// under that name.
    pub any_name: bool,
}

impl WitnessKey {
    /// Reads a witness's vkey (`NAME+KEYID+BASE64`, type 0x04, C2SP
    /// tlog-cosignature).
    pub fn parse(text: &str) -> Result<WitnessKey, Error> {
        let (name, id, key) = parse_vkey(text, COSIGNATURE_V1, "witness key (cosignature/v1)")?;
        Ok(WitnessKey {
            name,
            id,
            key,
            any_name: false,
        })
    }

    /// The vkey text, as parsed.
    pub fn to_text(&self) -> String {
        let mut blob = vec![COSIGNATURE_V1];
        blob.extend_from_slice(self.key.as_bytes());
        format!("{}+{}+{}", self.name, hex::encode(self.id), B64.encode(blob))
    }

    /// Checks this witness's cosignature line(s) on `note`: `None` when the
    /// note has none, else the timestamp of the first when every one
    /// verifies, or `Some(Err)` when any does not (a good line must not
    /// hide a forged one beside it).
    pub fn check(&self, note: &SignedNote) -> Option<Result<u64, ()>> {
        let mut first = None;
        for line in note.signatures.iter().filter(|s| match self.any_name {
            true => s.id == typed_key_id(&s.name, COSIGNATURE_V1, self.key.as_bytes()),
            false => s.name == self.name && s.id == self.id,
        }) {
            let verified = (line.signature.len() == 8 + 64)
                .then(|| u64::from_be_bytes(line.signature[..8].try_into().expect("8 bytes")))
                .filter(|time| *time <= i64::MAX as u64)
                .zip(Signature::from_slice(line.signature.get(8..).unwrap_or_default()).ok())
                .filter(|(time, signature)| {
                    self.key
                        .verify_strict(cosigned_message(*time, &note.text).as_bytes(), signature)
                        .is_ok()
                });
            match verified {
                Some((time, _)) => {
                    first.get_or_insert(time);
                }
                None => return Some(Err(())),
            }
        }
        first.map(Ok)
    }
}

/// What a `cosignature/v1` signs: the header, the time, the checkpoint text.
pub fn cosigned_message(time: u64, checkpoint_text: &str) -> String {
    format!("cosignature/v1\ntime {time}\n{checkpoint_text}")
}

/// What an auditor requires: `quorum` valid cosignatures from `keys`.
#[derive(Clone, Debug)]
pub struct WitnessPolicy {
    pub keys: Vec<WitnessKey>,
    /// How many of `keys` must have cosigned (without a policy's rule).
    pub quorum: usize,
    /// A trust policy's quorum rule, which decides instead of the count.
    pub rule: Option<crate::policy::TrustPolicy>,
}

impl WitnessPolicy {
    /// Whether the witnesses whose cosignatures verify (by name) meet the quorum.
    pub fn met(&self, valid: &[String]) -> bool {
        match &self.rule {
            Some(policy) => policy.quorum_met(valid),
            None => valid.len() >= self.quorum,
        }
    }

    /// The quorum in words: "2", or the policy's rule.
    pub fn describe(&self) -> String {
        match &self.rule {
            Some(policy) => format!("the policy ({})", policy.describe_quorum()),
            None => self.quorum.to_string(),
        }
    }

    /// What a checkpoint without the quorum lacks, in words.
    pub fn shortfall(&self) -> String {
        match &self.rule {
            Some(policy) => format!(
                "cosignatures that do not meet the policy's quorum ({})",
                policy.describe_quorum()
            ),
            None => format!("fewer than {} cosignature(s) from the trusted witnesses", self.quorum),
        }
    }
}

/// The cosignatures on one checkpoint, judged against the trusted witness keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cosigned {
    /// Witnesses whose cosignature verifies.
    pub valid: Vec<String>,
    /// Witnesses with a cosignature line that does not verify.
    pub bad: Vec<String>,
}

/// The cosignatures on `note` by `witnesses`: those that verify, and those
/// by a known witness key that do not (a forgery or damage).
pub fn check_cosignatures(note: &SignedNote, witnesses: &[WitnessKey]) -> Cosigned {
    let mut out = Cosigned::default();
    // A key counts once, however often (or under however many names) it is
    // listed: the cosigned message does not commit to the name.
    let mut seen = std::collections::HashSet::new();
    for w in witnesses.iter().filter(|w| seen.insert(*w.key.as_bytes())) {
        match w.check(note) {
            Some(Ok(_)) => out.valid.push(w.name.clone()),
            Some(Err(())) => out.bad.push(w.name.clone()),
            None => {}
        }
    }
    out
}

/// Reads witness keys: each argument a key or a file of keys (one a line,
/// `#` comments allowed).
pub fn load_witness_keys(args: &[String]) -> Result<Vec<WitnessKey>, Error> {
    let mut keys = Vec::new();
    for arg in args {
        if arg.contains('+') && !std::path::Path::new(arg).exists() {
            keys.push(WitnessKey::parse(arg)?);
            continue;
        }
        let text = crate::files::read_small(std::path::Path::new(arg), crate::keys::KEY_LIST_LIMIT)
            .map_err(|e| permanent!("{arg}: {e}"))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if !line.is_empty() && !line.starts_with('#') {
                keys.push(WitnessKey::parse(line).map_err(|e| permanent!("{arg} line {}: {e}", n + 1))?);
            }
        }
    }
    // Listed twice (a key file and the command line), a witness is still one witness.
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k: &WitnessKey| seen.insert(*k.key.as_bytes()));
    Ok(keys)
}

/// A cosignature line made here, as the spec describes it (for tests; the
/// integration tests check against aics-witness, an independent implementation).
#[cfg(test)]
pub(crate) fn cosign(key: &ed25519_dalek::SigningKey, name: &str, time: u64, text: &str) -> String {
    use ed25519_dalek::Signer;
    let sig = key.sign(cosigned_message(time, text).as_bytes());
    let mut blob = typed_key_id(name, COSIGNATURE_V1, key.verifying_key().as_bytes()).to_vec();
    blob.extend_from_slice(&time.to_be_bytes());
    blob.extend_from_slice(&sig.to_bytes());
    format!("\u{2014} {name} {}\n", B64.encode(blob))
}

/// The witness key of signing key `key`, named `name` (what a witness
/// publishes; tests make their own witnesses with it).
pub fn witness_key(key: &ed25519_dalek::SigningKey, name: &str) -> WitnessKey {
    WitnessKey {
        name: name.to_owned(),
        id: typed_key_id(name, COSIGNATURE_V1, key.verifying_key().as_bytes()),
        key: key.verifying_key(),
        any_name: false,
    }
}

impl WitnessKey {
    /// A policy's witness `name` (local to the policy) with public key `key`.
    pub fn from_policy(name: &str, key: VerifyingKey) -> WitnessKey {
        WitnessKey {
            name: name.to_owned(),
            id: typed_key_id(name, COSIGNATURE_V1, key.as_bytes()),
            key,
            any_name: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ed25519_dalek::SigningKey;

    #[test]
    fn a_cosignature_verifies_and_a_changed_checkpoint_or_time_does_not() {
        let key = SigningKey::from_bytes(&[9; 32]);
        let w = witness_key(&key, "witness.example/w1");
        assert_eq!(WitnessKey::parse(&w.to_text()).unwrap(), w);
        let text = "o\n5\nAAAA\n";
        let note = format!(
            "{text}\n\u{2014} o AAAAAAAA\n{}",
            cosign(&key, &w.name, 1700000000, text)
        );
        let parsed = SignedNote::parse(note.as_bytes()).unwrap();
        assert_eq!(w.check(&parsed), Some(Ok(1700000000)));
        // A second line of the same witness that does not verify, after a good one: bad.
        let good = cosign(&key, &w.name, 1700000000, text);
        let forged = cosign(&key, &w.name, 1700000001, "o\n6\nAAAA\n");
        let both = SignedNote::parse(format!("{note}{forged}").as_bytes()).unwrap();
        assert_eq!(w.check(&both), Some(Err(())), "{good}");
        let other = SignedNote::parse(note.replacen("\n5\n", "\n6\n", 1).as_bytes()).unwrap();
        assert_eq!(w.check(&other), Some(Err(())));
        let cosigned = check_cosignatures(&other, std::slice::from_ref(&w));
        assert_eq!((cosigned.valid.len(), cosigned.bad), (0, vec![w.name.clone()]));
        // Listed twice, a witness still counts once.
        let twice = check_cosignatures(&parsed, &[w.clone(), w.clone()]);
        assert_eq!(twice.valid.len(), 1);
        // A log key (type 0x01) is not a witness key.
        let log_key = crate::signer::SignerKey::generate("o").unwrap().verifier().to_text();
        assert!(WitnessKey::parse(&log_key).unwrap_err().message.contains("type 0x04"));
    }
}
