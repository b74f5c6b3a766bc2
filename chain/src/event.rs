//! Events as read from the table: a borrowed view ([`EventRef`]) and a
//! reusable page of them ([`EventBatch`]) that keeps every field of every
//! event in one byte buffer, so reading a page allocates nothing once the
//! buffer has grown to its working size.

use crate::hash::{HexHash, event_hash};

/// One event's fields exactly as stored, borrowed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    pub seq: u64,
    pub run_id: &'a [u8],
    pub step_id: &'a [u8],
    pub at: &'a [u8],
    /// The `type` column.
    pub kind: &'a [u8],
    pub payload_json: &'a [u8],
    /// The stored hash (not checked to be hex: a damaged one is a break).
    pub hash: &'a [u8],
}

impl<'a> EventRef<'a> {
    /// The event from its six text fields in table order: run_id, step_id,
    /// at, type, payload_json, hash.
    pub fn from_fields(seq: u64, fields: [&'a [u8]; 6]) -> EventRef<'a> {
        let [run_id, step_id, at, kind, payload_json, hash] = fields;
        EventRef {
            seq,
            run_id,
            step_id,
            at,
            kind,
            payload_json,
            hash,
        }
    }

    /// Bytes of its six text fields (what it takes in an [`EventBatch`]).
    pub fn byte_len(&self) -> usize {
        self.run_id.len()
            + self.step_id.len()
            + self.at.len()
            + self.kind.len()
            + self.payload_json.len()
            + self.hash.len()
    }

    /// The hash this event must have after an event whose stored hash is `prev_hash`.
    pub fn expected_hash(&self, prev_hash: &[u8]) -> HexHash {
        event_hash(
            prev_hash,
            self.seq,
            self.run_id,
            self.step_id,
            self.at,
            self.kind,
            self.payload_json,
        )
    }
}

/// Where one event's six text fields end in the batch buffer; each starts
/// where the previous one ended.
#[derive(Clone, Copy, Debug)]
struct Spans {
    seq: u64,
    start: usize,
    ends: [usize; 6],
}

/// A page of events in seq order, in one reusable buffer.
#[derive(Default, Debug)]
pub struct EventBatch {
    bytes: Vec<u8>,
    spans: Vec<Spans>,
}

impl EventBatch {
    pub fn new() -> Self {
        Self::default()
    }

    /// Empties the batch but keeps its memory for the next page.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of field data held.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Bytes of field data it can hold before growing.
    pub fn capacity_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    /// Makes room for `bytes` more of field data in one allocation, so a
    /// page filled up to a bound never doubles its buffer past it.
    pub fn reserve_bytes(&mut self, bytes: usize) {
        self.bytes.reserve_exact(bytes);
    }

    /// Appends one event; `fields` are run_id, step_id, at, type, payload_json, hash.
    pub fn push(&mut self, seq: u64, fields: [&[u8]; 6]) {
        let start = self.bytes.len();
        let mut ends = [0; 6];
        for (end, field) in ends.iter_mut().zip(fields) {
            self.bytes.extend_from_slice(field);
            *end = self.bytes.len();
        }
        self.spans.push(Spans { seq, start, ends });
    }

    pub fn get(&self, index: usize) -> Option<EventRef<'_>> {
        let s = self.spans.get(index)?;
        let f = |i: usize| {
            let from = if i == 0 { s.start } else { s.ends[i - 1] };
            &self.bytes[from..s.ends[i]]
        };
        Some(EventRef {
            seq: s.seq,
            run_id: f(0),
            step_id: f(1),
            at: f(2),
            kind: f(3),
            payload_json: f(4),
            hash: f(5),
        })
    }

    pub fn first(&self) -> Option<EventRef<'_>> {
        self.get(0)
    }

    pub fn last(&self) -> Option<EventRef<'_>> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    pub fn iter(&self) -> impl Iterator<Item = EventRef<'_>> {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Releases memory above `bytes` of field data (the batch must be empty
    /// for this to release much).
    pub fn shrink_to(&mut self, bytes: usize) {
        self.bytes.shrink_to(bytes);
        self.spans.shrink_to(bytes / 64);
    }

    /// Keeps only the first `len` events.
    pub fn truncate(&mut self, len: usize) {
        if let Some(s) = self.spans.get(len) {
            self.bytes.truncate(s.start);
            self.spans.truncate(len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_come_back_as_pushed() {
        let mut batch = EventBatch::new();
        batch.push(1, [b"r", b"", b"t1", b"k", b"{}", b"h1"]);
        batch.push(2, [b"run", b"s", b"t2", b"kind", "{\"é\":1}".as_bytes(), b"h2"]);
        let second = batch.get(1).unwrap();
        assert_eq!(second.seq, 2);
        assert_eq!(second.run_id, b"run");
        assert_eq!(second.step_id, b"s");
        assert_eq!(second.payload_json, "{\"é\":1}".as_bytes());
        assert_eq!(second.hash, b"h2");
        assert_eq!(batch.first().unwrap().step_id, b"");
        batch.truncate(1);
        assert_eq!(batch.len(), 1);
        assert_eq!(batch.last().unwrap().hash, b"h1");
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.byte_len(), 0);
    }
}
