//! `chainship restore`: rebuild the audit database from the exported copy,
//! checked against the signed heads, up to the last trusted head.

use std::path::PathBuf;

use chainship_anchor::AnchorUrl;
use chainship_evidence::restore::{self, RestoreVerdict, Restored};
use clap::Args;
use serde_json::json;

use crate::args::{OutputArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult};
use crate::progress::records_spinner;
use crate::report;
use crate::trusted_copy::{self, TrustedCopyArgs};

/// Rebuild the events database from the exported copy, checked against the kept heads.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship restore --from file:/siem/events.jsonl --anchor file:/mnt/anchors --trusted-key keys.txt \\
      --origin prod-eu1/agentrt --out restored.db
  chainship restore --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --out restored-s3.db --to 120000
  chainship restore --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --out restored-kafka.db --include-unanchored --json

The copy is checked as verify-export checks it; any finding (gap, altered, foreign,
reordered, fork, cut, no trusted head...) stops the restore and nothing is left at --out.
The new database has agentrt's events table (same columns, AUTOINCREMENT, sqlite_sequence
set), every field and hash byte-identical, and is walked again before it is put in place.
It is built as .NAME.partial-PID beside --out and takes the name only when complete.
Exit codes: 0 restored, 1 the copy is damaged or untrusted, 2 usage or an unreadable source.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.help(
    "Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise)"
)))]
pub struct RestoreArgs {
    #[command(flatten)]
    pub copy: TrustedCopyArgs,
    /// The database to write (refused if it exists).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// Stop at this seq (the copy is still checked to the head that covers it).
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub to: Option<u64>,
    /// Also write the checked records after the last trusted head (their
    /// chain is intact, but no signed head covers them yet).
    #[arg(long)]
    pub include_unanchored: bool,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &RestoreArgs) -> CmdResult {
    // The restored database is never written where evidence lives.
    if let Some(AnchorUrl::File(dir)) = &args.copy.anchor.anchor {
        restore::refuse_inside_store(&args.out, dir).map_err(|e| CliError::from_kind(&e))?;
    }
    let bar = records_spinner("restoring", args.output.json);
    let touched = args.rules.touched()?;
    let verdict = trusted_copy::with_input(&args.copy, restore::refused, |input| {
        restore::restore(input, &args.out, args.to, args.include_unanchored, touched, &mut || {
            bar.inc(1)
        })
    })?;
    bar.finish_and_clear();
    match &verdict.covered.restored {
        Some(restored) => print(args, &verdict, restored),
        None => refuse(args, &verdict),
    }
    Ok(crate::exit::of(&verdict))
}

/// The copy's verdict with what the restore covered, as JSON.
fn json(args: &RestoreArgs, v: &RestoreVerdict, status: &str) -> serde_json::Value {
    let mut doc = trusted_copy::verdict_json(&args.copy.source, v, &v.covered.copy);
    doc["status"] = status.into();
    doc
}

/// The copy cannot be trusted: say why, and that nothing was written.
fn refuse(args: &RestoreArgs, v: &RestoreVerdict) {
    let nothing = format!("restore refused: nothing was written to {}", args.out.display());
    if args.output.json {
        let mut doc = json(args, v, "refused");
        doc["message"] = nothing.into();
        outln!("{doc}");
    } else {
        outln!("{}", trusted_copy::summary(&args.copy.source, &v.covered.copy));
        for w in &v.warnings {
            outln!("warning: {w}");
        }
        for f in &v.findings {
            outln!("{}", report::finding_text(f));
        }
        for line in v.touched.iter().flat_map(chainship_runs::affected::lines) {
            outln!("{line}");
        }
        outln!("{nothing}");
    }
}

fn print(args: &RestoreArgs, v: &RestoreVerdict, r: &Restored) {
    let head = r.last_trusted;
    if args.output.json {
        let mut doc = json(args, v, "restored");
        doc["out"] = args.out.display().to_string().into();
        doc["events"] = r.end.into();
        doc["restored_end_seq"] = r.end.into();
        doc["unanchored_written"] = r.unanchored_written.into();
        doc["unanchored_not_written"] = r.unanchored_left.into();
        doc["placeholders"] = r.placeholders.clone().into();
        doc["last_trusted_head"] = json!({"seq": head.seq, "hash": head.hash_str()});
        outln!("{doc}");
        return;
    }
    outln!("{}", trusted_copy::summary(&args.copy.source, &v.covered.copy));
    for w in &v.warnings {
        outln!("warning: {w}");
    }
    outln!(
        "restored: seq 1 to {} ({} events) to {}",
        r.end,
        r.end,
        args.out.display()
    );
    for line in report::redacted_lines(v) {
        outln!("{line}");
    }
    if !r.placeholders.is_empty() {
        outln!(
            "placeholders: seq(s) {} were written with a placeholder payload naming their redaction statement (verify the restored database with --redaction-key)",
            r.placeholders.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        );
    }
    if r.unanchored_written > 0 {
        outln!(
            "unanchored: seqs {} to {} were written: their chain is intact, but no signed head covers them yet",
            head.seq.saturating_add(1),
            r.end
        );
    }
    if r.unanchored_left > 0 {
        outln!(
            "not written: {} checked record(s) after the last trusted head (--include-unanchored writes them)",
            r.unanchored_left
        );
    }
    if let Some(to) = args.to.filter(|&to| to > r.end) {
        let why = if r.end == head.seq && !args.include_unanchored {
            " (the last trusted head; --include-unanchored writes the checked records after it)"
        } else {
            " (the copy's end)"
        };
        outln!(
            "note: --to {to} is past what could be restored; the restore ends at seq {}{why}",
            r.end
        );
    }
    outln!("last trusted head: seq {} {}", head.seq, head.hash_str());
}
