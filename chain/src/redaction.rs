//! Redaction: an event whose payload was withheld (a secret or personal data
//! logged by mistake) that still holds its place in the chain.
//!
//! An event's hash stays vouched for by the next event's link and by the
//! checkpoints' Merkle leaves, so a row or record without its payload can
//! still be proven to sit at its seq with its hash. What can no longer be
//! checked is that its *other* fields are the ones that were hashed: a signed
//! redaction statement (`chainship_anchor::redaction`) therefore names the
//! event's hash and the [`fields_digest`] of everything but the payload, and
//! a verifier accepts a payload that does not hash only where a trusted
//! statement names that seq, that stored hash and those fields
//! ([`Redactions::accepts`]). Anything else is the finding it always was.
//!
//! The digest commits to nothing of the payload, so it gives no way to test
//! guesses of the secret beyond what the event hash already gives.

use std::collections::BTreeMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::hash::{HexHash, to_hex};

/// Hex SHA-256 of the six netstrings that come before the payload in the
/// event hash: the previous hash, the seq, run_id, step_id, at and type.
pub fn fields_digest(prev_hash: &[u8], seq: u64, run_id: &[u8], step_id: &[u8], at: &[u8], kind: &[u8]) -> HexHash {
    let mut sha = Sha256::new();
    let seq = seq.to_string();
    for field in [prev_hash, seq.as_bytes(), run_id, step_id, at, kind] {
        sha.update(field.len().to_string().as_bytes());
        sha.update(b":");
        sha.update(field);
        sha.update(b",");
    }
    to_hex(&sha.finalize().into())
}

/// Where a statement is kept under its origin, and what a tombstone of
/// `seq` names in its `redacted` member: `redactions/<seq, 20 digits>`.
pub fn statement_path(seq: u64) -> String {
    format!("redactions/{seq:020}")
}

/// The payloads a blanked database row may hold: none, `{}`, or the
/// [`placeholder`] naming its own statement. Anything else is content the
/// statement does not vouch for (a payload rewritten, not withheld).
pub fn is_blanked(seq: u64, payload: &[u8]) -> bool {
    payload.is_empty() || payload == b"{}" || payload == placeholder(&statement_path(seq)).as_bytes()
}

/// The payload a blanked row holds in place of the withheld one (what the
/// runtime writes, and `restore`): it names the statement, and by design no
/// longer hashes to the row's stored hash.
pub fn placeholder(statement: &str) -> String {
    format!("{{\"redacted\":\"{statement}\"}}")
}

/// Whether a stored payload is a [`placeholder`] (of any statement): the run
/// check then takes the event's type and place, not its content. Whether a
/// statement covers it is the chain check's business.
pub fn is_placeholder(payload: &[u8]) -> bool {
    payload
        .strip_prefix(b"{\"redacted\":\"redactions/")
        .and_then(|rest| rest.strip_suffix(b"\"}"))
        .is_some_and(|name| !name.is_empty() && name.iter().all(u8::is_ascii_digit))
}

/// What a trusted statement says of one seq.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Covered {
    /// The event's stored hash.
    pub hash: HexHash,
    /// [`fields_digest`] of its other fields.
    pub fields: HexHash,
    /// The statement's name in the store (`redactions/<seq>`), the name of
    /// the key that signed it, and the reason it gives.
    pub statement: Arc<str>,
    pub key: Arc<str>,
    pub reason: Arc<str>,
}

/// The seqs of one origin that trusted statements redact.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Redactions {
    by_seq: BTreeMap<u64, Covered>,
}

impl Redactions {
    pub fn insert(&mut self, seq: u64, covered: Covered) {
        self.by_seq.insert(seq, covered);
    }

    pub fn is_empty(&self) -> bool {
        self.by_seq.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_seq.len()
    }

    /// What the statement of `seq` says, if one is trusted.
    pub fn get(&self, seq: u64) -> Option<&Covered> {
        self.by_seq.get(&seq)
    }

    pub fn iter(&self) -> impl Iterator<Item = (u64, &Covered)> {
        self.by_seq.iter().map(|(s, c)| (*s, c))
    }

    /// Whether a row or record at `seq` with stored hash `hash` and other
    /// fields of digest `fields`, whose payload does not (or no longer)
    /// hashes to `hash`, is a redaction a trusted statement covers. Callers
    /// check the payload is withheld: [`Redactions::accepts_record`],
    /// [`Redactions::accepts_row`].
    pub fn accepts(&self, seq: u64, hash: &[u8], fields: &HexHash) -> bool {
        self.by_seq
            .get(&seq)
            .is_some_and(|c| c.hash[..] == *hash && c.fields == *fields)
    }

    /// Whether `r` is a tombstone a trusted statement covers: no payload at
    /// all, its `redacted` member naming its own seq's statement, and the
    /// statement naming its seq, hash and other fields.
    pub fn accepts_record(&self, r: &crate::record::Record<'_>) -> bool {
        r.is_clean_tombstone() && self.accepts(r.seq, r.hash.as_bytes(), &r.fields_digest())
    }

    /// Whether a database row whose payload no longer hashes is a blanked
    /// one a trusted statement covers ([`is_blanked`]).
    pub fn accepts_row(&self, seq: u64, hash: &[u8], fields: &HexHash, payload: &[u8]) -> bool {
        is_blanked(seq, payload) && self.accepts(seq, hash, fields)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event_hash;

    #[test]
    fn the_digest_is_the_event_hash_netstrings_without_the_payload() {
        // Independently: the six netstrings written out and hashed.
        let text = b"0:,1:7,3:run,0:,20:2026-01-01T00:00:00Z,4:call,";
        let expected = to_hex(&Sha256::digest(text).into());
        assert_eq!(
            fields_digest(b"", 7, b"run", b"", b"2026-01-01T00:00:00Z", b"call"),
            expected
        );
        // Any other field changes it; the payload is not in it.
        assert_ne!(
            fields_digest(b"", 7, b"run", b"", b"2026-01-01T00:00:00Z", b"cal"),
            expected
        );
        assert_ne!(
            fields_digest(b"", 8, b"run", b"", b"2026-01-01T00:00:00Z", b"call"),
            expected
        );
        let a = event_hash(b"", 7, b"run", b"", b"t", b"call", b"{\"secret\":1}");
        let b = event_hash(b"", 7, b"run", b"", b"t", b"call", b"{}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_blanked_row_holds_nothing_but_a_blank() {
        for ok in ["", "{}", r#"{"redacted":"redactions/00000000000000000007"}"#] {
            assert!(is_blanked(7, ok.as_bytes()), "{ok}");
        }
        for bad in [
            "null",
            r#"{"tool":"shell.exec"}"#,
            r#"{"redacted":"redactions/00000000000000000008"}"#,
            " {}",
        ] {
            assert!(!is_blanked(7, bad.as_bytes()), "{bad}");
        }
    }

    #[test]
    fn a_placeholder_is_known_as_one() {
        let p = placeholder("redactions/00000000000000000042");
        assert_eq!(p, r#"{"redacted":"redactions/00000000000000000042"}"#);
        assert!(is_placeholder(p.as_bytes()));
        for other in [
            r#"{}"#,
            r#"{"redacted":"x"}"#,
            r#"{"redacted":"redactions/1","a":"b"}"#,
            r#"{"redacted":"redactions/"}"#,
        ] {
            assert!(!is_placeholder(other.as_bytes()), "{other}");
        }
    }

    #[test]
    fn only_the_named_seq_hash_and_fields_are_accepted() {
        let mut r = Redactions::default();
        let covered = Covered {
            hash: [b'a'; 64],
            fields: [b'b'; 64],
            statement: "redactions/00000000000000000007".into(),
            key: "erasure".into(),
            reason: "a token".into(),
        };
        r.insert(7, covered);
        assert!(r.accepts(7, &[b'a'; 64], &[b'b'; 64]));
        assert!(!r.accepts(8, &[b'a'; 64], &[b'b'; 64]));
        assert!(!r.accepts(7, &[b'c'; 64], &[b'b'; 64]));
        assert!(!r.accepts(7, &[b'a'; 64], &[b'c'; 64]));
    }
}
