//! A head: `SEQ:HASH`, the seq of an event and its stored hash.

use std::fmt;
use std::str::FromStr;

use crate::hash::{HexHash, is_hex_hash};

/// A point on the chain: an event's seq and the hash stored with it.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Head {
    pub seq: u64,
    pub hash: HexHash,
}

impl Head {
    pub fn new(seq: u64, hash: HexHash) -> Self {
        Head { seq, hash }
    }

    /// The hash as text (always 64 lower-case hex characters).
    pub fn hash_str(&self) -> &str {
        // Heads are only built from checked hex, so this cannot fail.
        std::str::from_utf8(&self.hash).expect("hex hash is ASCII")
    }

    /// Builds a head from a stored hash, if it has the stored form.
    pub fn from_stored(seq: u64, hash: &[u8]) -> Option<Head> {
        let hash: HexHash = hash.try_into().ok()?;
        is_hex_hash(&hash).then_some(Head { seq, hash })
    }
}

impl fmt::Display for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.seq, self.hash_str())
    }
}

impl fmt::Debug for Head {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Head({self})")
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum HeadParseError {
    #[error("a head is SEQ:HASH, got {0:?}")]
    NoColon(String),
    #[error("the seq of head {0:?} is not a positive whole number")]
    BadSeq(String),
    #[error("the hash of head {0:?} is not 64 lower-case hex characters")]
    BadHash(String),
}

impl FromStr for Head {
    type Err = HeadParseError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let (seq, hash) = text
            .split_once(':')
            .ok_or_else(|| HeadParseError::NoColon(text.to_owned()))?;
        let seq = parse_seq(seq).ok_or_else(|| HeadParseError::BadSeq(text.to_owned()))?;
        Head::from_stored(seq, hash.as_bytes()).ok_or_else(|| HeadParseError::BadHash(text.to_owned()))
    }
}

/// A seq as the spec writes it: decimal, no sign, no leading zeros, ≥ 1.
fn parse_seq(text: &str) -> Option<u64> {
    if text.is_empty() || text.starts_with('0') || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const H: &str = "2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291";

    #[test]
    fn round_trips() {
        let text = format!("2:{H}");
        let head: Head = text.parse().unwrap();
        assert_eq!(head.seq, 2);
        assert_eq!(head.to_string(), text);
    }

    #[test]
    fn refuses_malformed_heads() {
        assert!(matches!("2".parse::<Head>(), Err(HeadParseError::NoColon(_))));
        assert!(matches!(
            format!("0:{H}").parse::<Head>(),
            Err(HeadParseError::BadSeq(_))
        ));
        assert!(matches!(
            format!("02:{H}").parse::<Head>(),
            Err(HeadParseError::BadSeq(_))
        ));
        assert!(matches!(
            format!("-2:{H}").parse::<Head>(),
            Err(HeadParseError::BadSeq(_))
        ));
        assert!(matches!(
            format!("2:{}", H.to_uppercase()).parse::<Head>(),
            Err(HeadParseError::BadHash(_))
        ));
        assert!(matches!("2:abc".parse::<Head>(), Err(HeadParseError::BadHash(_))));
    }
}
