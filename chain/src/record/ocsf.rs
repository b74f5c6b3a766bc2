//! The OCSF profile: each event as an OCSF 1.1.0 "API Activity" (class
//! 6003, category 6 "Application Activity"), the schema version Amazon
//! Security Lake reads, carrying the whole chainship record in
//! `unmapped.chainship` (an object: `raw_data` is capped at 65,535
//! characters, a payload is not).
//!
//! agentrt's events are no create/read/update/delete, so the activity is
//! 99 "Other" and `activity_name` is the event type. The mapping is a table
//! in the README; a reader checks every mapped field against the carried
//! record ([`super::format`]).

use serde_json::Value;

use super::Record;
use super::facts::{Facts, MAPPING_VERSION, Outcome, UNREADABLE_AT, bounded, mappable};
use super::json::Object;
use super::mapping::Mapping;

pub const OCSF_VERSION: &str = "1.1.0";
const CLASS_UID: u32 = 6003;
const CATEGORY_UID: u32 = 6;
const ACTIVITY_OTHER: u32 = 99;

/// Appends `record` as an OCSF API Activity; `canonical` is the record's
/// own JSON (written once, carried as it is).
fn write(out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, canonical: &[u8]) {
    let run = mappable(record, "run_id");
    let step = mappable(record, "step_id").filter(|s| !s.is_empty());
    let origin = bounded(&record.origin);
    let detail = facts.detail.as_deref();
    let decision = detail.filter(|_| facts.is_decision);
    let approval = facts.approval_id.as_deref();
    let mut o = Object::new(out);
    o.num("activity_id", ACTIVITY_OTHER)
        .opt_str("activity_name", facts.kind)
        .num("category_uid", CATEGORY_UID)
        .str("category_name", "Application Activity")
        .num("class_uid", CLASS_UID)
        .str("class_name", "API Activity")
        .num("type_uid", CLASS_UID * 100 + ACTIVITY_OTHER)
        .str("type_name", "API Activity: Other")
        .num("severity_id", 1u32)
        .str("severity", "Informational")
        .num("time", facts.time_ms.unwrap_or(0));
    match facts.outcome {
        Some(Outcome::Success) => o.num("status_id", 1u32).str("status", "Success"),
        Some(Outcome::Failure) => o.num("status_id", 2u32).str("status", "Failure"),
        None => &mut o,
    }
    .opt_str("status_detail", detail);
    o.object("metadata", |m| {
        m.str("version", OCSF_VERSION)
            .object("product", |p| {
                p.str("name", "agentrt").str("vendor_name", "agentrt");
            })
            .str("log_provider", "chainship")
            .str("log_version", MAPPING_VERSION)
            .opt_str("log_name", origin)
            .str("uid", &record.hash)
            .num("sequence", record.seq)
            .opt_str("correlation_uid", run)
            .opt_str("original_time", mappable(record, "at"));
        if facts.time_ms.is_none() {
            m.strs("labels", &[UNREADABLE_AT]);
        }
    });
    // The run is the session the agent acts in (always there: the schema
    // needs an actor); a policy outcome or approval is its authorization.
    o.object("actor", |a| {
        a.object("session", |s| {
            s.str("uid", run.unwrap_or(""));
        });
        if decision.is_some() || approval.is_some() {
            a.one_object_array("authorizations", |auth| {
                auth.opt_str("decision", decision);
                if let Some(uid) = approval {
                    auth.object("policy", |p| {
                        p.str("uid", uid);
                    });
                }
            });
        }
    });
    o.object("api", |a| {
        a.str("operation", facts.kind.unwrap_or(""));
        if let Some(tool) = facts.tool.as_deref() {
            a.object("service", |s| {
                s.str("name", tool);
            });
        }
        if let Some(step) = step {
            a.object("request", |r| {
                r.str("uid", step);
            });
        }
    });
    o.object("src_endpoint", |e| {
        e.str("name", origin.unwrap_or(""));
    })
    .object("unmapped", |u| {
        u.raw("chainship", canonical);
    });
    o.close();
}

/// OCSF 1.1.0 API Activity (6003), the record in `unmapped.chainship`.
pub struct Ocsf;

impl Mapping for Ocsf {
    fn line_start(&self) -> &'static [u8] {
        b"{\"activity_id\":"
    }

    fn write(&self, out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, canonical: &[u8]) {
        write(out, record, facts, canonical);
    }

    fn detect(&self, value: &Value) -> bool {
        value.get("class_uid").is_some()
    }

    fn carried(&self, value: &Value) -> Result<Record<'static>, crate::Error> {
        let carried = value
            .get("unmapped")
            .and_then(|u| u.get("chainship"))
            .ok_or_else(|| crate::integrity!("it has no unmapped.chainship"))?;
        Record::from_value(carried).map_err(|e| crate::integrity!("unmapped.chainship is no record: {e}"))
    }

    fn carried_quickly(&self, json: &[u8]) -> Option<Record<'static>> {
        #[derive(serde::Deserialize)]
        struct Envelope<'a> {
            #[serde(borrow)]
            unmapped: Unmapped<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Unmapped<'a> {
            #[serde(borrow)]
            chainship: &'a serde_json::value::RawValue,
        }
        let envelope: Envelope<'_> = serde_json::from_slice(json).ok()?;
        Some(
            Record::parse_own(envelope.unmapped.chainship.get().as_bytes())
                .ok()?
                .into_owned(),
        )
    }
}
