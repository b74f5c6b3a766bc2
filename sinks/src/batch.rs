//! A batch of verified events, encoded once as records for every sink.

use chainship_chain::record::{NotUtf8, Record, RecordFormat};

use crate::s3::compression::{BodyEncoder, Compression};
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
///
/// A batch made [`Batch::compressed`] (the S3 sink's: an object body) is
/// compressed as records are added, so it holds compressed bytes and a
/// small tail, not the whole uncompressed object: `jsonl` then holds only
/// records not compressed yet, and [`Batch::seal`] finishes the body.
#[derive(Debug, Default)]
pub struct Batch {
    pub origin: String,
    /// The shape each record is written in (`--record-format`).
    format: RecordFormat,
    /// Reused by formats that write the chainship record first.
    scratch: Vec<u8>,
    /// Every record's JSON followed by `\n` (in a compressed batch: only
    /// those not compressed yet).
    pub jsonl: Vec<u8>,
    pub records: Vec<RecordMeta>,
    compression: Option<Compression>,
    encoder: Option<BodyEncoder>,
    /// The finished compressed body (after [`Batch::seal`]).
    body: Option<bytes::Bytes>,
    sealed: bool,
    /// Uncompressed bytes of all records, newlines included.
    bytes: usize,
    first_at: Option<String>,
    /// Compressing failed (reported by [`Batch::seal`]).
    failed: Option<std::io::Error>,
}

/// Records are handed to the compressor in pieces of about this size.
const COMPRESS_EVERY: usize = 256 << 10;

impl Batch {
    pub fn new(origin: &str) -> Self {
        Batch {
            origin: origin.to_owned(),
            ..Default::default()
        }
    }

    /// A batch compressed as records are added, with `compression`.
    pub fn compressed(origin: &str, compression: Compression) -> Self {
        Batch {
            compression: Some(compression),
            ..Batch::new(origin)
        }
    }

    /// This batch, writing its records in `format`.
    pub fn in_format(self, format: RecordFormat) -> Self {
        Batch { format, ..self }
    }

    /// An empty batch like this one (same origin, format and compression).
    pub fn like(other: &Batch) -> Self {
        Batch {
            compression: other.compression,
            format: other.format,
            ..Batch::new(&other.origin)
        }
    }

    pub fn clear(&mut self) {
        self.jsonl.clear();
        self.records.clear();
        self.encoder = None;
        self.body = None;
        self.sealed = false;
        self.bytes = 0;
        self.first_at = None;
        self.failed = None;
    }

    /// The records' JSON Lines size, uncompressed.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// How the batch is compressed as it is built, if it is.
    pub fn compression(&self) -> Option<Compression> {
        self.compression
    }

    /// Finishes a compressed batch's body (nothing to do for a plain one).
    pub fn seal(&mut self) -> std::io::Result<()> {
        if self.compression.is_none() || self.sealed {
            return Ok(());
        }
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        self.compress_tail()?;
        if let Some(encoder) = self.encoder.take() {
            self.body = Some(encoder.finish()?.into());
        }
        self.sealed = true;
        Ok(())
    }

    /// The compressed body of a sealed compressed batch (shared, not copied).
    pub fn body(&self) -> Option<bytes::Bytes> {
        self.body.clone().filter(|_| self.sealed)
    }

    fn compress_tail(&mut self) -> std::io::Result<()> {
        let Some(compression) = self.compression else {
            return Ok(());
        };
        if self.encoder.is_none() {
            self.encoder = Some(compression.encoder(Vec::new())?);
        }
        if let Some(encoder) = self.encoder.as_mut() {
            encoder.write_all(&self.jsonl)?;
        }
        self.jsonl.clear();
        Ok(())
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
        self.first_at.as_deref()
    }

    /// The JSON of record `i`, without its newline (a plain batch only: a
    /// compressed one no longer holds it).
    pub fn record_json(&self, i: usize) -> &[u8] {
        assert!(self.compression.is_none(), "record_json of a compressed batch");
        let r = &self.records[i];
        &self.jsonl[r.start..r.end]
    }

    /// Appends a verified event whose predecessor's hash is `prev_hash`.
    pub fn push(&mut self, event: &EventRef<'_>, hash: HexHash, prev_hash: PrevHash) -> Result<(), NotUtf8> {
        let record = Record::from_event(&self.origin, event, prev_hash.as_bytes())?;
        if self.records.is_empty() {
            self.first_at = Some(record.at.clone().into_owned());
        }
        let start = self.jsonl.len();
        self.format.write(&record, &mut self.jsonl, &mut self.scratch);
        let end = self.jsonl.len();
        self.jsonl.push(b'\n');
        self.bytes += end + 1 - start;
        self.records.push(RecordMeta {
            seq: event.seq,
            hash,
            prev_hash,
            start,
            end,
        });
        if self.jsonl.len() >= COMPRESS_EVERY && self.compression.is_some() && self.failed.is_none() {
            // Reported by `seal`, before anything is delivered.
            self.failed = self.compress_tail().err();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::s3::compression::Codec;
    use chainship_chain::EventBatch;

    /// A chain of `n` events with payloads of varied size.
    fn events(n: u64) -> EventBatch {
        let mut batch = EventBatch::new();
        let mut prev: Vec<u8> = Vec::new();
        for seq in 1..=n {
            let payload = format!("{{\"n\":{seq},\"pad\":\"{}\"}}", "é".repeat((seq % 97) as usize));
            let at = format!("2026-12-01T00:00:{:02}Z", seq % 60);
            let h = chainship_chain::event_hash(&prev, seq, b"run", b"s", at.as_bytes(), b"tool", payload.as_bytes());
            batch.push(seq, [b"run", b"s", at.as_bytes(), b"tool", payload.as_bytes(), &h]);
            prev = h.to_vec();
        }
        batch
    }

    fn fill(batch: &mut Batch, events: &EventBatch) {
        let mut prev = PrevHash::NONE;
        for e in events.iter() {
            let hash: HexHash = e.hash.try_into().unwrap();
            batch.push(&e, hash, prev).unwrap();
            prev = PrevHash::of(hash);
        }
    }

    #[test]
    fn a_compressed_batch_holds_compressed_bytes_that_decode_to_the_plain_batch() {
        let events = events(20_000);
        let mut plain = Batch::new("o");
        fill(&mut plain, &events);
        for codec in Codec::ALL {
            let compression = Compression::new(codec, None).unwrap();
            let mut batch = Batch::compressed("o", compression);
            fill(&mut batch, &events);
            // Only the tail not compressed yet is held uncompressed.
            assert!(batch.jsonl.len() < COMPRESS_EVERY + 4096, "{}", batch.jsonl.len());
            assert_eq!(batch.bytes(), plain.jsonl.len());
            assert_eq!(batch.first_at(), plain.first_at());
            assert_eq!(batch.len(), plain.len());
            assert!(batch.body().is_none(), "not sealed yet");
            batch.seal().unwrap();
            let body = batch.body().unwrap().to_vec();
            assert!(
                body.len() * 3 < plain.jsonl.len(),
                "{codec}: {} of {}",
                body.len(),
                plain.jsonl.len()
            );
            let mut decoded = Vec::new();
            std::io::Read::read_to_end(&mut codec.decoder(&body[..]).unwrap(), &mut decoded).unwrap();
            assert!(decoded == plain.jsonl, "{codec}: the body decodes to the records");
            // Cleared, it is reused for the next batch with the same compression.
            batch.clear();
            assert!(batch.body().is_none() && batch.bytes() == 0);
            let mut next = Batch::like(&batch);
            fill(&mut next, &events);
            next.seal().unwrap();
            assert_eq!(&next.body().unwrap()[..], &body[..], "{codec}: deterministic");
        }
    }
}
