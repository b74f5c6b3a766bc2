//! `run.json`: the run's timeline and the run check's verdict, for
//! programs (shape `chainship-run/v1`, documented in the book's "Evidence
//! bundles" page). Written from [`EvidenceReport`]; never read back by the
//! checker.

use serde_json::{Value, json};

use chainship_runs::Role;

use super::check::EvidenceReport;

/// The shape's name and version, its `format` member.
pub const FORMAT: &str = "chainship-run/v1";

/// What part an event plays, in a word a reader knows.
pub fn role_label(role: Role) -> &'static str {
    match role {
        Role::RunCreated | Role::RunStarted | Role::RunFinished | Role::RunResumed | Role::RunInterrupted => "run",
        Role::LeaseTakenOver => "lease",
        Role::StepStarted | Role::StepFailed | Role::StepInterrupted => "step",
        Role::StepDecided | Role::StepPolicy => "decision",
        Role::ToolStarted | Role::ToolFinished => "tool",
        Role::ApprovalRequested | Role::ApprovalDecided => "approval",
        Role::LimitExceeded | Role::LoopDetected => "limit",
        Role::ModelDispatched | Role::ModelCompleted | Role::ModelFailed => "model",
        Role::Other => "other",
    }
}

pub fn render(r: &EvidenceReport) -> Value {
    let cp = &r.checkpoint;
    let reconcile: Vec<u64> = r.to_reconcile().map(|f| f.seq).collect();
    json!({
        "format": FORMAT,
        "run_id": r.run_id,
        "origin": cp.origin,
        "checkpoint": {
            "size": cp.size,
            "root": cp.root_b64,
            "signers": cp.signers,
            "witnesses": cp.witnesses,
        },
        "head": {"seq": r.head.seq, "hash": r.head.hash, "published": r.head.published},
        "as_of": {"seq": r.newest.0, "at": r.newest.1},
        "rules": {
            "profile": r.profile.name,
            "open_after": humantime::format_duration(r.rules.open_after).to_string(),
            "read_only_tools": r.rules.read_only_tools,
        },
        "summary": r.summary.as_ref().map(|s| json!({
            "status": s.status.as_str(),
            "first_seq": s.first_seq,
            "last_seq": s.last_seq,
            "events": s.events,
            "tool_calls": s.tool_calls,
            "side_effects": s.side_effects,
        })),
        "timeline": r.timeline.iter().map(|e| {
            let mut event = json!({
                "seq": e.seq,
                "at": e.at,
                "type": e.kind,
                "role": role_label(e.role),
                "step_id": e.step_id,
                "proven": e.proven,
                "reconcile": reconcile.contains(&e.seq),
            });
            for (k, v) in &e.details {
                event[*k] = json!(v);
            }
            event
        }).collect::<Vec<_>>(),
        "findings": r.findings.iter().map(|f| json!({
            "kind": f.kind.as_str(),
            "seq": f.seq,
            "step_id": f.step_id,
            "tool": f.tool,
            "message": f.message,
            "reconcile": reconcile.contains(&f.seq),
        })).collect::<Vec<_>>(),
        "proven": {
            "records": r.records.len(),
            "all": r.all_proven(),
            "not_proven": r.not_proven().iter().map(|(seq, p)| json!({
                "seq": seq, "kind": p.kind.map(|k| k.as_str()), "reason": p.reason,
            })).collect::<Vec<_>>(),
        },
        "gaps": r.gaps.as_ref().map(|g| json!({"first": g.first, "last": g.last, "hashes": g.hashes})),
        "content_redacted": r.content_redacted.iter().map(|f| f.to_string()).collect::<Vec<_>>(),
        "redacted": r.redacted.iter().map(|x| json!({"seq": x.seq, "statement": x.statement, "key": x.key, "reason": x.reason})).collect::<Vec<_>>(),
        "verdict": if !r.all_proven() { "not proven" } else if r.findings.is_empty() { "ok" } else { "findings" },
    })
}
