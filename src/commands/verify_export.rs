//! `chainship verify-export`: check the SIEM's copy (a file, the S3 objects
//! or the Kafka partition) against the signed heads, without the database.

use chainship_chain::Head;
use clap::Args;

use crate::args::{JobMetricsArgs, OutputArgs, RunRulesArgs};
use crate::exit::CmdResult;
use crate::job_metrics::JobReport;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations, TrustedCopyArgs};

/// Check an exported copy against the kept heads, without the database.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship verify-export --from file:/siem/events.jsonl --anchor file:/mnt/anchors --trusted-key keys.txt
  chainship verify-export --from s3://siem-bucket/exports --origin prod-eu1/agentrt \\
      --anchor s3://audit-anchors/heads --trusted-key keys.txt --s3-endpoint http://minio:9000 --s3-path-style
  chainship verify-export --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --json
  chainship verify-export --from kafka://kafka:9092/audit --all-origins --anchor s3://audit-anchors/heads \\
      --trusted-key fleet-keys.txt --shard 1/2 --json
                                  # one read of the shared topic for every origin (worker 1 of 2)

Kinds: altered, gap, duplicate, reordered, foreign, cut, fork, and the anchor store's
(bad-signature, untrusted-key, heads-disagree), and no-trusted-head when no trusted head
above --after (or at all) was there to compare with (--allow-no-heads on a first run).
Identical duplicates are a warning. A file's first record must name --origin.
With --all-origins (a fleet's topic, S3 prefix, file or directory of files) every origin
is judged in one read of the copy, each only by the trusted key named after it; an origin
the anchor store keeps heads for and the copy lacks is missing-copy. A fleet's keys file gives
each origin its key: KEY origin=ORIGIN, or a key named after the origin.
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
    #[command(flatten)]
    pub fleet: crate::args::FleetArgs,
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
    if args.fleet.all_origins {
        return crate::commands::fleet::verify_export(args);
    }
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
    let verdict = trusted_copy::check(&args.copy, expect, args.rules.touched()?)?;
    job.verdict(&verdict);
    if let Some(origin) = &verdict.covered.origin {
        job.origin = origin.clone();
    }
    job.events_checked = verdict.covered.records;
    job.heads_checked = verdict.covered.checked as u64;
    job.unvouched_records = Some(verdict.unvouched_count());
    if args.output.json {
        outln!(
            "{}",
            trusted_copy::verdict_json(&args.copy.source, &verdict, &verdict.covered)
        );
    } else {
        outln!("{}", trusted_copy::summary(&args.copy.source, &verdict.covered));
        // "Whole" only when every record is vouched for by a head, and all
        // of the copy was read (not one partition, not only past --after).
        let narrowed = args.after.is_some() || args.copy.sink.kafka_partition.is_some();
        let what = if narrowed {
            "the part of the copy read"
        } else {
            "the copy"
        };
        let ok = match (verdict.covered.checked, verdict.unvouched_text()) {
            (0, _) => format!("{what}: its chain is intact; no head was checked"),
            (_, None) if narrowed => format!("{what} is whole and matches every trusted head in it"),
            (_, None) => "the copy is whole and matches every trusted head".to_owned(),
            (_, Some(tail)) => format!("{what} matches every trusted head, but {tail} yet"),
        };
        report::print_verdict(&verdict, &ok);
    }
    Ok(crate::exit::of(&verdict))
}
