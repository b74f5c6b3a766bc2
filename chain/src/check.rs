//! The rule that decides where a chain breaks (`docs/chain-format.md`,
//! "What a break is"): walking by seq, event N breaks the chain when its
//! stored hash is not the one its fields and event N-1's stored hash give,
//! or when its seq is not N-1's seq plus one.
//!
//! Each check uses the *stored* previous hash, so one altered event breaks
//! exactly one place: the event itself (or, for a removed event, the next).

use std::fmt;

use crate::event::EventRef;
use crate::hash::HexHash;
use crate::head::Head;

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
        }
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
        let expected = event.expected_hash(&self.prev_hash);
        let expected_seq = self.next_seq();
        let kind = if event.seq != expected_seq {
            Some(BreakKind::SeqGap { expected_seq })
        } else if event.hash != expected {
            Some(BreakKind::HashMismatch)
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
    fn continuing_after_a_trusted_head() {
        let batch = chain(3);
        let second = batch.get(1).unwrap();
        let mut walk = ChainCheck::after(Head::from_stored(2, second.hash).unwrap());
        assert_eq!(walk.check(&batch.get(2).unwrap()).unwrap().seq, 3);
    }
}
