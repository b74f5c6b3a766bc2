//! `chainship verify-export`: check the SIEM's copy (a file, the S3 objects
//! or the Kafka partition) against the signed heads, without the database.

use chainship_chain::Head;
use clap::Args;

use crate::args::{JobMetricsArgs, OutputArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult, verdict};
use crate::job_metrics::JobReport;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations, CopyOutcome, TrustedCopyArgs, copy};
use chainship_runs::affected::{self, Affected};

/// Check an exported copy against the kept heads, without the database.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship verify-export --from file:/siem/events.jsonl --anchor file:/mnt/anchors --trusted-key keys.txt
  chainship verify-export --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --s3-endpoint http://minio:9000 --s3-path-style
  chainship verify-export --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --json

Kinds: altered, gap, duplicate, reordered, foreign, cut, fork, and the anchor store's
(bad-signature, untrusted-key, heads-disagree), and no-trusted-head when no trusted head
above --after (or at all) was there to compare with (--allow-no-heads on a first run).
Identical duplicates are a warning. A file's first record must name --origin.
Records may be in any --record-format (chainship, ocsf, ecs), mixed: an OCSF or ECS record
whose mapped fields are not what the record it carries maps to is altered, named by seq.
Exit codes: 0 whole and matching, 1 any error, 2 usage or an unreadable source.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.help(
    "Whose copy (needed for s3:// and kafka://; a file's first record names it otherwise)"
)))]
pub struct VerifyExportArgs {
    #[command(flatten)]
    pub copy: TrustedCopyArgs,
    /// The copy starts after this trusted head (SEQ:HASH) instead of at seq 1;
    /// kept heads at or below it are not checked (one at its seq must match it).
    #[arg(long, value_name = "SEQ:HASH")]
    pub after: Option<Head>,
    #[command(flatten)]
    pub no_heads: crate::args::NoHeadsArgs,
    #[command(flatten)]
    pub unvouched: crate::args::UnvouchedArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub job: JobMetricsArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &VerifyExportArgs) -> CmdResult {
    let origin = args.copy.origin.origin.as_deref().unwrap_or_default();
    let mut report = JobReport::new("verify_export", origin);
    crate::job_metrics::run_job(args.job.metrics_textfile.as_deref(), &mut report, |r| check(args, r))
}

fn check(args: &VerifyExportArgs, job: &mut JobReport) -> CmdResult {
    let expect = CopyExpectations {
        after: args.after,
        allow_no_heads: args.no_heads.allow_no_heads,
        max_unvouched: args.unvouched.max_unvouched,
    };
    let outcome = trusted_copy::read_checked(&args.copy, expect, &mut |_| {})?;
    // What the invalid ranges touch: the copy read again for their events.
    let ranges = outcome.affected_ranges();
    let touched = match (ranges.is_empty(), &outcome.origin, args.rules.touched()?) {
        (false, Some(origin), Some(touched)) => Some(
            copy::touched_in(&args.copy.sink.apply(&args.copy.source), origin, &ranges, touched)
                .map_err(|e| CliError::from_kind(&e))?,
        ),
        _ => None,
    };
    job.findings(&outcome.findings);
    if let Some(origin) = &outcome.origin {
        job.origin = origin.clone();
    }
    job.last_trusted_seq = outcome.last_trusted.map(|h| h.seq);
    job.last_trusted_published = outcome.last_trusted_published;
    job.events_checked = outcome.records;
    job.heads_checked = outcome.checked as u64;
    job.unvouched_records = Some(outcome.unvouched_count());
    Ok(print(args, &outcome, touched.as_ref()))
}

/// Prints the outcome and returns the exit code.
fn print(args: &VerifyExportArgs, o: &CopyOutcome, touched: Option<&Affected>) -> u8 {
    if args.output.json {
        let mut doc = trusted_copy::json_fields(&args.copy.source, o);
        doc["status"] = (if o.findings.is_empty() { "ok" } else { "failed" }).into();
        doc["affected"] = touched.map_or(serde_json::Value::Null, affected::json);
        outln!("{doc}");
    } else {
        outln!("{}", trusted_copy::summary(&args.copy.source, o));
        for w in &o.warnings {
            outln!("warning: {w}");
        }
        // "Whole" only when every record is vouched for by a head, and all
        // of the copy was read (not one partition, not only past --after).
        let narrowed = args.after.is_some() || args.copy.sink.kafka_partition.is_some();
        let what = if narrowed {
            "the part of the copy read"
        } else {
            "the copy"
        };
        let ok = match (o.checked, o.unvouched_text()) {
            (0, _) => format!("{what}: its chain is intact; no head was checked"),
            (_, None) if narrowed => format!("{what} is whole and matches every trusted head in it"),
            (_, None) => "the copy is whole and matches every trusted head".to_owned(),
            (_, Some(tail)) => format!("{what} matches every trusted head, but {tail} yet"),
        };
        report::print_outcome(&o.findings, &ok, o.last_trusted);
        for line in touched.into_iter().flat_map(affected::lines) {
            outln!("{line}");
        }
    }
    verdict(o.findings.is_empty())
}
