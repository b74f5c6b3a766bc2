//! `chainship anchor status --all-origins`: a fleet's anchor store at a
//! glance (`chainship_verify::status`); this maps the flags and renders.

use std::time::{Duration, SystemTime};

use chainship_verify::Verdict;
use chainship_verify::status::{self, OriginStatus, StatusInput};
use clap::Args;
use serde_json::json;

use crate::args::{AnchorStoreArgs, JobMetricsArgs, OutputArgs, TrustArgs, WitnessTrustArgs};
use crate::exit::{CliError, CmdResult};
use crate::job_metrics::JobReport;
use crate::report;

/// Every origin of the anchor store at a glance: newest head and its age,
/// newest checkpoint, witness quorum.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship anchor status --anchor s3://audit-anchors/heads --all-origins --trusted-key fleet-keys.txt --max-age 10m
  chainship anchor status --anchor file:/mnt/anchors --all-origins --trusted-key fleet-keys.txt \\
      --json --metrics-textfile /var/lib/chainship/anchor-status.prom

One listing of the whole store, then a few reads per origin. Each origin trusts only its own
key: KEY origin=ORIGIN in the keys file, or a key named after the origin. With --policy, whether
its newest cosigned checkpoint meets the witnesses' quorum. A line per origin; an origin whose newest trusted head is older than --max-age
(stale), whose newest note no key named after it signed (untrusted-key), or, with a witness
policy, whose newest cosigned checkpoint lacks the quorum (uncosigned) fails.
Exit codes: 0 every origin fine, 1 any origin failed, 2 usage or an unreadable store.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
pub struct AnchorStatusArgs {
    #[command(flatten)]
    pub store: AnchorStoreArgs,
    /// Every origin the store keeps heads for (required: one origin's view is `anchor verify --no-db`).
    #[arg(long, required = true)]
    pub all_origins: bool,
    /// Only origins whose name starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub origin_prefix: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
    #[command(flatten)]
    pub witness: WitnessTrustArgs,
    /// An origin whose newest trusted head is older than this is stale (e.g. 10m).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_age: Option<Duration>,
    #[command(flatten)]
    pub job: JobMetricsArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &AnchorStatusArgs) -> CmdResult {
    let scope = args.origin_prefix.as_deref().unwrap_or("*");
    let mut job = JobReport::new("anchor_status", scope);
    crate::job_metrics::run_job(args.job.metrics_textfile.as_deref(), &mut job, |job| check(args, job))
}

fn check(args: &AnchorStatusArgs, job: &mut JobReport) -> CmdResult {
    let keys = args.trust.load()?;
    let policy = args.trust.witness_policy(&args.witness)?;
    let store = args.store.open(args.store.url()?, None);
    let input = StatusInput {
        store: &store,
        keys: &keys,
        policy: policy.as_ref(),
        prefix: args.origin_prefix.as_deref(),
        max_age: args.max_age,
        now: SystemTime::now(),
    };
    let (origins, junk) = report::runtime()?
        .block_on(status::fleet_status(&input))
        .map_err(|e| CliError::from_kind(&e))?;
    let code = crate::exit::of_each(&origins);
    let passed = code == crate::exit::OK;
    job.origins(origins.iter().map(|o| (o.covered.origin.as_str(), o)), passed);
    let warning = junk.warning("no origin");
    if args.output.json {
        outln!(
            "{}",
            json!({
                "status": if passed { "ok" } else { "failed" },
                "origins": origins.iter().map(origin_json).collect::<Vec<_>>(),
                "warnings": warning.iter().collect::<Vec<_>>(),
            })
        );
    } else {
        warning.iter().for_each(|w| outln!("warning: {w}"));
        for o in &origins {
            outln!("{}", origin_line(o));
        }
        for o in origins.iter().filter(|o| !o.passed()) {
            for f in &o.findings {
                outln!("{}", report::finding_text(f));
            }
        }
        match (origins.len(), passed) {
            (0, _) => outln!("failed: the store keeps no head of any origin in scope"),
            (n, true) => outln!("ok: {n} origin(s)"),
            (n, false) => outln!(
                "failed: {} of {n} origin(s)",
                origins.iter().filter(|o| !o.passed()).count()
            ),
        }
    }
    Ok(code)
}

fn age(s: &OriginStatus) -> Option<Duration> {
    s.published.and_then(|p| SystemTime::now().duration_since(p).ok())
}

fn origin_json(v: &Verdict<OriginStatus>) -> serde_json::Value {
    let s = &v.covered;
    report::with(
        report::verdict_json(v),
        json!({
            "origin": s.origin,
            "ok": v.passed(),
            "notes": s.notes,
            "newest_head": s.newest_head.map(|h| json!({"seq": h.seq, "hash": h.hash_str()})),
            "age_seconds": age(s).map(|a| a.as_secs()),
            "newest_checkpoint": s.newest_checkpoint,
            "newest_cosigned": s.newest_cosigned,
            "quorum_met": s.quorum_met,
        }),
    )
}

fn origin_line(v: &Verdict<OriginStatus>) -> String {
    let s = &v.covered;
    let head = match (s.newest_head, age(s)) {
        (Some(h), Some(a)) => format!(
            "head {} ({} ago)",
            h.seq,
            humantime::format_duration(Duration::from_secs(a.as_secs()))
        ),
        (Some(h), None) => format!("head {}", h.seq),
        (None, _) => "no trusted head".into(),
    };
    let checkpoint = s
        .newest_checkpoint
        .map_or("no checkpoint".into(), |c| format!("checkpoint {c}"));
    let quorum = match (s.quorum_met, s.newest_cosigned) {
        (None, _) => String::new(),
        (Some(true), Some(c)) => format!(", cosigned {c} (quorum met)"),
        (Some(_), c) => format!(
            ", cosigned {} (quorum NOT met)",
            c.map_or("-".into(), |c| c.to_string())
        ),
    };
    let status = match v.findings.first() {
        None => "ok    ".to_owned(),
        Some(f) => format!("{:<6}", f.kind.as_str().to_uppercase()),
    };
    format!("{status} {} {head}, {checkpoint}{quorum}", s.origin)
}
