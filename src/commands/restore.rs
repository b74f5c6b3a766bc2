//! `chainship restore`: rebuild the audit database from the exported copy,
//! checked against the signed heads, up to the last trusted head.

use std::path::{Path, PathBuf};

use chainship_anchor::{Finding, Kind};
use chainship_chain::{EventDb, Head, OpenOptions, WalkPlan, walk_chain};
use clap::Args;
use serde_json::json;

use crate::args::OutputArgs;
use crate::exit::{CliError, CmdResult, OK, verdict};
use crate::new_database::NewDatabase;
use crate::progress::records_spinner;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations, CopyOutcome, TrustedCopyArgs};

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
    #[arg(long, value_name = "SEQ", value_parser = clap::value_parser!(u64).range(1..))]
    pub to: Option<u64>,
    /// Also write the checked records after the last trusted head (their
    /// chain is intact, but no signed head covers them yet).
    #[arg(long)]
    pub include_unanchored: bool,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// What was restored.
struct Restored {
    /// The last seq written (events 1 to it).
    end: u64,
    last_trusted: Head,
    /// Checked records after the last trusted head that were written.
    unanchored_written: u64,
    /// Checked records after the last trusted head that were not.
    unanchored_left: u64,
}

pub fn run(args: &RestoreArgs) -> CmdResult {
    refuse_out_in_evidence(args)?;
    let mut db = NewDatabase::create(&args.out)?;
    let bar = records_spinner("restoring", args.output.json);
    let mut write_error: Option<CliError> = None;
    let outcome = trusted_copy::read_checked(&args.copy, CopyExpectations::default(), &mut |record| {
        // Only the next seq is written: duplicates, late and out-of-order
        // records are the check's to name, and a gap stops the writing.
        if write_error.is_some() || record.seq != db.last() + 1 || args.to.is_some_and(|to| record.seq > to) {
            return;
        }
        // A record whose fields cannot be decoded is the check's to name (as
        // altered, with its place in the copy); it is never written.
        if crate::affected::RecordEvent::of(record).is_none() {
            return;
        }
        if let Err(e) = db.insert(record) {
            write_error = Some(e);
        }
        bar.inc(1);
    })?;
    bar.finish_and_clear();
    if let Some(e) = write_error {
        return Err(e);
    }
    let trusted = match (outcome.findings.is_empty(), outcome.last_trusted) {
        (true, Some(head)) => head,
        _ => return Ok(refuse(args, &outcome)),
    };
    let copy_end = outcome.end_seq.unwrap_or(0);
    let limit = args.to.unwrap_or(u64::MAX);
    let end = if args.include_unanchored {
        db.last().min(limit)
    } else {
        trusted.seq.min(limit)
    };
    db.complete(end)?;
    recheck(&db, end, trusted)?;
    db.place()?;
    let restored = Restored {
        end,
        last_trusted: trusted,
        unanchored_written: end.saturating_sub(trusted.seq),
        // Left out by choice with --to: not counted as left behind.
        unanchored_left: if args.to.is_none() {
            copy_end.saturating_sub(end.max(trusted.seq))
        } else {
            0
        },
    };
    print(args, &outcome, &restored);
    Ok(OK)
}

/// Walks the finished file once more, as `verify --head` would: what is
/// put in place is what was checked, read back from disk.
fn recheck(db: &NewDatabase, end: u64, trusted: Head) -> Result<(), CliError> {
    let failed = |why: String| CliError::failed(format!("{}: the restored database {why}", db.temp_path().display()));
    let opened = EventDb::open(db.temp_path(), &OpenOptions::default()).map_err(|e| failed(e.to_string()))?;
    let plan = WalkPlan {
        from: 1,
        to: Some(end),
        heads: (trusted.seq <= end).then_some(trusted).into_iter().collect(),
        roots_at: Vec::new(),
        ..WalkPlan::default()
    };
    let report = walk_chain(opened, &plan, &mut |_| {}).map_err(|e| failed(e.to_string()))?;
    if !report.ok() || report.checked != end {
        return Err(failed(format!(
            "does not walk clean to seq {end} (checked {}): nothing was put at the final name",
            report.checked
        )));
    }
    Ok(())
}

/// The copy cannot be trusted: say why, and that nothing was written.
fn refuse(args: &RestoreArgs, o: &CopyOutcome) -> u8 {
    let mut findings = o.findings.clone();
    if findings.is_empty() {
        // No finding and no trusted head cannot happen; never restore on it.
        findings.push(Finding {
            kind: Kind::NoTrustedHead,
            seq: None,
            message: "no trusted head covers the copy".into(),
            expected: None,
            found: None,
            source: None,
        });
    }
    let nothing = format!("restore refused: nothing was written to {}", args.out.display());
    if args.output.json {
        let mut doc = trusted_copy::json_fields(&args.copy.source, o);
        doc["status"] = "refused".into();
        doc["findings"] = findings.iter().map(report::finding_json).collect();
        doc["message"] = nothing.into();
        outln!("{doc}");
    } else {
        outln!("{}", trusted_copy::summary(&args.copy.source, o));
        for w in &o.warnings {
            outln!("warning: {w}");
        }
        for f in &findings {
            outln!("{}", report::finding_text(f));
        }
        outln!("{nothing}");
    }
    verdict(false)
}

fn print(args: &RestoreArgs, o: &CopyOutcome, r: &Restored) {
    let head = r.last_trusted;
    if args.output.json {
        let mut doc = trusted_copy::json_fields(&args.copy.source, o);
        doc["status"] = "restored".into();
        doc["out"] = args.out.display().to_string().into();
        doc["events"] = r.end.into();
        doc["restored_end_seq"] = r.end.into();
        doc["unanchored_written"] = r.unanchored_written.into();
        doc["unanchored_not_written"] = r.unanchored_left.into();
        doc["last_trusted_head"] = json!({"seq": head.seq, "hash": head.hash_str()});
        outln!("{doc}");
        return;
    }
    outln!("{}", trusted_copy::summary(&args.copy.source, o));
    for w in &o.warnings {
        outln!("warning: {w}");
    }
    outln!(
        "restored: seq 1 to {} ({} events) to {}",
        r.end,
        r.end,
        args.out.display()
    );
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

/// A restored database is never written where evidence lives: inside a
/// file anchor store, a file there reads as a bad head to the next
/// `anchor verify`. (The copy itself exists, so `--out` never replaces it.)
fn refuse_out_in_evidence(args: &RestoreArgs) -> Result<(), CliError> {
    let real = |p: &Path| -> Option<PathBuf> {
        std::fs::canonicalize(p).ok().or_else(|| {
            let dir = p
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            Some(std::fs::canonicalize(dir).ok()?.join(p.file_name()?))
        })
    };
    let Some(out) = real(&args.out) else { return Ok(()) };
    let mut places: Vec<(PathBuf, &str)> = Vec::new();
    if let Some(chainship_anchor::AnchorUrl::File(dir)) = &args.copy.anchor.anchor {
        places.extend(real(dir).map(|d| (d, "the anchor store")));
    }
    // By identity too: a bind mount of the store is the store under another path.
    let identity = |p: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
    };
    for (place, what) in places {
        let inside = out.starts_with(&place)
            || identity(&place).is_some_and(|store| out.ancestors().skip(1).any(|dir| identity(dir) == Some(store)));
        if inside {
            return Err(CliError::usage(format!(
                "--out {}: inside {what} ({}); write the restored database elsewhere",
                args.out.display(),
                place.display()
            )));
        }
    }
    Ok(())
}
