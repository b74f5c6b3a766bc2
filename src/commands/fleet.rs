//! `chainship verify-export --all-origins`: a fleet's shared copy, every
//! origin judged in one read (`chainship_evidence::fleet`); this maps the
//! flags to its input and renders the answer.

use chainship_evidence::fleet::{self, FleetInput, FleetProgress, FleetVerdict, Scope};
use serde_json::json;

use crate::commands::verify_export::VerifyExportArgs;
use crate::exit::{CliError, CmdResult};
use crate::job_metrics::JobReport;
use crate::report;
use crate::trusted_copy::{self, CopyExpectations};

pub fn verify_export(args: &VerifyExportArgs) -> CmdResult {
    let scope = args.fleet.origin_prefix.as_deref().unwrap_or("*");
    let mut job = JobReport::new("verify_export", scope);
    crate::job_metrics::run_job(args.job.metrics_textfile.as_deref(), &mut job, |job| check(args, job))
}

fn check(args: &VerifyExportArgs, job: &mut JobReport) -> CmdResult {
    let copy = &args.copy;
    let keys = copy.trust.load()?;
    let redaction_keys = copy.trust.redaction_keys(&keys)?;
    let policy = copy.trust.witness_policy(&copy.witness)?;
    let url = copy.anchor.url()?;
    let source = copy.sink.apply(&copy.source);
    let profile_touched = args.rules.touched()?;
    let touched = profile_touched.as_ref().map(|t| move || t.clone());
    let input = FleetInput {
        source: &source,
        keys: &keys,
        witness: policy.as_ref().map(|p| (p, copy.witness.witness_grace)),
        open_store: &|| copy.anchor.open(url, None),
        scope: Scope {
            prefix: args.fleet.origin_prefix.as_deref(),
            shard: args.fleet.shard,
        },
        expect: CopyExpectations {
            after: None,
            allow_no_heads: args.no_heads.allow_no_heads,
            max_unvouched: args.unvouched.max_unvouched,
        },
        spill_dir: args.fleet.spill_dir.as_deref(),
        redaction_keys: &redaction_keys,
    };
    let mut progress = |p: FleetProgress<'_>| match p {
        FleetProgress::Read(n) => tracing::info!(records = n, "fleet pass: reading the shared copy"),
        FleetProgress::Judged {
            done,
            of,
            origin,
            passed,
        } => {
            if !passed || done == of || done % 100 == 0 {
                tracing::info!(done, of, origin, passed, "fleet pass: origin judged");
            }
        }
    };
    let verdict = fleet::check_fleet(&input, touched.as_ref().map(|t| t as &dyn Fn() -> _), &mut progress)
        .map_err(|e| CliError::from_kind(&e))?;
    record(job, &verdict);
    if args.output.json {
        outln!("{}", json_of(&source, &verdict));
    } else {
        print(&verdict);
    }
    Ok(crate::exit::of_fleet(&verdict))
}

fn record(job: &mut JobReport, v: &FleetVerdict) {
    job.verdict(&v.fleet);
    for o in &v.origins {
        job.events_checked += o.verdict.covered.records;
        job.heads_checked += o.verdict.covered.checked as u64;
    }
    job.origins(v.origins.iter().map(|o| (o.origin.as_str(), &o.verdict)), v.passed());
}

fn json_of(source: &chainship_sinks::SinkConfig, v: &FleetVerdict) -> serde_json::Value {
    let failed = v.failed().count();
    let missing = v
        .origins
        .iter()
        .filter(|o| {
            o.verdict
                .findings
                .iter()
                .any(|f| f.kind == chainship_verify::Kind::MissingCopy)
        })
        .count();
    report::with(
        report::verdict_json(&v.fleet),
        json!({
            "status": if v.passed() { "ok" } else { "failed" },
            "source": source.to_string(),
            "origins": v.origins.iter().map(|o| report::with(
                json!({"origin": o.origin, "ok": o.verdict.passed()}),
                trusted_copy::verdict_json(source, &o.verdict, &o.verdict.covered),
            )).collect::<Vec<_>>(),
            "summary": {
                "origins": v.origins.len(),
                "ok": v.origins.len() - failed,
                "failed": failed,
                "missing_copy": missing,
                "records": v.fleet.covered.records,
                "in_store": v.fleet.covered.in_store,
                "shard": v.fleet.covered.shard.map(|s| s.to_string()),
                "partitions": v.fleet.covered.shard.map(|_| &v.fleet.covered.partitions),
            },
        }),
    )
}

fn print(v: &FleetVerdict) {
    for w in &v.fleet.warnings {
        outln!("warning: {w}");
    }
    for f in &v.fleet.findings {
        outln!("{}", report::finding_text(f));
    }
    for o in &v.origins {
        let c = &o.verdict.covered;
        let line = match o.verdict.findings.first() {
            None => format!(
                "{} record(s), {} head(s) checked, last trusted head {}",
                c.records,
                c.checked,
                o.verdict
                    .last_trusted
                    .map_or("none".into(), |h| format!("seq {}", h.seq))
            ),
            Some(f) => format!("{} finding(s), first: {}", o.verdict.findings.len(), f.kind),
        };
        let status = if o.verdict.passed() { "ok    " } else { "FAILED" };
        outln!("{status} {} {line}", o.origin);
    }
    for o in v.failed() {
        outln!("");
        outln!("{}:", o.origin);
        report::print_verdict(&o.verdict, "");
    }
    let failed = v.failed().count();
    let shard = v.fleet.covered.shard.map_or(String::new(), |s| format!(" (shard {s})"));
    if v.passed() && v.origins.is_empty() {
        outln!("ok: nothing to judge in this worker's share{shard}");
    } else if v.passed() {
        outln!(
            "ok: every origin ({}) is whole and matches its trusted heads{shard}",
            v.origins.len()
        );
    } else {
        outln!("failed: {failed} of {} origin(s){shard}", v.origins.len());
    }
}
