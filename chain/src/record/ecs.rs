//! The ECS profile: each event as an Elastic Common Schema document
//! (`event.kind: event`, `event.category: [api]`), with the whole chainship
//! record in `event.original` as the JSON line it would be on its own, and
//! `event.sequence` / `event.hash` for the chain.
//!
//! The run, step and approval have no ECS field of their own, so they are
//! `labels`; the tool is `gen_ai.tool.name`. The mapping is a table in the
//! README; a reader checks every mapped field against `event.original`
//! ([`super::format`]).

use serde_json::Value;

use super::Record;
use super::facts::{Facts, MAPPING_VERSION, Outcome, Phase, UNREADABLE_AT, bounded, mappable};
use super::json::Object;
use super::mapping::Mapping;

pub const ECS_VERSION: &str = "9.4.0";

/// Appends `record` as an ECS document; `original` is the record's own
/// JSON line, carried as a string.
fn write(out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, original: &str) {
    let phase = match facts.phase {
        Phase::Start => "start",
        Phase::End => "end",
        Phase::Allowed => "allowed",
        Phase::Denied => "denied",
        Phase::Info => "info",
    };
    let outcome = facts.outcome.map(|o| match o {
        Outcome::Success => "success",
        Outcome::Failure => "failure",
    });
    let time = facts.time_ms.and_then(crate::time::rfc3339_millis);
    let mut o = Object::new(out);
    o.str(
        "@timestamp",
        time.as_ref().map_or("1970-01-01T00:00:00.000Z", |t| t.as_str()),
    );
    if time.is_none() {
        o.strs("tags", &[UNREADABLE_AT]);
    }
    o.object("ecs", |e| {
        e.str("version", ECS_VERSION);
    })
    .object("event", |e| {
        e.str("kind", "event")
            .strs("category", &["api"])
            .strs("type", &[phase])
            .opt_str("action", facts.kind)
            .opt_str("outcome", outcome)
            .opt_str("reason", facts.detail.as_deref())
            .num("sequence", record.seq)
            .str("hash", &record.hash)
            .opt_str("provider", bounded(&record.origin))
            .str("module", "agentrt")
            .str("dataset", "agentrt.audit")
            .str("original", original);
    })
    .object("service", |s| {
        s.str("name", "agentrt").str("type", "agent-runtime");
    })
    // The run, step and approval have no ECS field of their own.
    .object("labels", |l| {
        l.str("chainship_mapping", MAPPING_VERSION)
            .opt_str("run_id", mappable(record, "run_id"))
            .opt_str("step_id", mappable(record, "step_id").filter(|s| !s.is_empty()))
            .opt_str("approval_id", facts.approval_id.as_deref());
    });
    let (tool, call) = (facts.tool.as_deref(), facts.call_id.as_deref());
    if tool.is_some() || call.is_some() {
        o.object("gen_ai", |g| {
            g.object("tool", |t| {
                t.opt_str("name", tool);
                if let Some(id) = call {
                    t.object("call", |c| {
                        c.str("id", id);
                    });
                }
            });
        });
    }
    o.close();
}

/// Elastic Common Schema, the record's line in `event.original`.
pub struct Ecs;

impl Mapping for Ecs {
    fn line_start(&self) -> &'static [u8] {
        b"{\"@timestamp\":"
    }

    fn write(&self, out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, canonical: &[u8]) {
        let original = std::str::from_utf8(canonical).expect("a record's JSON is UTF-8");
        write(out, record, facts, original);
    }

    fn detect(&self, value: &Value) -> bool {
        value.get("ecs").is_some()
            || value.get("@timestamp").is_some()
            || value.get("event").is_some_and(|e| e.get("original").is_some())
    }

    fn carried(&self, value: &Value) -> Result<Record<'static>, crate::Error> {
        let line = value
            .get("event")
            .and_then(|e| e.get("original"))
            .and_then(Value::as_str)
            .ok_or_else(|| crate::integrity!("it has no event.original string"))?;
        Record::parse_own(line.as_bytes())
            .map(Record::into_owned)
            .map_err(|e| crate::integrity!("event.original is no record: {e}"))
    }

    fn carried_quickly(&self, json: &[u8]) -> Option<Record<'static>> {
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow)]
            event: Event<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Event<'a> {
            #[serde(borrow)]
            original: std::borrow::Cow<'a, str>,
        }
        let envelope: Envelope<'_> = serde_json::from_slice(json).ok()?;
        Some(Record::parse_own(envelope.event.original.as_bytes()).ok()?.into_owned())
    }
}
