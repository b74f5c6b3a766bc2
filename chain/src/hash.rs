//! The event hash: lower-case hex SHA-256 of seven netstrings
//! (`<byte length>:<bytes>,`): previous hash, seq, run_id, step_id, at, type,
//! payload_json — see `docs/chain-format.md`.
//!
//! The fields are fed to the hasher one by one, straight from where they
//! were read: no concatenated copy of the event is ever made.

mod stream;

use stream::{SHORT, Sha256Stream};

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
    let mut sha = Sha256Stream::new();
    // Each netstring's closing comma goes with the next one's length prefix
    // (and the seq, short, with its own), written in place.
    sha.put(|out| glue(out, false, prev_hash.len() as u64));
    sha.write(prev_hash);
    sha.put(|out| {
        let n = glue(out, true, decimal_len(seq) as u64);
        n + decimal(&mut out[n..], seq)
    });
    for field in [run_id, step_id, at, kind, payload_json] {
        sha.put(|out| glue(out, true, field.len() as u64));
        sha.write(field);
    }
    sha.put(|out| {
        out[0] = b',';
        1
    });
    to_hex(&sha.finish())
}

/// Lower-case hex of a 32-byte digest.
pub fn to_hex(digest: &[u8; 32]) -> HexHash {
    let mut out = [0u8; 64];
    // One table lookup per byte: this runs once per event of every walk.
    for (pair, byte) in out.as_chunks_mut::<2>().0.iter_mut().zip(digest) {
        *pair = HEX_PAIRS[*byte as usize];
    }
    out
}

/// Each byte's two lower-case hex digits.
static HEX_PAIRS: [[u8; 2]; 256] = {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut pairs = [[0u8; 2]; 256];
    let mut byte = 0;
    while byte < 256 {
        pairs[byte] = [DIGITS[byte >> 4], DIGITS[byte & 15]];
        byte += 1;
    }
    pairs
};

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

/// Writes `,` (closing the previous netstring, with `comma`) and `<len>:`
/// (opening the next one) at the start of `out`: at most 1 + 20 + 1 bytes.
#[inline]
fn glue(out: &mut [u8; SHORT], comma: bool, len: u64) -> usize {
    let mut at = 0;
    if comma {
        out[0] = b',';
        at = 1;
    }
    at += decimal(&mut out[at..], len);
    out[at] = b':';
    at + 1
}

/// Writes `n` in decimal at the start of `out`; returns its length.
#[inline]
fn decimal(out: &mut [u8], mut n: u64) -> usize {
    let len = decimal_len(n);
    for digit in out[..len].iter_mut().rev() {
        *digit = b'0' + (n % 10) as u8;
        n /= 10;
    }
    len
}

#[inline]
fn decimal_len(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |digits| digits as usize + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

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

    fn netstring(out: &mut Vec<u8>, bytes: &[u8]) {
        out.extend_from_slice(format!("{}:", bytes.len()).as_bytes());
        out.extend_from_slice(bytes);
        out.push(b',');
    }

    proptest::proptest! {
        // Any fields, any seq: the same hash as sha2 over the seven
        // netstrings written out whole, the spec's definition.
        #[test]
        fn any_event_hashes_as_its_netstrings_written_out(
            prev in proptest::option::of(proptest::collection::vec(b'0'..=b'9', 64)),
            seq in proptest::prelude::any::<u64>(),
            fields in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..700), 5),
        ) {
            let prev = prev.unwrap_or_default();
            let mut whole = Vec::new();
            netstring(&mut whole, &prev);
            netstring(&mut whole, seq.to_string().as_bytes());
            for field in &fields {
                netstring(&mut whole, field);
            }
            let expected = to_hex(&Sha256::digest(&whole).into());
            let got = event_hash(&prev, seq, &fields[0], &fields[1], &fields[2], &fields[3], &fields[4]);
            proptest::prop_assert_eq!(got, expected);
        }
    }

    #[test]
    fn hex_is_lower_case_and_matches_the_hex_crate() {
        let digest: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8 ^ 0xF0);
        assert_eq!(to_hex(&digest).to_vec(), hex::encode(digest).into_bytes());
        assert_eq!(&to_hex(&[0xff; 32])[..4], b"ffff");
        assert_eq!(&to_hex(&[0x0a; 32])[..4], b"0a0a");
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
