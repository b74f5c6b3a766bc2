//! Which shape records travel in (`--record-format`), writing each, and
//! reading any of them back: a SIEM copy is still evidence.
//!
//! A profile record (OCSF, ECS) carries the chainship record whole, and
//! every field it maps is derived from that record alone. Reading one takes
//! the carried record out and derives the whole profile record again from
//! it: any mapped field that differs (changed, added or removed) makes the
//! record [`RecordError::Mapping`], naming the seq and the field, because a
//! SIEM searches the mapped fields, not the carried ones. The comparison is
//! of JSON values, so a pipeline that re-serializes (key order, spacing,
//! escapes) changes nothing.

use crate::{Error, permanent};
use std::fmt;
use std::str::FromStr;

use serde_json::Value;

use super::facts::Facts;
use super::mapping::Mapping;
use super::{Record, ecs, ocsf};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RecordFormat {
    /// chainship's own record: the seven hashed fields, hash, prev_hash, origin.
    #[default]
    Chainship,
    /// OCSF 1.1.0 API Activity (6003), the record in `unmapped.chainship`.
    Ocsf,
    /// Elastic Common Schema, the record in `event.original`.
    Ecs,
}

impl RecordFormat {
    pub const ALL: [RecordFormat; 3] = [RecordFormat::Chainship, RecordFormat::Ocsf, RecordFormat::Ecs];

    pub fn name(self) -> &'static str {
        match self {
            RecordFormat::Chainship => "chainship",
            RecordFormat::Ocsf => "ocsf",
            RecordFormat::Ecs => "ecs",
        }
    }

    /// The SIEM mapping of this format; `None` for chainship's own record.
    /// The one place the formats are listed (each arm is checked by the compiler).
    pub fn mapping(self) -> Option<&'static dyn Mapping> {
        match self {
            RecordFormat::Chainship => None,
            RecordFormat::Ocsf => Some(&ocsf::Ocsf),
            RecordFormat::Ecs => Some(&ecs::Ecs),
        }
    }

    /// How every line this format writes begins (its first member, which
    /// the writer always puts first), for telling a torn record from a file
    /// that is not a sink's.
    pub fn line_start(self) -> &'static [u8] {
        match self.mapping() {
            Some(m) => m.line_start(),
            None => b"{\"origin\":",
        }
    }

    /// Appends `record` in this format (one JSON object, no newline) to
    /// `out`; `scratch` is reused between calls (a mapping writes the
    /// chainship line there first, to carry it).
    pub fn write(self, record: &Record<'_>, out: &mut Vec<u8>, scratch: &mut Vec<u8>) {
        let Some(mapping) = self.mapping() else {
            return record.write_json(out);
        };
        let facts = Facts::of(record);
        scratch.clear();
        record.write_json(scratch);
        mapping.write(out, record, &facts, scratch);
    }
}

impl fmt::Display for RecordFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RecordFormat {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        RecordFormat::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| permanent!("unknown record format {s:?} (chainship, ocsf or ecs)"))
    }
}

/// A line that is not a record of any format, or a profile record whose
/// mapped fields are not what its carried record gives.
#[derive(Debug)]
pub enum RecordError {
    /// Not a chainship record, nor a profile record carrying one.
    Json(serde_json::Error),
    /// A profile record that cannot be checked: it carries no readable
    /// chainship record, or repeats a key.
    Malformed { format: RecordFormat, why: String },
    /// A profile record whose mapped fields disagree with the record it
    /// carries: the carried record is there (and may hash right), but the
    /// fields a SIEM searches were changed.
    Mapping {
        format: RecordFormat,
        record: Box<Record<'static>>,
        field: String,
    },
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::Json(e) => write!(f, "{e}"),
            RecordError::Malformed { format, why } => write!(f, "an {format} record that cannot be checked: {why}"),
            RecordError::Mapping { format, record, field } => write!(
                f,
                "seq {}: the {format} record's {field} is not what its chainship record maps to",
                record.seq
            ),
        }
    }
}

impl std::error::Error for RecordError {}

impl RecordError {
    /// The record a profile record with changed mapped fields carries.
    pub fn carried(&self) -> Option<&Record<'static>> {
        match self {
            RecordError::Mapping { record, .. } => Some(record),
            _ => None,
        }
    }

    /// [`RecordError::carried`], taken.
    pub fn into_carried(self) -> Option<Record<'static>> {
        match self {
            RecordError::Mapping { record, .. } => Some(*record),
            _ => None,
        }
    }
}

/// A line in a profile's shape: its carried record, checked against every
/// mapped field. `None` when the line is JSON but no profile record.
pub(super) fn parse_profile(json: &[u8]) -> Option<Result<Record<'static>, RecordError>> {
    if let Some(record) = as_written(json) {
        return Some(Ok(record));
    }
    // Not JSON at all (a torn line): that is what to say about it.
    let value: Value = match serde_json::from_slice(json) {
        Ok(value) => value,
        Err(e) => return Some(Err(RecordError::Json(e))),
    };
    let format = RecordFormat::ALL
        .into_iter()
        .find(|f| f.mapping().is_some_and(|m| m.detect(&value)))?;
    let mapping = format.mapping().expect("found by its mapping");
    let malformed = |why: String| RecordError::Malformed { format, why };
    // A repeated key would be read one way here (the last wins) and maybe
    // another by a SIEM (the first): such a record proves nothing.
    if let Err(e) = serde_json::from_slice::<NoRepeatedKeys>(json) {
        return Some(Err(malformed(e.to_string())));
    }
    let record = mapping.carried(&value).map_err(|e| malformed(e.message));
    let record = match record {
        Ok(r) => r,
        Err(e) => return Some(Err(e)),
    };
    let mut line = Vec::new();
    format.write(&record, &mut line, &mut Vec::new());
    let expected: Value = serde_json::from_slice(&line).expect("a record written is JSON");
    Some(match first_difference(&expected, &value, String::new()) {
        None => Ok(record),
        Some(field) => Err(RecordError::Mapping {
            format,
            record: Box::new(record),
            field,
        }),
    })
}

/// The carried record of a line that is byte for byte what chainship
/// writes for it (a copy as delivered: nearly every line), found without
/// building the whole JSON tree. Equal bytes mean every mapped field is
/// what the record maps to, and no key repeats. `None` sends the line the
/// long way (re-serialized, changed, or no profile record).
fn as_written(json: &[u8]) -> Option<Record<'static>> {
    let format = RecordFormat::ALL
        .into_iter()
        .find(|f| f.mapping().is_some() && json.starts_with(f.line_start()))?;
    let record = format.mapping()?.carried_quickly(json)?;
    let mut line = Vec::with_capacity(json.len());
    format.write(&record, &mut line, &mut Vec::new());
    (line == json).then_some(record)
}

/// Any JSON value whose objects, at every depth, name each key once.
struct NoRepeatedKeys;

impl<'de> serde::Deserialize<'de> for NoRepeatedKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::{self, MapAccess, SeqAccess, Visitor};
        struct Check;
        impl<'de> Visitor<'de> for Check {
            type Value = NoRepeatedKeys;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_str<E: de::Error>(self, _: &str) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(NoRepeatedKeys)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<NoRepeatedKeys>()?.is_some() {}
                Ok(NoRepeatedKeys)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut keys = std::collections::HashSet::new();
                while let Some(key) = map.next_key::<String>()? {
                    if !keys.insert(key.clone()) {
                        return Err(de::Error::custom(format!("the key {key:?} appears twice")));
                    }
                    map.next_value::<NoRepeatedKeys>()?;
                }
                Ok(NoRepeatedKeys)
            }
        }
        d.deserialize_any(Check)
    }
}

/// The path of the first field where `found` differs from `expected`
/// (missing, added, or another value), e.g. `api.service.name`.
fn first_difference(expected: &Value, found: &Value, path: String) -> Option<String> {
    let at = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match (expected, found) {
        (Value::Object(e), Value::Object(f)) => {
            for (key, value) in e {
                match f.get(key) {
                    Some(other) => {
                        if let Some(p) = first_difference(value, other, at(key)) {
                            return Some(p);
                        }
                    }
                    None => return Some(format!("{} (missing)", at(key))),
                }
            }
            f.keys()
                .find(|k| !e.contains_key(*k))
                .map(|k| format!("{} (not mapped)", at(k)))
        }
        (Value::Array(e), Value::Array(f)) if e.len() == f.len() => e
            .iter()
            .zip(f)
            .enumerate()
            .find_map(|(i, (a, b))| first_difference(a, b, format!("{path}[{i}]"))),
        _ if expected == found => None,
        _ => Some(if path.is_empty() { "record".to_owned() } else { path }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventRef;
    use crate::hash::event_hash;

    /// An event's step, at, type and payload.
    type Fields<'a> = (&'a [u8], &'a str, &'a [u8], &'a [u8]);

    /// A format, the field a change names, and the change.
    type Change = (RecordFormat, &'static str, fn(&mut Value));

    /// One record of each agentrt event kind the mapping reads, chained.
    fn records() -> Vec<Record<'static>> {
        let events: [Fields<'_>; 7] = [
            (b"", "2026-08-17T08:00:00Z", b"run.started", br#"{"goal":"triage"}"#),
            (
                b"s1",
                "2026-08-17T08:00:01.250Z",
                b"step.policy",
                br#"{"outcome":"deny","reason":"rule"}"#,
            ),
            (
                b"s1",
                "2026-08-17T10:00:02+02:00",
                b"step.tool_started",
                br#"{"tool":"bank_pay","args":{"to":"bob"},"approval_id":"a1","call_id":"c9"}"#,
            ),
            (
                b"s1",
                "2026-08-17T08:00:03Z",
                b"approval.decided",
                br#"{"approval_id":"a1","status":"rejected"}"#,
            ),
            (b"s1", "not a time", b"run.finished", br#"{"status":"COMPLETED"}"#),
            // Bytes JSON cannot carry travel as base64 in the carried record.
            (b"s\xff", "2026-08-17T08:00:05Z", b"step.failed", b"{\"x\":\"\xfe\"}"),
            (
                b"s2",
                "2026-08-17T08:00:06Z",
                b"custom.thing",
                br#"{ "spaced" : "caf\u00e9 \u65e5" }"#,
            ),
        ];
        let mut prev: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        for (i, (step, at, kind, payload)) in events.into_iter().enumerate() {
            let seq = i as u64 + 1;
            let hash = event_hash(&prev, seq, b"run_7f2", step, at.as_bytes(), kind, payload);
            let event = EventRef {
                seq,
                run_id: b"run_7f2",
                step_id: step,
                at: at.as_bytes(),
                kind,
                payload_json: payload,
                hash: &hash,
            };
            out.push(Record::from_event("prod/agentrt", &event, &prev).unwrap().into_owned());
            prev = hash.to_vec();
        }
        out
    }

    fn line(format: RecordFormat, record: &Record<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        format.write(record, &mut out, &mut Vec::new());
        out
    }

    #[test]
    fn every_format_reads_back_to_the_record_it_was_written_from() {
        for format in RecordFormat::ALL {
            for record in records() {
                let written = line(format, &record);
                assert!(written.starts_with(format.line_start()), "{format}");
                let back = Record::parse(&written).unwrap_or_else(|e| panic!("{format} seq {}: {e}", record.seq));
                assert_eq!(back, record, "{format}");
                assert_eq!(back.expected_hash().as_slice(), record.hash.as_bytes(), "{format}");
                assert_eq!(Record::seq_of(&written), Some(record.seq), "{format}");
            }
        }
    }

    #[test]
    fn a_re_serialized_profile_record_still_reads() {
        for format in [RecordFormat::Ocsf, RecordFormat::Ecs] {
            let record = &records()[2];
            // A pipeline that parses and pretty-prints (keys sorted, escapes
            // spelled out) changes no value.
            let value: Value = serde_json::from_slice(&line(format, record)).unwrap();
            let pretty = serde_json::to_vec_pretty(&value).unwrap();
            assert_eq!(&Record::parse(&pretty).unwrap(), record, "{format}");
        }
    }

    /// Changes one field of a profile record's JSON.
    fn altered(format: RecordFormat, record: &Record<'_>, change: impl Fn(&mut Value)) -> RecordError {
        let mut value: Value = serde_json::from_slice(&line(format, record)).unwrap();
        change(&mut value);
        Record::parse(&serde_json::to_vec(&value).unwrap()).unwrap_err()
    }

    #[test]
    fn a_changed_mapped_field_is_named_with_its_seq() {
        let record = &records()[2];
        let cases: [Change; 8] = [
            (RecordFormat::Ocsf, "api.service.name", |v| {
                v["api"]["service"]["name"] = "read_file".into()
            }),
            (RecordFormat::Ocsf, "time", |v| v["time"] = 0.into()),
            (RecordFormat::Ocsf, "metadata.sequence", |v| {
                v["metadata"]["sequence"] = 4.into()
            }),
            (RecordFormat::Ocsf, "status_id (not mapped)", |v| {
                v["status_id"] = 2.into()
            }),
            (RecordFormat::Ocsf, "actor.session (missing)", |v| {
                v["actor"].as_object_mut().unwrap().remove("session");
            }),
            (RecordFormat::Ecs, "gen_ai.tool.name", |v| {
                v["gen_ai"]["tool"]["name"] = "read_file".into()
            }),
            (RecordFormat::Ecs, "event.type[0]", |v| {
                v["event"]["type"][0] = "info".into()
            }),
            (RecordFormat::Ecs, "labels.run_id", |v| {
                v["labels"]["run_id"] = "run_other".into()
            }),
        ];
        for (format, field, change) in cases {
            let e = altered(format, record, change);
            let message = e.to_string();
            assert!(
                matches!(&e, RecordError::Mapping { field: f, .. } if f == field),
                "{format}: {message}"
            );
            assert!(message.starts_with("seq 3: "), "{message}");
            assert_eq!(e.carried().unwrap(), record);
        }
    }

    #[test]
    fn a_line_changed_in_place_is_not_taken_for_one_as_written() {
        // Same key order, one mapped value changed: the quick check by bytes
        // must send it the long way, which names the field.
        let record = &records()[2];
        for (format, from, to, field) in [
            (
                RecordFormat::Ocsf,
                r#""service":{"name":"bank_pay"}"#,
                r#""service":{"name":"bank_pax"}"#,
                "api.service.name",
            ),
            (
                RecordFormat::Ecs,
                r#""run_id":"run_7f2""#,
                r#""run_id":"run_7f3""#,
                "labels.run_id",
            ),
        ] {
            let written = String::from_utf8(line(format, record)).unwrap();
            assert!(written.contains(from), "{format}: {written}");
            let changed = written.replacen(from, to, 1);
            let e = Record::parse(changed.as_bytes()).unwrap_err();
            assert!(
                matches!(&e, RecordError::Mapping { field: f, .. } if f == field),
                "{format}: {e}"
            );
        }
    }

    #[test]
    fn a_changed_carried_record_no_longer_hashes_or_maps() {
        let record = &records()[2];
        // The carried payload changed: the mapped tool no longer matches it.
        let e = altered(RecordFormat::Ocsf, record, |v| {
            v["unmapped"]["chainship"]["payload_json"] = r#"{"tool":"bank_pay","args":{"to":"eve"}}"#.into()
        });
        assert!(e.to_string().contains("seq 3"), "{e}");
        // Changed consistently everywhere: it maps, but no longer hashes to its hash.
        let mut forged = record.clone();
        forged.payload_json = r#"{"tool":"bank_pay","args":{"to":"eve"},"approval_id":"a1","call_id":"c9"}"#.into();
        for format in [RecordFormat::Ocsf, RecordFormat::Ecs] {
            let back = Record::parse(&line(format, &forged)).unwrap().into_owned();
            assert_ne!(back.expected_hash().as_slice(), back.hash.as_bytes(), "{format}");
        }
        // ECS: an event.original that is not a record at all.
        let e = altered(RecordFormat::Ecs, record, |v| v["event"]["original"] = "hello".into());
        assert!(matches!(e, RecordError::Malformed { .. }), "{e}");
        let e = altered(RecordFormat::Ocsf, record, |v| {
            v.as_object_mut().unwrap().remove("unmapped");
        });
        assert!(matches!(e, RecordError::Malformed { .. }), "{e}");
    }

    #[test]
    fn the_mapping_says_what_each_event_did() {
        let records = records();
        let ocsf: Vec<Value> = records
            .iter()
            .map(|r| serde_json::from_slice(&line(RecordFormat::Ocsf, r)).unwrap())
            .collect();
        let ecs: Vec<Value> = records
            .iter()
            .map(|r| serde_json::from_slice(&line(RecordFormat::Ecs, r)).unwrap())
            .collect();
        // The policy denial.
        assert_eq!(ocsf[1]["status_id"], 2);
        assert_eq!(ocsf[1]["actor"]["authorizations"][0]["decision"], "deny");
        assert_eq!(ecs[1]["event"]["type"][0], "denied");
        assert_eq!(ecs[1]["event"]["outcome"], "failure");
        assert_eq!(ecs[1]["@timestamp"], "2026-08-17T08:00:01.250Z");
        assert_eq!(ocsf[1]["time"], 1_786_953_601_250i64);
        // The tool start, its offset time applied.
        assert_eq!(ocsf[2]["api"]["service"]["name"], "bank_pay");
        assert_eq!(ocsf[2]["api"]["request"]["uid"], "s1");
        assert_eq!(ocsf[2]["actor"]["authorizations"][0]["policy"]["uid"], "a1");
        assert_eq!(ocsf[2]["metadata"]["original_time"], "2026-08-17T10:00:02+02:00");
        assert_eq!(ecs[2]["@timestamp"], "2026-08-17T08:00:02.000Z");
        assert_eq!(ecs[2]["gen_ai"]["tool"]["call"]["id"], "c9");
        assert_eq!(ecs[2]["labels"]["approval_id"], "a1");
        assert_eq!(ecs[2]["event"]["type"][0], "start");
        // The rejected approval, and a time that does not parse.
        assert_eq!(ecs[3]["event"]["type"][0], "denied");
        assert_eq!(
            (ocsf[4]["time"].as_i64(), ocsf[4]["status"].as_str()),
            (Some(0), Some("Success"))
        );
        // A run's final status is its detail, not an authorization.
        assert_eq!(ocsf[4]["status_detail"], "COMPLETED");
        assert!(ocsf[4]["actor"].get("authorizations").is_none());
        assert_eq!(ecs[4]["event"]["reason"], "COMPLETED");
        // A step id that is not UTF-8 is not mapped; the record still carries it.
        assert!(ecs[5]["labels"].get("step_id").is_none());
        assert!(ocsf[5]["api"].get("request").is_none());
        assert_eq!(ocsf[5]["unmapped"]["chainship"]["b64"][0], "step_id");
        // Every record names the chain: seq, hash, origin.
        for (i, r) in records.iter().enumerate() {
            assert_eq!(ocsf[i]["metadata"]["uid"], r.hash.as_ref());
            assert_eq!(ocsf[i]["metadata"]["sequence"], r.seq);
            assert_eq!(ocsf[i]["src_endpoint"]["name"], "prod/agentrt");
            assert_eq!(ecs[i]["event"]["hash"], r.hash.as_ref());
            assert_eq!(ecs[i]["event"]["sequence"], r.seq);
            assert_eq!(ecs[i]["event"]["provider"], "prod/agentrt");
        }
    }

    #[test]
    fn a_repeated_key_at_any_depth_is_refused() {
        let record = &records()[2];
        for format in [RecordFormat::Ocsf, RecordFormat::Ecs] {
            let line = String::from_utf8(line(format, record)).unwrap();
            // A SIEM that keeps the first of two keys would see another tool
            // or time than the (last-wins) comparison.
            let planted = match format {
                RecordFormat::Ocsf => line.replacen(r#""api":{"#, r#""api":{"operation":"evil","#, 1),
                _ => line.replacen(
                    r#"{"@timestamp":"#,
                    r#"{"@timestamp":"1999-01-01T00:00:00.000Z","@timestamp":"#,
                    1,
                ),
            };
            assert_ne!(planted, line);
            let e = Record::parse(planted.as_bytes()).unwrap_err();
            assert!(matches!(e, RecordError::Malformed { .. }), "{format}: {e}");
            assert!(e.to_string().contains("appears twice"), "{e}");
        }
    }

    #[test]
    fn a_time_no_siem_can_hold_is_time_0_and_tagged_so() {
        let mut record = records()[0].clone();
        for (at, ocsf_time, ecs_time) in [
            ("2026-08-17T08:00:00Z", 1_786_953_600_000i64, "2026-08-17T08:00:00.000Z"),
            ("2026-08-17T07:59:60Z", 1_786_953_600_000, "2026-08-17T08:00:00.000Z"),
            (
                "9999-12-31T23:59:59.999Z",
                253_402_300_799_999,
                "9999-12-31T23:59:59.999Z",
            ),
            ("9999-12-31T23:59:60Z", 0, "1970-01-01T00:00:00.000Z"),
            ("0000-01-01T00:00:00+00:01", 0, "1970-01-01T00:00:00.000Z"),
            ("2026-02-30T08:00:00Z", 0, "1970-01-01T00:00:00.000Z"),
            ("yesterday", 0, "1970-01-01T00:00:00.000Z"),
        ] {
            record.at = at.into();
            let ocsf: Value = serde_json::from_slice(&line(RecordFormat::Ocsf, &record)).unwrap();
            let ecs: Value = serde_json::from_slice(&line(RecordFormat::Ecs, &record)).unwrap();
            assert_eq!(
                (ocsf["time"].as_i64(), ecs["@timestamp"].as_str()),
                (Some(ocsf_time), Some(ecs_time)),
                "{at}"
            );
            let tagged = ocsf_time == 0;
            assert_eq!(
                ocsf["metadata"]["labels"] == serde_json::json!(["at_not_rfc3339"]),
                tagged,
                "{at}"
            );
            assert_eq!(ecs["tags"] == serde_json::json!(["at_not_rfc3339"]), tagged, "{at}");
        }
    }

    #[test]
    fn an_approval_status_the_runtime_does_not_write_is_not_judged() {
        let mut record = records()[3].clone();
        for (status, outcome, ecs_type) in [
            ("approved", Some("success"), "allowed"),
            ("rejected", Some("failure"), "denied"),
            ("APPROVED", None, "info"),
            ("maybe", None, "info"),
        ] {
            record.payload_json = format!(r#"{{"approval_id":"a1","status":"{status}"}}"#).into();
            let ecs: Value = serde_json::from_slice(&line(RecordFormat::Ecs, &record)).unwrap();
            assert_eq!(ecs["event"]["outcome"].as_str(), outcome, "{status}");
            assert_eq!(ecs["event"]["type"][0], ecs_type, "{status}");
            assert_eq!(ecs["event"]["reason"], status);
        }
    }

    #[test]
    fn a_torn_profile_line_is_said_to_be_torn() {
        for format in [RecordFormat::Ocsf, RecordFormat::Ecs] {
            let whole = line(format, &records()[1]);
            let e = Record::parse(&whole[..whole.len() - 20]).unwrap_err();
            assert!(e.to_string().contains("EOF while parsing"), "{format}: {e}");
        }
        // An ECS document is known by its event.original alone, too.
        let e = Record::parse(br#"{"event":{"original":"x"}}"#).unwrap_err();
        assert!(
            matches!(
                e,
                RecordError::Malformed {
                    format: RecordFormat::Ecs,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn names_parse_and_junk_keeps_the_chainship_error() {
        for f in RecordFormat::ALL {
            assert_eq!(f.name().parse::<RecordFormat>(), Ok(f));
        }
        assert!("OCSF".parse::<RecordFormat>().is_err());
        let e = Record::parse(br#"{"origin":"o","seq":1}"#).unwrap_err();
        assert!(matches!(e, RecordError::Json(_)), "{e}");
        assert!(e.to_string().contains("missing field"), "{e}");
        assert!(matches!(Record::parse(b"not json").unwrap_err(), RecordError::Json(_)));
    }
}
