//! The record every sink ships: one JSON object per event, holding the
//! seven hashed fields exactly as stored, the event's `hash`, the previous
//! event's `prev_hash`, and the `origin` (which database this chain is).
//!
//! From a sequence of records alone a consumer can recompute every hash:
//! `payload_json` travels as a JSON string holding the stored text byte for
//! byte, never as re-serialized JSON.
//!
//! Sinks may also write each record in a SIEM's schema ([`RecordFormat`]:
//! [`ocsf`], [`ecs`]) carrying this record whole; [`Record::parse`] reads
//! every format, detected per line, and checks a profile's mapped fields
//! against the record it carries ([`format`](mod@format)).

pub mod ecs;
pub mod facts;
pub mod format;
pub mod json;
pub mod mapping;
pub mod ocsf;

pub use format::{RecordError, RecordFormat};

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

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
    /// Empty in a tombstone (see `redacted`), which carries no payload.
    #[serde(borrow, default)]
    pub payload_json: Cow<'a, str>,
    #[serde(borrow)]
    pub hash: Cow<'a, str>,
    #[serde(borrow)]
    pub prev_hash: Cow<'a, str>,
    /// The fields whose stored bytes are not UTF-8 and so travel as base64
    /// (standard alphabet, padded) instead: JSON strings cannot hold them,
    /// and a lossy conversion would no longer hash to the chain. Absent
    /// when every field is text, which is nearly always.
    #[serde(borrow, default, skip_serializing_if = "Vec::is_empty")]
    pub b64: Vec<Cow<'a, str>>,
    /// A tombstone: the payload was withheld, and this names the redaction
    /// statement in the anchor store that says who withheld it and why
    /// ([`crate::redaction`]). Every other field is the event's as it was.
    #[serde(borrow, default, skip_serializing_if = "Option::is_none")]
    pub redacted: Option<Cow<'a, str>>,
}

/// An event whose hash or previous hash is not text: such an event never
/// passes the chain check, so this is only ever seen on a broken chain.
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
        let mut b64 = Vec::new();
        let mut exact = |field: &'static str, bytes: &'a [u8]| match std::str::from_utf8(bytes) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => {
                b64.push(Cow::Borrowed(field));
                Cow::Owned(BASE64.encode(bytes))
            }
        };
        let run_id = exact("run_id", event.run_id);
        let step_id = exact("step_id", event.step_id);
        let at = exact("at", event.at);
        let kind = exact("type", event.kind);
        let payload_json = exact("payload_json", event.payload_json);
        Ok(Record {
            origin: Cow::Borrowed(origin),
            seq: event.seq,
            run_id,
            step_id,
            at,
            kind,
            payload_json,
            hash: text("hash", event.hash)?,
            prev_hash: text("prev_hash", prev_hash)?,
            b64,
            redacted: None,
        })
    }

    /// The stored bytes of a hashed field (`run_id`, `step_id`, `at`,
    /// `type`, `payload_json`), decoded when it travels as base64; `None`
    /// when the record names a field it does not have or holds bad base64.
    pub fn field_bytes(&self, field: &str) -> Option<Cow<'_, [u8]>> {
        let value = match field {
            "run_id" => &self.run_id,
            "step_id" => &self.step_id,
            "at" => &self.at,
            "type" => &self.kind,
            "payload_json" => &self.payload_json,
            _ => return None,
        };
        if self.travels_as_base64(field) {
            // Only the one form the exporter writes: bytes that are not UTF-8,
            // in padded standard base64. Anything else would let a writer to the
            // sink re-encode a plain field and blind the rules that read it.
            let bytes = BASE64.decode(value.as_bytes()).ok()?;
            let canonical = std::str::from_utf8(&bytes).is_err() && BASE64.encode(&bytes) == value.as_ref();
            canonical.then_some(Cow::Owned(bytes))
        } else {
            Some(Cow::Borrowed(value.as_bytes()))
        }
    }

    /// Whether `field`'s stored bytes travel as base64 (named in `b64`).
    pub fn travels_as_base64(&self, field: &str) -> bool {
        self.b64.iter().any(|f| f == field)
    }

    /// Just the `seq` of a record line of any format, without building the
    /// record (nor checking it).
    pub fn seq_of(json: &[u8]) -> Option<u64> {
        #[derive(Deserialize)]
        struct Sequence {
            sequence: u64,
        }
        #[derive(Deserialize)]
        struct Seq {
            seq: Option<u64>,
            /// OCSF's `metadata.sequence`.
            metadata: Option<Sequence>,
            /// ECS's `event.sequence`.
            event: Option<Sequence>,
        }
        let s = serde_json::from_slice::<Seq>(json).ok()?;
        s.seq.or(s.metadata.map(|m| m.sequence)).or(s.event.map(|e| e.sequence))
    }

    /// Parses one record (one JSON Lines line) of any format: chainship's
    /// own, or a profile record, whose carried record it returns once every
    /// mapped field is found to be what that record gives.
    pub fn parse(json: &'a [u8]) -> Result<Self, RecordError> {
        match Record::parse_own(json) {
            Ok(record) => Ok(record),
            Err(own) => format::parse_profile(json).unwrap_or(Err(RecordError::Json(own))),
        }
    }

    /// Parses a record in chainship's own format only.
    pub fn parse_own(json: &'a [u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(json)
    }

    /// A record held in a parsed JSON value (chainship's own format).
    pub fn from_value(value: &serde_json::Value) -> Result<Record<'static>, serde_json::Error> {
        Record::deserialize(value).map(Record::into_owned)
    }

    /// The record, no longer borrowing what it was parsed from.
    pub fn into_owned(self) -> Record<'static> {
        let own = |c: Cow<'_, str>| Cow::<'static, str>::Owned(c.into_owned());
        Record {
            origin: own(self.origin),
            seq: self.seq,
            run_id: own(self.run_id),
            step_id: own(self.step_id),
            at: own(self.at),
            kind: own(self.kind),
            payload_json: own(self.payload_json),
            hash: own(self.hash),
            prev_hash: own(self.prev_hash),
            b64: self.b64.into_iter().map(own).collect(),
            redacted: self.redacted.map(own),
        }
    }

    /// Whether this says it is a tombstone (its payload withheld).
    pub fn is_tombstone(&self) -> bool {
        self.redacted.is_some()
    }

    /// Whether this is a tombstone as `redact` writes it: no payload at
    /// all, and `redacted` naming its own seq's statement. A record with
    /// `redacted` and a payload, or naming another statement, is not one.
    pub fn is_clean_tombstone(&self) -> bool {
        self.redacted.as_deref() == Some(crate::redaction::statement_path(self.seq).as_str())
            && self.payload_json.is_empty()
            && !self.travels_as_base64("payload_json")
    }

    /// This record as a tombstone naming `statement`: every field kept but
    /// the payload (and its base64 mark).
    pub fn tombstone(&self, statement: &str) -> Record<'static> {
        let mut t = self.clone().into_owned();
        t.payload_json = Cow::Borrowed("");
        t.b64.retain(|f| f != "payload_json");
        t.redacted = Some(Cow::Owned(statement.to_owned()));
        t
    }

    /// This record's tombstone, naming its own seq's statement.
    pub fn own_tombstone(&self) -> Record<'static> {
        self.tombstone(&crate::redaction::statement_path(self.seq))
    }

    /// [`crate::redaction::fields_digest`] of this record's fields but the
    /// payload; all zero when a field is not what it may be (bad base64).
    pub fn fields_digest(&self) -> HexHash {
        let fields = ["run_id", "step_id", "at", "type"].map(|f| self.field_bytes(f));
        let [Some(run_id), Some(step_id), Some(at), Some(kind)] = fields else {
            return [0; 64];
        };
        crate::redaction::fields_digest(self.prev_hash.as_bytes(), self.seq, &run_id, &step_id, &at, &kind)
    }

    /// Appends the record's JSON (no newline) to `out`: the bytes
    /// `serde_json` writes for it (tested), by the faster [`json`] writer.
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = json::Object::new(out);
        o.str("origin", &self.origin)
            .num("seq", self.seq)
            .str("run_id", &self.run_id)
            .str("step_id", &self.step_id)
            .str("at", &self.at)
            .str("type", &self.kind);
        // A tombstone carries no payload at all, not an empty one.
        if self.redacted.is_none() {
            o.str("payload_json", &self.payload_json);
        }
        o.str("hash", &self.hash).str("prev_hash", &self.prev_hash);
        if !self.b64.is_empty() {
            let fields: Vec<&str> = self.b64.iter().map(|f| f.as_ref()).collect();
            o.strs("b64", &fields);
        }
        if let Some(statement) = &self.redacted {
            o.str("redacted", statement);
        }
        o.close();
    }

    /// The hash this record's fields and `prev_hash` give. A record whose
    /// `b64` list names an unknown field or holds bad base64 gives all zero
    /// bytes, which no stored hash equals.
    pub fn expected_hash(&self) -> HexHash {
        self.hash_after(self.prev_hash.as_bytes())
    }

    /// The hash this record's fields give after `prev_hash` (another
    /// record's stored hash, when the range walk asks whether it links to
    /// it whatever its own `prev_hash` says).
    pub fn hash_after(&self, prev_hash: &[u8]) -> HexHash {
        const FIELDS: [&str; 5] = ["run_id", "step_id", "at", "type", "payload_json"];
        if self.b64.iter().any(|f| !FIELDS.contains(&f.as_ref())) {
            return [0; 64];
        }
        let [Some(run_id), Some(step_id), Some(at), Some(kind), Some(payload)] = FIELDS.map(|f| self.field_bytes(f))
        else {
            return [0; 64];
        };
        event_hash(prev_hash, self.seq, &run_id, &step_id, &at, &kind, &payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn the_record_writer_writes_what_serde_json_writes(
            fields in proptest::collection::vec("(\\PC|[\\x00-\\x1f\"\\\\])*", 8),
            seq in any::<u64>(),
            b64 in proptest::collection::vec("[a-z_]{1,12}", 0..3),
        ) {
            let record = Record {
                origin: fields[0].as_str().into(),
                seq,
                run_id: fields[1].as_str().into(),
                step_id: fields[2].as_str().into(),
                at: fields[3].as_str().into(),
                kind: fields[4].as_str().into(),
                payload_json: fields[5].as_str().into(),
                hash: fields[6].as_str().into(),
                prev_hash: fields[7].as_str().into(),
                b64: b64.iter().map(|f| f.as_str().into()).collect(),
                redacted: (seq % 3 == 0).then(|| fields[5].as_str().into()),
            };
            let mut ours = Vec::new();
            record.write_json(&mut ours);
            if record.is_tombstone() {
                // The one difference: a tombstone has no payload member at all.
                let mut theirs = serde_json::to_value(&record).unwrap();
                theirs.as_object_mut().unwrap().remove("payload_json");
                prop_assert_eq!(serde_json::from_slice::<serde_json::Value>(&ours).unwrap(), theirs);
                prop_assert_eq!(Record::parse(&ours).unwrap().payload_json, "");
            } else {
                prop_assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(&record).unwrap());
            }
        }
    }

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
    fn bytes_json_cannot_carry_travel_as_base64_and_hash_back() {
        let payload: &[u8] = b"{\"x\":\"\xff\xfe\"}";
        let hash = event_hash(b"", 7, b"r\x80", b"", b"t", b"k", payload);
        let event = EventRef {
            seq: 7,
            run_id: b"r\x80",
            step_id: b"",
            at: b"t",
            kind: b"k",
            payload_json: payload,
            hash: &hash,
        };
        let record = Record::from_event("o", &event, b"").unwrap();
        assert_eq!(record.b64, ["run_id", "payload_json"]);
        let mut line = Vec::new();
        record.write_json(&mut line);
        let back = Record::parse(&line).unwrap();
        assert_eq!(back.field_bytes("payload_json").unwrap().as_ref(), payload);
        assert_eq!(back.expected_hash(), hash);
        // A plain record carries no b64 key at all.
        let plain = EventRef {
            run_id: b"r",
            payload_json: b"{}",
            ..event
        };
        let mut line = Vec::new();
        Record::from_event("o", &plain, b"").unwrap().write_json(&mut line);
        assert!(!String::from_utf8(line).unwrap().contains("b64"));
        // A forged marker cannot make a record hash right.
        let mut forged = back.clone();
        forged.b64.push("origin".into());
        assert_eq!(forged.expected_hash(), [0; 64]);
        // Nor can a text field re-encoded as base64, or a non-canonical encoding.
        let mut reencoded = back.clone();
        reencoded.kind = BASE64.encode("k").into();
        reencoded.b64.push("type".into());
        assert_eq!(reencoded.expected_hash(), [0; 64]);
        let mut unpadded = back.clone();
        unpadded.run_id = BASE64.encode(b"r\x80").trim_end_matches('=').to_owned().into();
        assert_eq!(unpadded.expected_hash(), [0; 64]);
        // A stored hash that is not text cannot be exported (and never passes the chain check).
        let bad_hash = EventRef { hash: b"\xff", ..event };
        assert_eq!(
            Record::from_event("o", &bad_hash, b"").unwrap_err(),
            NotUtf8 { seq: 7, field: "hash" }
        );
    }
}
