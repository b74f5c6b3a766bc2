//! A batch of verified events, encoded once as records for every sink.

use chainship_chain::record::{NotUtf8, Record};
use chainship_chain::{EventRef, Head, HexHash, PrevHash};

/// Where one record sits in the batch, and what a sink puts in headers or
/// metadata without parsing the JSON back.
#[derive(Clone, Copy, Debug)]
pub struct RecordMeta {
    pub seq: u64,
    pub hash: HexHash,
    /// The previous event's hash (none for seq 1).
    pub prev_hash: PrevHash,
    /// The record's JSON is `jsonl[start..end]` (without the newline).
    pub start: usize,
    pub end: usize,
}

impl RecordMeta {
    pub fn hash_str(&self) -> &str {
        std::str::from_utf8(&self.hash).expect("hex")
    }

    pub fn prev_hash_str(&self) -> &str {
        self.prev_hash.as_str()
    }
}

/// Records of one origin, consecutive by seq, as JSON Lines.
#[derive(Debug, Default)]
pub struct Batch {
    pub origin: String,
    /// Every record's JSON followed by `\n`.
    pub jsonl: Vec<u8>,
    pub records: Vec<RecordMeta>,
}

impl Batch {
    pub fn new(origin: &str) -> Self {
        Batch {
            origin: origin.to_owned(),
            ..Default::default()
        }
    }

    pub fn clear(&mut self) {
        self.jsonl.clear();
        self.records.clear();
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    pub fn first_seq(&self) -> Option<u64> {
        self.records.first().map(|r| r.seq)
    }

    /// The head this batch ends at.
    pub fn last_head(&self) -> Option<Head> {
        self.records.last().map(|r| Head::new(r.seq, r.hash))
    }

    /// The `at` of the first record (for date-partitioned keys).
    pub fn first_at(&self) -> Option<&str> {
        let r = self.records.first()?;
        let record = chainship_chain::record::Record::parse(&self.jsonl[r.start..r.end]).ok()?;
        let at = record.at;
        // Borrowed from the buffer when it held no escapes, which an RFC 3339 time never does.
        match at {
            std::borrow::Cow::Borrowed(s) => Some(s),
            std::borrow::Cow::Owned(_) => None,
        }
    }

    /// The JSON of record `i`, without its newline.
    pub fn record_json(&self, i: usize) -> &[u8] {
        let r = &self.records[i];
        &self.jsonl[r.start..r.end]
    }

    /// Appends a verified event whose predecessor's hash is `prev_hash`.
    pub fn push(&mut self, event: &EventRef<'_>, hash: HexHash, prev_hash: PrevHash) -> Result<(), NotUtf8> {
        let record = Record::from_event(&self.origin, event, prev_hash.as_bytes())?;
        let start = self.jsonl.len();
        record.write_json(&mut self.jsonl);
        let end = self.jsonl.len();
        self.jsonl.push(b'\n');
        self.records.push(RecordMeta {
            seq: event.seq,
            hash,
            prev_hash,
            start,
            end,
        });
        Ok(())
    }
}
