//! The event hash: lower-case hex SHA-256 of seven netstrings
//! (`<byte length>:<bytes>,`): previous hash, seq, run_id, step_id, at, type,
//! payload_json — see `docs/chain-format.md`.
//!
//! The fields are fed to the hasher one by one, straight from where they
//! were read: no concatenated copy of the event is ever made.

use sha2::{Digest, Sha256};

/// A hash as 64 lower-case hex ASCII bytes, the form the database stores.
pub type HexHash = [u8; 64];

/// The hash an event must have, given the previous event's stored hash
/// (empty for the first event) and its own fields exactly as stored.
pub fn event_hash(
    prev_hash: &[u8],
    seq: u64,
    run_id: &[u8],
    step_id: &[u8],
    at: &[u8],
    kind: &[u8],
    payload_json: &[u8],
) -> HexHash {
    let mut sha = Sha256::new();
    // Each netstring's closing comma is sent together with the next one's
    // length prefix, so the hasher sees few, larger updates.
    let mut glue = Glue::default();
    glue.open(None, prev_hash.len());
    sha.update(glue.bytes());
    sha.update(prev_hash);
    let mut seq_text = itoa::Buffer::new();
    let seq_text = seq_text.format(seq).as_bytes();
    glue.open(Some(()), seq_text.len());
    sha.update(glue.bytes());
    sha.update(seq_text);
    for field in [run_id, step_id, at, kind, payload_json] {
        glue.open(Some(()), field.len());
        sha.update(glue.bytes());
        sha.update(field);
    }
    sha.update(b",");
    to_hex(&sha.finalize().into())
}

/// Lower-case hex of a 32-byte digest.
pub fn to_hex(digest: &[u8; 32]) -> HexHash {
    let mut out = [0u8; 64];
    // Cannot fail: the output is exactly twice the input.
    hex::encode_to_slice(digest, &mut out).expect("64-byte buffer for 32 bytes");
    out
}

/// The hash an event links back to: its predecessor's stored hash, or
/// nothing before seq 1. A copyable value (no allocation), as every record,
/// batch and check holds one.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PrevHash {
    bytes: HexHash,
    present: bool,
}

impl PrevHash {
    /// Before seq 1: links to nothing.
    pub const NONE: PrevHash = PrevHash {
        bytes: [0; 64],
        present: false,
    };

    pub fn of(hash: HexHash) -> Self {
        PrevHash {
            bytes: hash,
            present: true,
        }
    }

    /// From stored or shipped bytes: empty (before seq 1) or a well-formed
    /// hash; anything else is `None`.
    pub fn parse(text: &[u8]) -> Option<Self> {
        if text.is_empty() {
            return Some(PrevHash::NONE);
        }
        is_hex_hash(text).then(|| PrevHash::of(text.try_into().expect("64 bytes")))
    }

    /// The bytes as stored: empty before seq 1, else 64 hex.
    pub fn as_bytes(&self) -> &[u8] {
        if self.present { &self.bytes } else { &[] }
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("hex")
    }

    pub fn is_none(&self) -> bool {
        !self.present
    }
}

impl std::fmt::Debug for PrevHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PrevHash({:?})", self.as_str())
    }
}

/// True when `text` is 64 lower-case hex characters: the only form a stored
/// hash can take.
pub fn is_hex_hash(text: &[u8]) -> bool {
    text.len() == 64 && text.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A small stack buffer holding `,` (closing the previous netstring) and
/// `<len>:` (opening the next one).
#[derive(Default)]
struct Glue {
    buf: [u8; 24],
    len: usize,
}

impl Glue {
    fn open(&mut self, after_previous: Option<()>, field_len: usize) {
        self.len = 0;
        if after_previous.is_some() {
            self.buf[0] = b',';
            self.len = 1;
        }
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(field_len).as_bytes();
        self.buf[self.len..self.len + digits.len()].copy_from_slice(digits);
        self.len += digits.len();
        self.buf[self.len] = b':';
        self.len += 1;
    }

    fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prev_hashes_are_empty_or_well_formed() {
        assert!(PrevHash::parse(b"").unwrap().is_none());
        assert_eq!(PrevHash::parse(b"").unwrap().as_bytes(), b"");
        let h = [b'a'; 64];
        assert_eq!(PrevHash::parse(&h).unwrap().as_bytes(), &h[..]);
        assert_eq!(PrevHash::parse(&h[..63]), None);
        assert_eq!(PrevHash::parse(&[b'A'; 64]), None);
    }

    // The worked examples of docs/chain-format.md.
    const H1: &str = "329225706e099dcf734d05b51f7cc508a36511efdf614f97d2918cf3b2a04249";
    const H2: &str = "2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291";

    #[test]
    fn worked_example_seq_1() {
        let h = event_hash(
            b"",
            1,
            b"run_7f2",
            b"",
            b"2026-08-17T08:00:00Z",
            b"run.created",
            br#"{"goal":"triage"}"#,
        );
        assert_eq!(std::str::from_utf8(&h).unwrap(), H1);
    }

    #[test]
    fn worked_example_seq_2() {
        let h = event_hash(
            H1.as_bytes(),
            2,
            b"run_7f2",
            b"step_0",
            b"2026-08-17T08:00:01.250Z",
            b"step.policy",
            br#"{"decision":"allow","tool":"github.create_issue"}"#,
        );
        assert_eq!(std::str::from_utf8(&h).unwrap(), H2);
    }

    #[test]
    fn matches_a_plain_concatenation_of_netstrings() {
        // The same bytes the spec prints for seq 1, hashed in one piece.
        let bytes = br#"0:,1:1,7:run_7f2,0:,20:2026-08-17T08:00:00Z,11:run.created,17:{"goal":"triage"},"#;
        let whole = to_hex(&Sha256::digest(bytes).into());
        assert_eq!(std::str::from_utf8(&whole).unwrap(), H1);
    }

    #[test]
    fn lengths_are_bytes_not_characters() {
        // "é" is two bytes: a length in characters would give another hash.
        let by_bytes = event_hash(b"", 1, "é".as_bytes(), b"", b"t", b"k", b"{}");
        let mut sha = Sha256::new();
        sha.update("0:,1:1,2:é,0:,1:t,1:k,2:{},".as_bytes());
        assert_eq!(by_bytes, to_hex(&sha.finalize().into()));
    }

    #[test]
    fn hex_hash_form() {
        assert!(is_hex_hash(H1.as_bytes()));
        assert!(!is_hex_hash(H1.to_uppercase().as_bytes()));
        assert!(!is_hex_hash(&H1.as_bytes()[1..]));
    }
}
