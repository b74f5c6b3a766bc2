//! The C2SP `tlog-proof` text (<https://c2sp.org/tlog-proof>): an entry's
//! index, its inclusion proof and the signed checkpoint it is proven
//! against, offline-verifiable.
//!
//! ```text
//! c2sp.org/tlog-proof@v1
//! index 73894
//! gSKyXoYZUgZ6jduWYrkDOARinOMGJveXjgMkBTcdPlQ=
//! ...
//!
//! <the checkpoint, a signed note, verbatim>
//! ```

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use chainship_core::{Error, integrity};

use crate::merkle::Hash;

/// The first line of a `tlog-proof` (C2SP).
pub const HEADER: &str = "c2sp.org/tlog-proof@v1";
/// No tree this side of 2^64 entries needs more hashes than this.
const MAX_HASHES: usize = 64;

/// An inclusion proof as C2SP `tlog-proof@v1` writes it: the leaf index,
/// the proof hashes, and the signed checkpoint they lead to (optionally an
/// extra line the log adds).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogProof {
    /// Opaque, unauthenticated extra data (never trusted).
    pub extra: Option<Vec<u8>>,
    pub index: u64,
    pub hashes: Vec<Hash>,
    /// The signed checkpoint note, verbatim.
    pub checkpoint: String,
}

impl TlogProof {
    /// The proof as text, ending with the checkpoint note.
    pub fn to_text(&self) -> String {
        let mut out = format!("{HEADER}\n");
        if let Some(extra) = &self.extra {
            out.push_str(&format!("extra {}\n", B64.encode(extra)));
        }
        out.push_str(&format!("index {}\n", self.index));
        for h in &self.hashes {
            out.push_str(&B64.encode(h));
            out.push('\n');
        }
        out.push('\n');
        out.push_str(&self.checkpoint);
        out
    }

    /// Reads a proof's text; a malformed one is an integrity error saying where.
    pub fn parse(text: &str) -> Result<TlogProof, Error> {
        let (head, checkpoint) = text
            .split_once("\n\n")
            .ok_or_else(|| integrity!("no blank line before the checkpoint"))?;
        let mut lines = head.lines();
        if lines.next() != Some(HEADER) {
            return Err(integrity!("the first line is not {HEADER}"));
        }
        let mut line = lines.next().ok_or_else(|| integrity!("no index line"))?;
        let mut extra = None;
        if let Some(data) = line.strip_prefix("extra ") {
            extra = Some(
                B64.decode(data)
                    .map_err(|_| integrity!("the extra line is not base64"))?,
            );
            line = lines.next().ok_or_else(|| integrity!("no index line"))?;
        }
        let index = line
            .strip_prefix("index ")
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && (*n == "0" || !n.starts_with('0')))
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| integrity!("{line:?} is not `index N` (decimal, no leading zeroes)"))?;
        let mut hashes = Vec::new();
        for (n, line) in lines.enumerate() {
            let bytes = B64
                .decode(line)
                .ok()
                .and_then(|b| Hash::try_from(b).ok())
                .ok_or_else(|| integrity!("proof line {} is not a base64 SHA-256 hash", n + 1))?;
            hashes.push(bytes);
        }
        if hashes.len() > MAX_HASHES {
            return Err(integrity!("{} proof hashes: more than any tree needs", hashes.len()));
        }
        if checkpoint.is_empty() {
            return Err(integrity!("no checkpoint after the blank line"));
        }
        Ok(TlogProof {
            extra,
            index,
            hashes,
            checkpoint: checkpoint.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_malformed_proofs() {
        let proof = TlogProof {
            extra: None,
            index: 5,
            hashes: vec![[1; 32], [2; 32]],
            checkpoint: "o\n6\nAAAA\n\n\u{2014} o sig\n".into(),
        };
        let text = proof.to_text();
        assert!(text.starts_with("c2sp.org/tlog-proof@v1\nindex 5\nAQEB"));
        assert_eq!(TlogProof::parse(&text).unwrap(), proof);
        let with_extra = TlogProof {
            extra: Some(b"hi".to_vec()),
            ..proof.clone()
        };
        assert_eq!(TlogProof::parse(&with_extra.to_text()).unwrap(), with_extra);
        assert!(TlogProof::parse(&text.replace("index 5", "index 05")).is_err());
        assert!(TlogProof::parse(&text.replace("index 5", "index +5")).is_err());
        assert!(TlogProof::parse(&text.replace("index 5", "index 18446744073709551616")).is_err());
        assert!(TlogProof::parse(&text.replace("@v1", "@v2")).is_err());
        assert!(TlogProof::parse(&text.replacen("AQEB", "!!!", 1)).is_err());
        // An index only, no hashes: the one-entry tree.
        let one = TlogProof {
            hashes: vec![],
            index: 0,
            ..proof
        };
        assert_eq!(TlogProof::parse(&one.to_text()).unwrap(), one);
    }
}
