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

use super::Record;
use super::facts::{Facts, MAPPING_VERSION, Outcome, UNREADABLE_AT, bounded, mappable};
use super::json::Object;

pub const OCSF_VERSION: &str = "1.1.0";
const CLASS_UID: u32 = 6003;
const CATEGORY_UID: u32 = 6;
const ACTIVITY_OTHER: u32 = 99;

/// Appends `record` as an OCSF API Activity; `canonical` is the record's
/// own JSON (written once, carried as it is).
pub fn write(out: &mut Vec<u8>, record: &Record<'_>, facts: &Facts<'_>, canonical: &[u8]) {
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

/// Whether a parsed JSON object is an OCSF record (of any class: one of
/// another class is then found not to be ours by the comparison).
pub fn detect(value: &serde_json::Value) -> bool {
    value.get("class_uid").is_some()
}

/// The chainship record a parsed OCSF record carries.
pub fn carried(value: &serde_json::Value) -> Option<&serde_json::Value> {
    value.get("unmapped")?.get("chainship")
}
