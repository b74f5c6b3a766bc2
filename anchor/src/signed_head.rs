//! The signed head: what the follower publishes after each delivered batch.
//!
//! The note text is five lines; the first names the format and version
//! (this is the head of a linear hash chain, not an RFC 6962 checkpoint):
//!
//! ```text
//! chainship-head/v1
//! origin prod-eu1/agentrt
//! seq 1200
//! hash 2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291
//! published 2026-11-29T22:00:00Z
//! checkpoint 1200
//! ```
//!
//! The sixth line is optional: a follower that keeps the transparency log
//! writes it when the checkpoint of the head's size was published before
//! the head. Being signed, it lets every verifier tell a checkpoint deleted
//! from the store from a head that never had one (`--no-checkpoints`, or a
//! store written before the line existed), whichever checkpoints remain.
//!
//! The last line is optional too: `previous <seq>`, the highest head this
//! publisher's keys had kept in the store when it published this one. So a
//! publication deleted from the middle of the store (head and checkpoint)
//! is named by the next head, without any state kept between runs. What it
//! cannot show: the newest publications deleted together (nothing after
//! them names them; a witness, or `anchor verify --state`, does), and the
//! oldest ones (indistinguishable from retention).

use chainship_chain::{Error, integrity};
use std::time::SystemTime;

use chainship_chain::Head;

use crate::signer::Signers;
use crate::store::StoreError;

/// The first line of every signed head's body.
pub const FORMAT_LINE: &str = "chainship-head/v1";

/// A head as published: origin, seq, hash and publication time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignedHead {
    pub origin: String,
    pub head: Head,
    /// RFC 3339, UTC, seconds.
    pub published: String,
    /// The checkpoint of size `head.seq` was published before this note.
    pub with_checkpoint: bool,
    /// The highest head kept for this origin (by these keys) when this one
    /// was published, below it.
    pub previous: Option<u64>,
}

impl SignedHead {
    /// The head of `origin` at `head`, published at `published`.
    pub fn new(origin: &str, head: Head, published: SystemTime) -> Self {
        SignedHead {
            origin: origin.to_owned(),
            head,
            published: humantime::format_rfc3339_seconds(published).to_string(),
            with_checkpoint: false,
            previous: None,
        }
    }

    /// Names the head kept before this one (ignored unless below it).
    pub fn after(mut self, previous: Option<u64>) -> Self {
        self.previous = previous.filter(|p| *p > 0 && *p < self.head.seq);
        self
    }

    /// Says that the checkpoint of the head's size was published before it.
    pub fn with_checkpoint(mut self) -> Self {
        self.with_checkpoint = true;
        self
    }

    /// The note text.
    pub fn text(&self) -> String {
        let checkpoint = match self.with_checkpoint {
            true => format!("checkpoint {}\n", self.head.seq),
            false => String::new(),
        };
        let previous = self.previous.map_or(String::new(), |p| format!("previous {p}\n"));
        format!(
            "{FORMAT_LINE}\norigin {}\nseq {}\nhash {}\npublished {}\n{checkpoint}{previous}",
            self.origin,
            self.head.seq,
            self.head.hash_str(),
            self.published
        )
    }

    /// The signed note, one signature line per signer (fails when one cannot sign).
    pub fn sign(&self, signers: &Signers) -> Result<String, StoreError> {
        Ok(crate::signer::sign_note(&self.text(), signers)?.to_text())
    }

    /// Parses a note text (its signatures are checked elsewhere).
    pub fn parse_text(text: &str) -> Result<SignedHead, Error> {
        let mut body = crate::note::NoteBody::new(text, FORMAT_LINE)?;
        let origin = body.field("origin")?;
        let seq = body.field("seq")?;
        let hash = body.field("hash")?;
        let published = body.field("published")?;
        let head: Head = format!("{seq}:{hash}").parse().map_err(|e| integrity!("{e}"))?;
        humantime::parse_rfc3339(&published).map_err(|_| integrity!("published {published:?} is not RFC 3339"))?;
        let mut next = body.next_line();
        let with_checkpoint = next == Some(format!("checkpoint {}", head.seq).as_str());
        if with_checkpoint {
            next = body.next_line();
        }
        let previous = match next {
            None => None,
            Some(line) => match line.strip_prefix("previous ").map(str::parse::<u64>) {
                Some(Ok(p)) if p > 0 && p < head.seq && line == format!("previous {p}") => Some(p),
                Some(_) => return Err(integrity!("previous {line:?} is not a seq below the head's")),
                None if line.starts_with("checkpoint ") => {
                    return Err(integrity!(
                        "the line after published is not \"checkpoint {}\"",
                        head.seq
                    ));
                }
                None => return Err(integrity!("extra lines after the head")),
            },
        };
        if body.next_line().is_some() {
            return Err(integrity!("extra lines after the head"));
        }
        Ok(SignedHead {
            origin,
            head,
            published,
            with_checkpoint,
            previous,
        })
    }

    /// When the head says it was published, if its time is readable.
    pub fn published_time(&self) -> Option<SystemTime> {
        humantime::parse_rfc3339(&self.published).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::note::SignedNote;
    use crate::signer::SignerKey;

    #[test]
    fn text_round_trips_and_signature_verifies() {
        let head: Head = "2:2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291"
            .parse()
            .unwrap();
        let signed = SignedHead::new("prod/agentrt", head, SystemTime::UNIX_EPOCH);
        assert!(
            signed
                .text()
                .starts_with("chainship-head/v1\norigin prod/agentrt\nseq 2\n")
        );
        assert_eq!(SignedHead::parse_text(&signed.text()).unwrap(), signed);
        let key = SignerKey::generate("k").unwrap();
        let note = SignedNote::parse(signed.sign(&[key.shared()]).unwrap().as_bytes()).unwrap();
        assert_eq!(key.verifier().check(&note), Some(true));
        assert!(SignedHead::parse_text("chainship-head/v2\n").is_err());
    }

    #[test]
    fn the_checkpoint_line_is_optional_and_must_name_the_heads_own_size() {
        let head: Head = "7:2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291"
            .parse()
            .unwrap();
        let plain = SignedHead::new("o", head, SystemTime::UNIX_EPOCH);
        assert!(!SignedHead::parse_text(&plain.text()).unwrap().with_checkpoint);
        let with = plain.clone().with_checkpoint();
        assert!(with.text().ends_with("\ncheckpoint 7\n"));
        assert_eq!(SignedHead::parse_text(&with.text()).unwrap(), with);
        let other = plain.text() + "checkpoint 8\n";
        assert!(SignedHead::parse_text(&other).is_err());
        let extra = with.text() + "more\n";
        assert!(SignedHead::parse_text(&extra).is_err());
    }

    #[test]
    fn the_previous_line_names_a_lower_seq_after_the_checkpoint_line() {
        let head: Head = "7:2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291"
            .parse()
            .unwrap();
        let plain = SignedHead::new("o", head, SystemTime::UNIX_EPOCH);
        let both = plain.clone().with_checkpoint().after(Some(3));
        assert!(both.text().ends_with("\ncheckpoint 7\nprevious 3\n"), "{}", both.text());
        assert_eq!(SignedHead::parse_text(&both.text()).unwrap(), both);
        let alone = plain.clone().after(Some(5));
        assert_eq!(SignedHead::parse_text(&alone.text()).unwrap().previous, Some(5));
        assert_eq!(plain.clone().after(Some(7)).previous, None, "not below the head");
        assert_eq!(plain.clone().after(Some(0)).previous, None);
        for bad in [
            "previous 7\n",
            "previous 9\n",
            "previous 0\n",
            "previous 03\n",
            "previous x\n",
        ] {
            assert!(SignedHead::parse_text(&(plain.text() + bad)).is_err(), "{bad}");
        }
        let swapped = plain.text() + "previous 3\ncheckpoint 7\n";
        assert!(SignedHead::parse_text(&swapped).is_err());
    }
}
