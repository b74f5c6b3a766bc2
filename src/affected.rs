//! What a finding touches: the runs with events in the invalid range, and
//! each side effect there (a tool start of a tool that is not read-only),
//! marked as needing reconciliation with the outside world. Shared by the
//! commands that report a break, a cut, a fork or a changed range.

use std::borrow::Cow;

use chainship_chain::record::Record;
use chainship_chain::{EventDb, WalkReport};
use chainship_runs::{RunEvent, Touched};
use serde_json::{Value, json};

/// A record's five hashed text fields as stored (decoded from base64 where
/// they travel so), for the run rules.
pub struct RecordEvent<'a> {
    fields: [Cow<'a, [u8]>; 5],
}

impl<'a> RecordEvent<'a> {
    /// `None` for a record whose fields cannot be decoded.
    pub fn of(r: &'a Record<'_>) -> Option<Self> {
        let [Some(a), Some(b), Some(c), Some(d), Some(e)] =
            ["run_id", "step_id", "at", "type", "payload_json"].map(|f| r.field_bytes(f))
        else {
            return None;
        };
        Some(RecordEvent {
            fields: [a, b, c, d, e],
        })
    }

    pub fn event(&self, seq: u64) -> RunEvent<'_> {
        let [run_id, step_id, at, kind, payload] = &self.fields;
        RunEvent {
            seq,
            run_id,
            step_id,
            at,
            kind,
            payload,
        }
    }
}

/// The invalid range and what it holds.
pub struct Affected {
    pub from: u64,
    pub to: u64,
    pub touched: Touched,
    /// Why the range could not be read to its end, if it could not.
    pub note: Option<String>,
}

/// The first seq the walk could not vouch for: the break or damaged row,
/// or, for a kept head the database no longer matches, the seq after the
/// last head it does match (the fork is somewhere after it).
pub fn invalid_from(report: &WalkReport) -> Option<u64> {
    let mut from: Vec<u64> = Vec::new();
    if let Some(d) = &report.damage {
        from.push(d.seq.unwrap_or(d.after + 1));
    }
    if let Some(b) = &report.chain_break {
        from.push(b.seq);
    }
    let differs = report.heads.iter().any(|(_, c)| {
        matches!(
            c,
            chainship_chain::HeadCheck::Differs { .. } | chainship_chain::HeadCheck::BeforeRange { matched: false }
        )
    });
    if differs {
        from.push(report.last_trusted_head().map_or(1, |h| h.seq + 1));
    }
    from.into_iter().min()
}

/// Reads the database's events `from..=to` into `touched`.
pub fn scan_db(db: &EventDb, from: u64, to: u64, mut touched: Touched) -> Affected {
    let note = db
        .scan(from.saturating_sub(1), to, &mut |e| {
            touched.feed(&RunEvent::from(e));
            true
        })
        .err()
        .map(|e| format!("the range could not be read to its end: {e}"));
    Affected {
        from,
        to,
        touched,
        note,
    }
}

/// The text lines for a report.
pub fn lines(a: &Affected) -> Vec<String> {
    let t = &a.touched;
    let mut out = Vec::new();
    let runs: Vec<String> = t.runs.iter().map(|(id, n)| format!("{id} ({n})")).collect();
    out.push(format!(
        "affected: seqs {} to {} ({} event(s) read), {}{} run(s){}{}",
        a.from,
        a.to,
        t.events,
        if t.runs_truncated() { "at least " } else { "" },
        t.runs.len(),
        if runs.is_empty() { "" } else { ": " },
        runs.join(", ")
    ));
    if let Some(note) = &a.note {
        out.push(format!("  note: {note}"));
    }
    if t.side_effect_count == 0 {
        out.push("side effects in the range: none (no tool start of a tool that is not read-only)".into());
    } else {
        out.push(format!(
            "needs reconciliation: {} side effect(s) in the range (tools that may have acted outside):",
            t.side_effect_count
        ));
        for s in &t.side_effects {
            out.push(format!(
                "  seq {} run {} step {} tool {}",
                s.seq, s.run_id, s.step_id, s.tool
            ));
        }
        if t.side_effect_count > t.side_effects.len() as u64 {
            out.push(format!(
                "  ... and {} more",
                t.side_effect_count - t.side_effects.len() as u64
            ));
        }
    }
    out
}

pub fn json(a: &Affected) -> Value {
    let t = &a.touched;
    json!({
        "from": a.from,
        "to": a.to,
        "events": t.events,
        "runs": t.runs.iter().map(|(id, n)| json!({"run_id": id, "events": n})).collect::<Vec<_>>(),
        "runs_truncated": t.runs_truncated(),
        "side_effect_count": t.side_effect_count,
        "side_effects": t.side_effects.iter().map(|s| json!({
            "seq": s.seq, "run_id": s.run_id, "step_id": s.step_id, "tool": s.tool,
            "needs_reconciliation": true,
        })).collect::<Vec<_>>(),
        "note": a.note,
    })
}
