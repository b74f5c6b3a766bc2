//! The record every sink ships: one JSON object per event, holding the
//! seven hashed fields exactly as stored, the event's `hash`, the previous
//! event's `prev_hash`, and the `origin` (which database this chain is).
//!
//! From a sequence of records alone a consumer can recompute every hash:
//! `payload_json` travels as a JSON string holding the stored text byte for
//! byte, never as re-serialized JSON.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use crate::event::EventRef;
use crate::hash::{HexHash, event_hash};

/// One exported event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record<'a> {
    #[serde(borrow)]
    pub origin: Cow<'a, str>,
    pub seq: u64,
    #[serde(borrow)]
    pub run_id: Cow<'a, str>,
    #[serde(borrow)]
    pub step_id: Cow<'a, str>,
    #[serde(borrow)]
    pub at: Cow<'a, str>,
    #[serde(borrow, rename = "type")]
    pub kind: Cow<'a, str>,
    #[serde(borrow)]
    pub payload_json: Cow<'a, str>,
    #[serde(borrow)]
    pub hash: Cow<'a, str>,
    #[serde(borrow)]
    pub prev_hash: Cow<'a, str>,
}

/// An event that cannot be exported exactly: JSON strings are UTF-8, so a
/// field holding other bytes has no faithful JSON form.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("seq {seq}: {field} is not valid UTF-8 and cannot be exported exactly")]
pub struct NotUtf8 {
    pub seq: u64,
    pub field: &'static str,
}

impl<'a> Record<'a> {
    /// The record for `event`, whose predecessor's stored hash is `prev_hash`.
    pub fn from_event(origin: &'a str, event: &EventRef<'a>, prev_hash: &'a [u8]) -> Result<Self, NotUtf8> {
        let text = |field: &'static str, bytes: &'a [u8]| {
            std::str::from_utf8(bytes)
                .map(Cow::Borrowed)
                .map_err(|_| NotUtf8 { seq: event.seq, field })
        };
        Ok(Record {
            origin: Cow::Borrowed(origin),
            seq: event.seq,
            run_id: text("run_id", event.run_id)?,
            step_id: text("step_id", event.step_id)?,
            at: text("at", event.at)?,
            kind: text("type", event.kind)?,
            payload_json: text("payload_json", event.payload_json)?,
            hash: text("hash", event.hash)?,
            prev_hash: text("prev_hash", prev_hash)?,
        })
    }

    /// Parses one record (one JSON Lines line).
    pub fn parse(json: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }

    /// Appends the record's JSON (no newline) to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        // Writing to a Vec cannot fail, and every field is a plain string or number.
        serde_json::to_writer(out, self).expect("serializing a record to memory");
    }

    /// The hash this record's fields and `prev_hash` give.
    pub fn expected_hash(&self) -> HexHash {
        event_hash(
            self.prev_hash.as_bytes(),
            self.seq,
            self.run_id.as_bytes(),
            self.step_id.as_bytes(),
            self.at.as_bytes(),
            self.kind.as_bytes(),
            self.payload_json.as_bytes(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_travels_byte_for_byte() {
        // Whitespace, key order, escapes and non-ASCII must survive exactly.
        let payload = "{ \"b\":1,\"a\" : \"caf\u{e9} \\u00e9 \u{65e5}\" }";
        let prev = b"";
        let hash = event_hash(prev, 1, b"r", b"", b"t", b"k", payload.as_bytes());
        let event = EventRef {
            seq: 1,
            run_id: b"r",
            step_id: b"",
            at: b"t",
            kind: b"k",
            payload_json: payload.as_bytes(),
            hash: &hash,
        };
        let record = Record::from_event("prod/agentrt", &event, prev).unwrap();
        let mut line = Vec::new();
        record.write_json(&mut line);
        let back = Record::parse(&line).unwrap();
        assert_eq!(back.payload_json, payload);
        assert_eq!(back.expected_hash(), hash);
        assert_eq!(back, record);
        let json: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(json["type"], "k");
        assert_eq!(json["origin"], "prod/agentrt");
    }

    #[test]
    fn refuses_bytes_json_cannot_carry() {
        let event = EventRef {
            seq: 7,
            run_id: b"r",
            step_id: b"",
            at: b"t",
            kind: b"k",
            payload_json: b"\xff",
            hash: b"h",
        };
        assert_eq!(
            Record::from_event("o", &event, b"").unwrap_err(),
            NotUtf8 {
                seq: 7,
                field: "payload_json"
            }
        );
    }
}
