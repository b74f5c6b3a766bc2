//! The rule that decides where a chain breaks (`docs/chain-format.md`,
//! "What a break is"): walking by seq, event N breaks the chain when its
//! stored hash is not the one its fields and event N-1's stored hash give,
//! or when its seq is not N-1's seq plus one.
//!
//! Each check uses the *stored* previous hash, so one altered event breaks
//! exactly one place: the event itself (or, for a removed event, the next).

use std::fmt;
use std::sync::Arc;

use crate::event::EventRef;
use crate::hash::HexHash;
use crate::head::Head;
use crate::redaction::{Redactions, fields_digest};

/// Why an event breaks the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakKind {
    /// The seq is not the previous seq plus one (an event removed, or the
    /// walk starting somewhere other than seq 1).
    SeqGap { expected_seq: u64 },
    /// The stored hash is not the one the fields and previous hash give.
    HashMismatch,
}

/// Where and how the chain breaks, with enough to show an operator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainBreak {
    pub seq: u64,
    pub kind: BreakKind,
    /// The hash the event should have (computed from its fields and the
    /// previous stored hash).
    pub expected: HexHash,
    /// The hash stored with the event (lossy text: it may not even be hex).
    pub found: String,
    /// The last event that checked out, if any.
    pub last_good: Option<Head>,
}

impl ChainBreak {
    pub fn expected_str(&self) -> &str {
        std::str::from_utf8(&self.expected).expect("hex hash is ASCII")
    }

    /// A short machine name for the kind of break.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            BreakKind::SeqGap { .. } => "seq-gap",
            BreakKind::HashMismatch => "hash-mismatch",
        }
    }

    /// What is wrong, in words, without the seq.
    pub fn reason(&self) -> String {
        match self.kind {
            BreakKind::SeqGap { expected_seq: 1 } => {
                format!("the chain starts at seq {}, not seq 1: an event is missing", self.seq)
            }
            BreakKind::SeqGap { expected_seq } => {
                format!(
                    "seq does not follow seq {} (expected seq {expected_seq}): an event is missing",
                    expected_seq - 1
                )
            }
            BreakKind::HashMismatch => "stored hash does not match the event's fields and the previous hash".into(),
        }
    }
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "broken at seq {}: {} (expected hash {}, found {})",
            self.seq,
            self.reason(),
            self.expected_str(),
            if self.found.is_empty() {
                "an empty hash"
            } else {
                &self.found
            }
        )
    }
}

/// A row that cannot be an event at all: a field that is not text, or a
/// seq that is not a positive integer. The schema says `INTEGER` and `NOT
/// NULL TEXT`, so such a row is damage, reported where it stands like a
/// break (never as a setup error: the database opened and read fine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The row's seq; `None` when the seq itself is what is damaged.
    pub seq: Option<u64>,
    /// The column at fault.
    pub column: String,
    /// What it holds instead (`NULL`, `an integer`, `a blob`, ...).
    pub found: String,
    /// For a damaged seq: the last seq read before the row.
    pub after: u64,
    /// The last event that checked out before it, if any.
    pub last_good: Option<Head>,
}

impl Damage {
    /// A short machine name for the kind of damage.
    pub fn kind_name(&self) -> &'static str {
        if self.seq.is_some() { "bad-field" } else { "bad-seq" }
    }

    /// Where the walk stopped: the row's seq, or the one after the last read.
    pub fn position(&self) -> u64 {
        self.seq.unwrap_or(self.after + 1)
    }

    /// What is wrong, in words, without the seq.
    pub fn reason(&self) -> String {
        match self.seq {
            Some(_) => format!(
                "the row is damaged: column {:?} is {}, not text",
                self.column, self.found
            ),
            None => format!(
                "a row is damaged: its seq column {:?} holds {}, not a positive integer",
                self.column, self.found
            ),
        }
    }

    /// `at seq N` or `after seq N`, for messages.
    pub fn place(&self) -> String {
        match self.seq {
            Some(seq) => format!("at seq {seq}"),
            None => format!("after seq {}", self.after),
        }
    }
}

impl fmt::Display for Damage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "broken {}: {}", self.place(), self.reason())
    }
}

/// Why a row with seq `value` (NULL, zero or negative) is a finding: a walk
/// by seq from 1 never reaches it, yet it sits in the events table.
pub fn unreachable_reason(value: &str) -> String {
    format!("a row has seq {value}, which no chain position can hold")
}

/// Walks a chain one event at a time, remembering only the previous
/// event's seq and stored hash.
#[derive(Clone, Debug)]
pub struct ChainCheck {
    /// Seq of the previous event (0 before the first).
    prev_seq: u64,
    /// Stored hash of the previous event (empty before the first).
    prev_hash: Vec<u8>,
    checked: u64,
    /// Seqs whose payload may no longer hash, where a trusted statement says so.
    redactions: Option<Arc<Redactions>>,
    /// The seqs accepted as redacted, in order.
    redacted: Vec<u64>,
}

impl ChainCheck {
    /// A walk that starts at seq 1, whose previous hash is empty.
    pub fn from_start() -> Self {
        Self::resume(0, b"")
    }

    /// A walk that continues after a head already trusted (a cursor).
    pub fn after(head: Head) -> Self {
        Self::resume(head.seq, &head.hash)
    }

    /// A walk that continues after event `seq` whose stored hash is `hash`,
    /// whatever it holds (used by `verify --from`, which trusts the event
    /// before its range as stored).
    pub fn resume(seq: u64, hash: &[u8]) -> Self {
        let mut prev_hash = Vec::with_capacity(64);
        prev_hash.extend_from_slice(hash);
        ChainCheck {
            prev_seq: seq,
            prev_hash,
            checked: 0,
            redactions: None,
            redacted: Vec::new(),
        }
    }

    /// The same walk, accepting the redactions trusted statements cover
    /// ([`Redactions::accepts`]): such a row's stored hash is taken as its
    /// hash, the payload being withheld.
    pub fn with_redactions(mut self, redactions: Option<Arc<Redactions>>) -> Self {
        self.redactions = redactions.filter(|r| !r.is_empty());
        self
    }

    /// The redactions this walk accepts.
    pub fn redactions(&self) -> Option<&Arc<Redactions>> {
        self.redactions.as_ref()
    }

    /// The seqs accepted as redacted so far.
    pub fn redacted(&self) -> &[u64] {
        &self.redacted
    }

    /// Whether `event`, whose payload does not hash to its stored hash, is
    /// a redaction a trusted statement covers.
    fn redacted_here(&self, event: &EventRef<'_>) -> bool {
        self.redactions.as_ref().is_some_and(|r| {
            r.get(event.seq).is_some()
                && crate::hash::is_hex_hash(event.hash)
                && r.accepts_row(
                    event.seq,
                    event.hash,
                    &fields_digest(
                        &self.prev_hash,
                        event.seq,
                        event.run_id,
                        event.step_id,
                        event.at,
                        event.kind,
                    ),
                    event.payload_json,
                )
        })
    }

    /// The last event that checked out (or the starting head).
    pub fn last_good(&self) -> Option<Head> {
        Head::from_stored(self.prev_seq, &self.prev_hash).filter(|h| h.seq > 0)
    }

    /// How many events this walk has checked.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The seq the next event must have.
    pub fn next_seq(&self) -> u64 {
        self.prev_seq + 1
    }

    /// Checks the next event. On success it becomes the last good head.
    pub fn check(&mut self, event: &EventRef<'_>) -> Result<Head, Box<ChainBreak>> {
        let mut expected = event.expected_hash(&self.prev_hash);
        let expected_seq = self.next_seq();
        let kind = if event.seq != expected_seq {
            Some(BreakKind::SeqGap { expected_seq })
        } else if event.hash != expected {
            if self.redacted_here(event) {
                self.redacted.push(event.seq);
                expected.copy_from_slice(event.hash);
                None
            } else {
                Some(BreakKind::HashMismatch)
            }
        } else {
            None
        };
        if let Some(kind) = kind {
            return Err(Box::new(ChainBreak {
                seq: event.seq,
                kind,
                expected,
                found: String::from_utf8_lossy(event.hash).into_owned(),
                last_good: self.last_good(),
            }));
        }
        self.prev_seq = event.seq;
        self.prev_hash.clear();
        self.prev_hash.extend_from_slice(&expected);
        self.checked += 1;
        Ok(Head::new(event.seq, expected))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventBatch;

    fn chain(n: u64) -> EventBatch {
        let mut batch = EventBatch::new();
        let mut prev: Vec<u8> = Vec::new();
        for seq in 1..=n {
            let payload = format!("{{\"n\":{seq}}}");
            let h = crate::event_hash(
                &prev,
                seq,
                b"run",
                b"",
                b"2026-01-01T00:00:00Z",
                b"step",
                payload.as_bytes(),
            );
            batch.push(
                seq,
                [b"run", b"", b"2026-01-01T00:00:00Z", b"step", payload.as_bytes(), &h],
            );
            prev = h.to_vec();
        }
        batch
    }

    #[test]
    fn an_intact_chain_checks_out() {
        let batch = chain(5);
        let mut walk = ChainCheck::from_start();
        for ev in batch.iter() {
            walk.check(&ev).unwrap();
        }
        assert_eq!(walk.checked(), 5);
        assert_eq!(walk.last_good().unwrap().seq, 5);
        assert_eq!(walk.last_good().unwrap().hash, batch.last().unwrap().hash);
    }

    #[test]
    fn a_chain_must_start_at_seq_1() {
        let batch = chain(3);
        let mut walk = ChainCheck::from_start();
        let err = walk.check(&batch.get(1).unwrap()).unwrap_err();
        assert_eq!(err.seq, 2);
        assert_eq!(err.kind, BreakKind::SeqGap { expected_seq: 1 });
        assert_eq!(err.last_good, None);
    }

    #[test]
    fn a_blanked_payload_passes_only_where_a_statement_names_it() {
        use crate::redaction::{Covered, Redactions};
        let batch = chain(4);
        let third = batch.get(2).unwrap();
        let second_hash = batch.get(1).unwrap().hash.to_vec();
        let blanked = EventRef {
            payload_json: b"{}",
            ..third
        };
        // Content rewritten rather than withheld is no redaction.
        let rewritten = EventRef {
            payload_json: b"{\"tool\":\"shell.exec\"}",
            ..third
        };
        let covered = |fields_of: &EventRef<'_>| Covered {
            hash: third.hash.try_into().unwrap(),
            fields: fields_digest(
                &second_hash,
                3,
                fields_of.run_id,
                fields_of.step_id,
                fields_of.at,
                fields_of.kind,
            ),
            statement: "redactions/3".into(),
            key: "erasure".into(),
            reason: "a token".into(),
        };
        let walk = |r: Option<Redactions>, third: EventRef<'_>| {
            let mut walk = ChainCheck::from_start().with_redactions(r.map(Arc::new));
            let mut out = Vec::new();
            for ev in [
                batch.get(0).unwrap(),
                batch.get(1).unwrap(),
                third,
                batch.get(3).unwrap(),
            ] {
                out.push(walk.check(&ev).map(|h| h.seq).map_err(|b| b.seq));
            }
            (out, walk.redacted().to_vec())
        };
        // Without a statement: the break it always was.
        assert_eq!(walk(None, blanked).0[2], Err(3));
        // With one: accepted, named, and the next event links to the stored hash.
        let mut r = Redactions::default();
        r.insert(3, covered(&third));
        assert_eq!(
            walk(Some(r.clone()), blanked),
            (vec![Ok(1), Ok(2), Ok(3), Ok(4)], vec![3])
        );
        assert_eq!(walk(Some(r.clone()), rewritten).0[2], Err(3));
        // A statement does not cover another field changed with the payload.
        let retyped = EventRef {
            kind: b"other",
            ..blanked
        };
        assert_eq!(walk(Some(r.clone()), retyped).0[2], Err(3));
        // Nor another seq.
        let mut elsewhere = Redactions::default();
        elsewhere.insert(2, covered(&third));
        assert_eq!(walk(Some(elsewhere), blanked).0[2], Err(3));
    }

    #[test]
    fn continuing_after_a_trusted_head() {
        let batch = chain(3);
        let second = batch.get(1).unwrap();
        let mut walk = ChainCheck::after(Head::from_stored(2, second.hash).unwrap());
        assert_eq!(walk.check(&batch.get(2).unwrap()).unwrap().seq, 3);
    }
}
