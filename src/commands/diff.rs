//! `chainship diff`: what the database says against what the trusted copy
//! says, event by event: fields changed, events deleted or cut, events the
//! copy never had, and where the two chains fork.
//!
//! The copy is read once, in its order; the database is read alongside it
//! in pages, by seq. Memory holds one page and the first `--limit` changed
//! events in detail; everything past that is counted.

use chainship_chain::EventDb;
use chainship_evidence::diff::{self, Comparison, DiffVerdict, Ranges};
use clap::Args;
use serde_json::{Value, json};

use crate::args::{DbArgs, OutputArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult};
use crate::progress::records_spinner;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations, TrustedCopyArgs, copy};
use chainship_runs::affected;

/// Show what changed in the database against the trusted copy.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship diff --db /data/audit.db --from file:/siem/events.jsonl --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --origin prod-eu1/agentrt
  chainship diff --db audit.db --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --json

Reports: changed (which fields, the copy's and the database's values, long values
shortened with their lengths), missing from the database (deleted, or cut at the end),
in the database only (seqs the copy lacks inside its range), the fork point (the first
seq whose stored hash differs), and the events beyond the copy's end (not yet exported,
or added after a rollback; shown, not a difference). The copy is checked as
verify-export checks it; its own findings are shown too.
Exit codes: 0 the same, 1 different (or the copy is damaged or untrusted), 2 usage or setup error.")]
#[command(mut_arg("db", |a| a.required(true)))]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.help(
    "Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise)"
)))]
pub struct DiffArgs {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(flatten)]
    pub copy: TrustedCopyArgs,
    /// Show at most this many changed events in detail (the rest are counted).
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: usize,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &DiffArgs) -> CmdResult {
    let options = args.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    let db = EventDb::open(args.db.path()?, &options)?;
    let head = db.head()?.map_or(0, |(seq, _)| seq);
    let mut cmp = Comparison::new(db, head, args.limit, args.rules.touched()?)?;
    let bar = records_spinner("comparing", args.output.json);
    // The statements are read once: the database's chain takes them before the copy is read.
    let outcome = trusted_copy::with_input(
        &args.copy,
        |o| o,
        |input| {
            let loaded = copy::load_redactions(input)?;
            cmp.set_redactions(loaded.shared());
            copy::read_checked_with(input, CopyExpectations::default(), loaded, &mut |record| {
                cmp.feed(record);
                bar.inc(1);
            })
        },
    )?;
    bar.finish_and_clear();
    let verdict = diff::verdict(outcome, cmp);
    if args.output.json {
        outln!("{}", to_json(args, &verdict, head));
    } else {
        print_text(args, &verdict, head);
    }
    Ok(crate::exit::of(&verdict))
}

/// Why the database lacks a range: cut when it ends before it.
fn missing_why(start: u64, head: u64) -> &'static str {
    if start > head { "cut" } else { "deleted" }
}

fn range_text(a: u64, b: u64) -> String {
    if a == b {
        format!("seq {a}")
    } else {
        format!("seqs {a} to {b} ({} events)", b - a + 1)
    }
}

fn print_text(args: &DiffArgs, v: &DiffVerdict, head: u64) {
    let c = &v.covered.comparison;
    outln!("{}", trusted_copy::summary(&args.copy.source, &v.covered.copy));
    for w in &v.warnings {
        outln!("warning: {w}");
    }
    // The copy's own findings; the differences are shown in detail below.
    for f in &v.findings[..v.covered.copy_findings] {
        outln!("the copy: {}", report::finding_text(f));
    }
    let trusted = v.covered.copy_trusted.map_or(0, |h| h.seq);
    if let Some((seq, copy, database)) = &c.fork {
        outln!("fork at seq {seq}: from here the database's chain is not the copy's");
        outln!("  copy:     {copy}\n  database: {database}");
    }
    for ch in &c.changed {
        let names: Vec<&str> = ch.fields.iter().map(|f| f.field).collect();
        let untrusted = if ch.seq > trusted {
            " [past the last trusted head]"
        } else {
            ""
        };
        outln!(
            "changed at seq {} (run {}): {}{untrusted}",
            ch.seq,
            ch.run_id,
            names.join(", ")
        );
        for f in &ch.fields {
            let (copy, database) = f.shown();
            outln!("  {:<12} copy:     {copy}", f.field);
            outln!("  {:<12} database: {database}", "");
        }
    }
    if c.changed_count > c.changed.len() as u64 {
        outln!(
            "... and {} more changed event(s) (--limit shows more)",
            c.changed_count - c.changed.len() as u64
        );
    }
    for &(a, b) in &c.missing.list {
        let why = match missing_why(a, head) {
            // Records no trusted head vouches for prove nothing was cut.
            _ if a > trusted => {
                format!("after the last trusted head, seq {trusted}: no head vouches for them, so they show no cut")
            }
            "cut" => format!("cut: the database ends at seq {head}"),
            _ => "deleted".to_owned(),
        };
        outln!("missing from the database: {} ({why})", range_text(a, b));
    }
    for &(a, b) in &c.database_only.list {
        outln!("in the database only: {} (the copy lacks them)", range_text(a, b));
    }
    if c.missing.more || c.database_only.more {
        outln!("... more ranges than shown (see the counts)");
    }
    if let Some(value) = &c.unreachable {
        outln!(
            "in the database only: {}",
            chainship_chain::check::unreachable_reason(value)
        );
    }
    if let Some(b) = &c.db.broken {
        outln!("the database's own chain breaks at seq {}: {}", b.seq, b.reason());
    }
    if let Some(e) = &c.db.unreadable {
        outln!(
            "the database could not be read on: {e} ({} copy record(s) not compared)",
            c.not_compared
        );
    }
    if let Some(&(a, _)) = c.beyond.list.first() {
        outln!(
            "beyond the copy: {} (not yet exported, or added after a rollback)",
            range_text(a, head)
        );
    }
    for line in v.touched.iter().flat_map(affected::lines) {
        outln!("{line}");
    }
    outln!(
        "compared: {} the same, {} changed, {} missing from the database, {} in the database only, {} beyond the copy",
        c.same,
        c.changed_count,
        c.missing.count,
        c.database_only.count,
        c.beyond.count
    );
    if v.passed() {
        outln!("ok: the database holds the trusted copy's events unchanged");
    }
    match v.last_trusted {
        Some(h) => outln!("last trusted head: seq {} {}", h.seq, h.hash_str()),
        None => outln!("last trusted head: none"),
    }
}

/// The copy's own verdict, inside the diff's: its findings only.
fn copy_json(args: &DiffArgs, v: &DiffVerdict) -> Value {
    let mut doc = trusted_copy::verdict_json(&args.copy.source, v, &v.covered.copy);
    let own = &v.findings[..v.covered.copy_findings];
    doc["status"] = (if own.is_empty() { "ok" } else { "failed" }).into();
    doc["last_trusted_head"] = json!(
        v.covered
            .copy_trusted
            .map(|h| json!({"seq": h.seq, "hash": h.hash_str()}))
    );
    doc["findings"] = own.iter().map(crate::report::finding_json).collect();
    // The runs the differences touch are the diff's, said once at the top.
    doc.as_object_mut().map(|o| o.remove("affected"));
    doc["invalid_ranges"] = v
        .covered
        .copy_ranges
        .as_ref()
        .map_or(Value::Null, |rs| rs.iter().map(affected::range_json).collect());
    doc
}

fn to_json(args: &DiffArgs, v: &DiffVerdict, head: u64) -> Value {
    let (c, trusted) = (&v.covered.comparison, v.covered.copy_trusted.map_or(0, |h| h.seq));
    let changed: Vec<Value> = c
        .changed
        .iter()
        .map(|ch| {
            json!({
                "seq": ch.seq,
                "run_id": ch.run_id,
                "trusted": ch.seq <= trusted,
                "fields": ch.fields.iter().map(|f| json!({
                    "field": f.field,
                    "copy": f.windows().0,
                    "database": f.windows().1,
                    "copy_bytes": f.copy.len(),
                    "database_bytes": f.database.len(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let ranges = |r: &Ranges, why: &dyn Fn(u64) -> Option<&'static str>| -> Vec<Value> {
        r.list
            .iter()
            .map(|&(a, b)| {
                let mut v = json!({"from": a, "to": b, "count": b - a + 1});
                if let Some(w) = why(a) {
                    v["why"] = w.into();
                }
                v
            })
            .collect()
    };
    let mut doc = json!({
        "status": if v.passed() { "same" } else { "different" },
        "copy": copy_json(args, v),
        // The verdict's findings: the copy's own, then the differences.
        "findings": v.findings.iter().map(crate::report::finding_json).collect::<Vec<_>>(),
        "invalid_ranges": v.ranges.as_ref().map(|rs| rs.iter().map(affected::range_json).collect::<Vec<_>>()),
        "database": {"path": args.db.db.as_ref().map(|p| p.display().to_string()), "head_seq": head},
        "counts": {
            "same": c.same,
            "changed": c.changed_count,
            "missing": c.missing.count,
            "database_only": c.database_only.count,
            "beyond_copy": c.beyond.count,
        },
        "changed": changed,
        "changed_shown": c.changed.len(),
        "missing": ranges(&c.missing, &|a| {
            Some(if a > trusted { "unvouched" } else { missing_why(a, head) })
        }),
        "database_only": ranges(&c.database_only, &|_| None),
        "beyond_copy": c.beyond.list.first().map(|&(a, _)| json!({"from": a, "to": head, "count": c.beyond.count})),
        "fork": c.fork.as_ref().map(|(seq, copy, database)| json!({"seq": seq, "copy_hash": copy, "database_hash": database})),
        "unreachable_row": c.unreachable.as_ref().map(|v| chainship_chain::check::unreachable_reason(v)),
        "database_break": c.db.broken.as_ref().map(|b| json!({"seq": b.seq, "reason": b.reason()})),
        "database_unreadable": c.db.unreadable.as_ref().map(|e| json!({"error": e, "copy_records_not_compared": c.not_compared})),
        "last_trusted_head": v.last_trusted.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
        "affected": v.touched.as_ref().map(affected::json),
    });
    if c.missing.more || c.database_only.more {
        doc["ranges_truncated"] = true.into();
    }
    doc
}
