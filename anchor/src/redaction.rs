//! The redaction statement: a C2SP signed note, kept write-once in the anchor
//! store at `<origin>/redactions/<seq, 20 digits>`, by which the holder of a
//! **redaction key** (not the head key) says that one event's payload was
//! withheld, and why.
//!
//! ```text
//! chainship-redaction/v1
//! origin prod-eu1/agentrt
//! seq 42
//! hash 2d17715bc635406807722f1764c509105f5ac15ad430729545bc4d87055da291
//! fields 9f2c...e1 (hex SHA-256 of the netstrings before the payload)
//! redacted 2026-12-06T22:00:00Z
//! reason a customer's API token in the tool arguments
//! ```
//!
//! It names the event's stored hash and the digest of its other fields
//! (`chainship_chain::redaction::fields_digest`), never anything of the
//! payload, so a tombstone (or a blanked row) passes only at that seq, with
//! that hash, and with its other fields unchanged. It vouches for nothing
//! itself: the hash must still be vouched for by the chain and the trusted
//! heads and checkpoints, and a verifier checks that it is.

use chainship_chain::{Error, HexHash, integrity, permanent};

use crate::signer::Signers;
use crate::store::{AnchorStore, PutOutcome, REDACTIONS_DIR, StoreError};

/// The first line of every statement's body.
pub const FORMAT_LINE: &str = "chainship-redaction/v1";

/// The longest reason kept (one line of text).
pub const MAX_REASON: usize = 1000;

/// One redaction statement (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    pub origin: String,
    pub seq: u64,
    pub hash: HexHash,
    pub fields: HexHash,
    /// RFC 3339, UTC, seconds.
    pub redacted: String,
    pub reason: String,
}

/// The statement's path under its origin (`redactions/<seq, 20 digits>`).
pub use chainship_chain::redaction::statement_path;

/// The seq a statement's name (`<20 digits>`) says it covers.
pub fn seq_of_name(name: &str) -> Option<u64> {
    let digits = name.rsplit('/').next()?;
    (digits.len() == 20 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

/// Why a reason cannot go in a statement: it must be one line of printable
/// text, short, and say something.
pub fn check_reason(reason: &str) -> Result<(), Error> {
    if reason.trim().is_empty() {
        return Err(permanent!("--reason: say why the payload is withheld"));
    }
    if reason.len() > MAX_REASON {
        return Err(permanent!("--reason: at most {MAX_REASON} bytes"));
    }
    // Line and paragraph separators and bidirectional overrides too: a
    // reason is shown in terminals and pages, and must read as written.
    let unsafe_char = |c: char| {
        c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    };
    if reason.chars().any(unsafe_char) {
        return Err(permanent!("--reason: one line, no control characters"));
    }
    Ok(())
}

fn hex_hash(text: &str) -> Option<HexHash> {
    chainship_chain::hash::is_hex_hash(text.as_bytes()).then(|| text.as_bytes().try_into().expect("64 bytes"))
}

impl Statement {
    /// The note text.
    pub fn text(&self) -> String {
        format!(
            "{FORMAT_LINE}\norigin {}\nseq {}\nhash {}\nfields {}\nredacted {}\nreason {}\n",
            self.origin,
            self.seq,
            String::from_utf8_lossy(&self.hash),
            String::from_utf8_lossy(&self.fields),
            self.redacted,
            self.reason
        )
    }

    /// The signed note, one signature line per signer.
    pub fn sign(&self, signers: &Signers) -> Result<String, StoreError> {
        Ok(crate::signer::sign_note(&self.text(), signers)?.to_text())
    }

    /// Parses a note text (its signatures are checked by the verifier).
    pub fn parse_text(text: &str) -> Result<Statement, Error> {
        let mut body = crate::note::NoteBody::new(text, FORMAT_LINE)?;
        let origin = body.field("origin")?;
        let seq_text = body.field("seq")?;
        let hash = body.field("hash")?;
        let fields = body.field("fields")?;
        let redacted = body.field("redacted")?;
        let reason = body.field("reason")?;
        let seq = seq_text
            .parse::<u64>()
            .ok()
            .filter(|s| *s > 0 && s.to_string() == seq_text)
            .ok_or_else(|| integrity!("seq {seq_text:?} is not a positive integer"))?;
        let hash = hex_hash(&hash).ok_or_else(|| integrity!("hash {hash:?} is not 64 lower-case hex"))?;
        let fields = hex_hash(&fields).ok_or_else(|| integrity!("fields {fields:?} is not 64 lower-case hex"))?;
        humantime::parse_rfc3339(&redacted).map_err(|_| integrity!("redacted {redacted:?} is not RFC 3339"))?;
        check_reason(&reason).map_err(|e| integrity!("{}", e.message))?;
        if body.next_line().is_some() {
            return Err(integrity!("extra lines after the reason"));
        }
        let statement = Statement {
            origin,
            seq,
            hash,
            fields,
            redacted,
            reason,
        };
        // Exactly one text per statement: nothing a signature covers may vary.
        if statement.text() != text {
            return Err(integrity!("not in the one form a statement is written in"));
        }
        Ok(statement)
    }
}

/// Writes a signed statement of `seq` write-once; `AlreadyThere` with what is
/// already there otherwise.
pub async fn put(store: &AnchorStore, origin: &str, seq: u64, note: &str) -> Result<PutOutcome, StoreError> {
    store
        .put_object_new(origin, &statement_path(seq), note.as_bytes())
        .await
}

/// Every statement kept for `origin`: its path, the seq its name says, and
/// its bytes (a name that is no statement's is returned with no seq).
pub async fn list(store: &AnchorStore, origin: &str) -> Result<Vec<(String, Option<u64>, Vec<u8>)>, StoreError> {
    let mut out = Vec::new();
    for name in store.list_names(origin, REDACTIONS_DIR).await? {
        let path = format!("{REDACTIONS_DIR}/{name}");
        let Some(bytes) = store.get_object(origin, &path).await? else {
            continue;
        };
        out.push((path, seq_of_name(&name), bytes));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement() -> Statement {
        Statement {
            origin: "prod/agentrt".into(),
            seq: 42,
            hash: [b'a'; 64],
            fields: [b'b'; 64],
            redacted: "2026-12-06T22:00:00Z".into(),
            reason: "a customer's token in the tool arguments".into(),
        }
    }

    #[test]
    fn a_statement_reads_back_as_written_and_only_so() {
        let s = statement();
        assert_eq!(Statement::parse_text(&s.text()).unwrap(), s);
        for bad in [
            s.text().replace("seq 42", "seq 042"),
            s.text().replace("seq 42", "seq 0"),
            s.text().replace(&"a".repeat(64), &"A".repeat(64)),
            s.text() + "more\n",
            s.text().replace("chainship-redaction/v1", "chainship-head/v1"),
            s.text().trim_end().to_owned(),
        ] {
            assert!(Statement::parse_text(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reasons_are_one_short_line() {
        assert!(check_reason("a token").is_ok());
        assert!(check_reason(" ").is_err());
        assert!(check_reason("two\nlines").is_err());
        assert!(check_reason("two\u{2028}lines").is_err());
        assert!(check_reason("abc\u{202e}def").is_err());
        assert!(check_reason(&"x".repeat(MAX_REASON + 1)).is_err());
        assert_eq!(seq_of_name("00000000000000000042"), Some(42));
        assert_eq!(seq_of_name("42"), None);
        assert_eq!(statement_path(42), "redactions/00000000000000000042");
    }
}
