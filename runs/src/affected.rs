//! What a finding touches: the runs with events in the invalid range, and
//! each side effect there (a tool start of a tool that is not read-only),
//! marked as needing reconciliation with the outside world. Shared by the
//! commands that report a break, a cut, a fork or a changed range.

use std::borrow::Cow;

use crate::{RunEvent, Touched};
use chainship_chain::record::Record;
use chainship_chain::{DbError, EventDb, InvalidRange};
use serde_json::{Value, json};

/// A record's five hashed text fields as stored (decoded from base64 where
/// they travel so), for the run rules.
pub struct RecordEvent<'a> {
    fields: [Cow<'a, [u8]>; 5],
    redacted: bool,
}

impl<'a> RecordEvent<'a> {
    /// `None` for a record whose fields cannot be decoded.
    pub fn of(r: &'a Record<'_>) -> Option<Self> {
        let [Some(a), Some(b), Some(c), Some(d), Some(e)] =
            ["run_id", "step_id", "at", "type", "payload_json"].map(|f| r.field_bytes(f))
        else {
            return None;
        };
        // A tombstone's payload is withheld: whatever a record naming itself one holds there is never read.
        let e = if r.is_tombstone() { Cow::Borrowed(&b""[..]) } else { e };
        Some(RecordEvent {
            fields: [a, b, c, d, e],
            redacted: r.is_tombstone(),
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
            redacted: self.redacted,
        }
    }
}

/// The invalid range and what it holds.
#[derive(Debug)]
pub struct Affected {
    pub from: u64,
    pub to: u64,
    /// The exact ranges read, when known (else `from..=to` whole).
    pub ranges: Vec<(u64, u64)>,
    pub touched: Touched,
    /// Why the range could not be read to its end, if it could not.
    pub note: Option<String>,
}

/// Reads the database's events `from..=to` into `touched`.
pub fn scan_db(db: &EventDb, from: u64, to: u64, mut touched: Touched) -> Affected {
    let (mut after, mut note) = (from.saturating_sub(1), None);
    // A damaged row is passed over (its own finding names it): the rows
    // past it are still the range's.
    while let Err(e) = db.scan(after, to, &mut |e| {
        touched.feed(&RunEvent::from(e));
        true
    }) {
        match e {
            DbError::BadField { seq, .. } if seq > after && seq < to => {
                note = Some(format!("seq {seq} could not be read (a damaged row): passed over"));
                after = seq;
            }
            e => {
                note = Some(format!("the range could not be read to its end: {e}"));
                break;
            }
        }
    }
    Affected {
        from,
        to,
        ranges: Vec::new(),
        touched,
        note,
    }
}

/// Reads the database's events from `from` to its head into `touched`.
pub fn scan_to_head(db: &EventDb, from: u64, touched: Touched) -> Affected {
    // A head that cannot be read is the walk's to report: scan to `from`.
    let to = db.head().ok().flatten().map_or(from, |(s, _)| s);
    scan_db(db, from, to, touched)
}

/// Reads the database's events in each of `ranges` (the exact invalid
/// ranges) into `touched`: only the runs and side effects they hold.
pub fn scan_ranges(db: &EventDb, ranges: &[InvalidRange], mut touched: Touched) -> Affected {
    let mut seqs: Vec<(u64, u64)> = ranges.iter().map(|r| (r.from, r.to)).collect();
    seqs.sort_unstable();
    let seqs = merge(seqs);
    let mut note = None;
    for &(from, to) in &seqs {
        let read = db.scan(from.saturating_sub(1), to, &mut |e| {
            touched.feed(&RunEvent::from(e));
            true
        });
        if let Err(e) = read {
            note = Some(format!("seqs {from}..{to} could not be read to their end: {e}"));
            break;
        }
    }
    Affected {
        from: seqs.first().map_or(0, |r| r.0),
        to: seqs.last().map_or(0, |r| r.1),
        ranges: seqs,
        touched,
        note,
    }
}

/// Sorted `(from, to)` ranges with those that touch or overlap made one
/// (how every verifier names the seqs it reads for the runs they touch).
pub fn merge(sorted: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(sorted.len());
    for (a, b) in sorted {
        match merged.last_mut() {
            Some((_, end)) if a <= end.saturating_add(1) => *end = (*end).max(b),
            _ => merged.push((a, b)),
        }
    }
    merged
}

/// One exact range as JSON.
pub fn range_json(r: &InvalidRange) -> Value {
    json!({
        "kind": r.kind.as_str(),
        "from": r.from,
        "to": r.to,
        "events": r.to - r.from + 1,
        "trusted_again_from": r.anchored_by.map(|_| r.to + 1),
        "vouched_again_by": r.anchored_by,
        "open_ended": r.open,
    })
}

/// Runs and side effects listed in text (`--json` has them all).
const SHOWN: usize = 5;

/// The text lines for a report: counts and the first few of each.
pub fn lines(a: &Affected) -> Vec<String> {
    let t = &a.touched;
    let mut out = Vec::new();
    let shown: Vec<String> = t.runs.iter().take(SHOWN).map(|(id, n)| format!("{id} ({n})")).collect();
    let more = t.runs.len().saturating_sub(SHOWN);
    let where_ = if a.ranges.is_empty() {
        format!("seqs {} to {}", a.from, a.to)
    } else {
        let listed: Vec<String> = a
            .ranges
            .iter()
            .take(SHOWN)
            .map(|(f, t)| if f == t { f.to_string() } else { format!("{f}..{t}") })
            .collect();
        let more = a.ranges.len().saturating_sub(SHOWN);
        format!(
            "seq(s) {}{}",
            listed.join(", "),
            if more > 0 {
                format!(" and {more} more range(s)")
            } else {
                String::new()
            }
        )
    };
    out.push(format!(
        "affected: {where_} ({} event(s) read), {}{} run(s){}{}{}",
        t.events,
        if t.runs_truncated() { "at least " } else { "" },
        t.runs.len(),
        if shown.is_empty() { "" } else { ": " },
        shown.join(", "),
        if more > 0 {
            format!(" and {more} more (the JSON output lists them)")
        } else {
            String::new()
        }
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
        for s in t.side_effects.iter().take(SHOWN) {
            out.push(format!(
                "  seq {} run {} step {} tool {}",
                s.seq, s.run_id, s.step_id, s.tool
            ));
        }
        if t.side_effect_count > SHOWN as u64 {
            out.push(format!(
                "  ... and {} more (the JSON output lists them)",
                t.side_effect_count - SHOWN as u64
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
        "ranges": a.ranges.iter().map(|(f, t)| json!({"from": f, "to": t})).collect::<Vec<_>>(),
        "note": a.note,
    })
}
