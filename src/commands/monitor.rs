//! `chainship monitor`: the copy and the anchor store verified continuously
//! (`chainship_monitor`); this maps the flags, serves the probes and
//! metrics, and prints each finding.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chainship_monitor::{MonitorHealth, MonitorInput, Reported, RunRules, Scope, Timing};
use clap::Args;
use serde_json::json;

use crate::args::{OutputArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult};
use crate::report;
use crate::trusted_copy::TrustedCopyArgs;

/// Verify a copy and the anchor store continuously: each record as it arrives, each head as it is published.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship monitor --from kafka://kafka:9092/audit --origin prod-eu1/agentrt --anchor file:/mnt/anchors \\
      --trusted-key keys.txt --state /var/lib/chainship/monitor --metrics-addr 127.0.0.1:9465
  chainship monitor --from kafka://kafka:9092/audit --all-origins --anchor s3://audit-anchors/heads \\
      --trusted-key fleet-keys.txt --max-age 10m --state /var/lib/chainship/monitor-fleet --json
                                  # a whole fleet, one consumer of every partition

A finding is one log line (origin, kind, seq, range) and a count in
chainship_monitor_findings_total; the monitor keeps watching. The copy: a planted, edited,
repeated or out-of-place record is found as it arrives; the copy's record at each newly
trusted head's seq must be that head (a rewritten tail is a fork over its range). The store:
each origin's new heads and checkpoints are judged as `anchor verify --no-db --state` judges
them (signatures, trusted key, growth, consistency proofs, witnesses); a rolled-back or forked
store is a finding. An origin with no trusted head newer than --max-age is stale until one
comes. A broker, S3 or disk outage is retried and shows on /readyz, never as a finding.
--state DIR keeps what was verified: a restart reads nothing twice, and a state of another
copy, store or origin is refused. The run check (--profile, on by default) runs on each
origin's records as they arrive: an unknown outcome, a bypass or a call executed twice is a
run-rule finding when it happens. Follows a Kafka topic (every partition, by assignment),
files (a directory of them) or an S3 prefix (new objects, listed every 2 s). It reads what is
appended: an edit in place of what it read, or an S3 object planted under a name that sorts
before what it read, is the scheduled verify-export's to find.
Exit codes: 0 stopped by SIGTERM or SIGINT (state saved), 2 usage, setup or a refused state.")]
#[command(mut_arg("anchor", |a| a.required(true)))]
pub struct MonitorArgs {
    #[command(flatten)]
    pub copy: TrustedCopyArgs,
    /// Watch every origin of the copy and the store, each trusting only the
    /// key named after it (KEY origin=ORIGIN in the keys file).
    #[arg(long, conflicts_with = "origin")]
    pub all_origins: bool,
    /// Only origins whose name starts with this (e.g. prod-eu1/).
    #[arg(long, value_name = "PREFIX", requires = "all_origins")]
    pub origin_prefix: Option<String>,
    /// This monitor's share of a fleet's topic, I of N: partitions p with p mod N = I-1.
    #[arg(long, value_name = "I/N", requires = "all_origins", value_parser = chainship_sinks::Shard::parse)]
    pub shard: Option<chainship_sinks::Shard>,
    /// Where the monitor keeps what it verified (created if missing).
    #[arg(long, value_name = "DIR")]
    pub state: PathBuf,
    /// Serve /metrics, /readyz and /livez here.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// An origin whose newest trusted head is older than this is stale (e.g. 10m).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_age: Option<Duration>,
    /// How often the anchor store is listed.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "2s")]
    pub store_interval: Duration,
    /// Each origin's store is judged at least this often, changed or not.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1m")]
    pub recheck_interval: Duration,
    /// How long a record that came ahead of its turn waits before it is named.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    pub reorder_grace: Duration,
    /// How often the state is saved (and on the way out).
    #[arg(long, value_parser = humantime::parse_duration, default_value = "10s")]
    pub save_interval: Duration,
    /// Origins with series of their own in the metrics; the rest count as origin="_other".
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub max_origin_labels: usize,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

pub fn run(args: &MonitorArgs) -> CmdResult {
    let copy = &args.copy;
    let scope = match (&copy.origin.origin, args.all_origins) {
        (Some(origin), false) => Scope::One(origin.clone()),
        (None, true) => Scope::All {
            prefix: args.origin_prefix.clone(),
        },
        _ => return Err(CliError::usage("pass --origin ORIGIN or --all-origins")),
    };
    let keys = copy.trust.load()?;
    let redaction_keys = copy.trust.redaction_keys(&keys)?;
    let policy = copy.trust.witness_policy(&copy.witness)?;
    let store = copy.anchor.open(copy.anchor.url()?, None);
    let source = copy.sink.apply(&copy.source);
    let health = Arc::new(MonitorHealth::default());
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while saving exits at once.
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop));
        let _ = signal_hook::flag::register(signal, Arc::clone(&stop));
    }
    // The probes and metrics are served from a runtime of their own.
    let _server = match args.metrics_addr {
        Some(addr) => {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .map_err(|e| CliError::usage(format!("cannot start the metrics server: {e}")))?;
            runtime
                .block_on(chainship_follower::probe_server::start(addr, Arc::clone(&health)))
                .map_err(|e| CliError::usage(format!("--metrics-addr: {e}")))?;
            Some(runtime)
        }
        None => None,
    };
    let input = MonitorInput {
        copy: &source,
        store: &store,
        scope,
        shard: args.shard,
        keys: &keys,
        witness: policy.as_ref().map(|p| (p, copy.witness.witness_grace)),
        state_dir: &args.state,
        timing: Timing {
            store_interval: args.store_interval,
            recheck: args.recheck_interval,
            grace: args.reorder_grace,
            save_interval: args.save_interval,
            max_age: args.max_age,
            ..Timing::default()
        },
        max_origin_labels: args.max_origin_labels,
        runs: args.rules.profile()?.map(|profile| RunRules {
            profile,
            config: args.rules.config(),
        }),
        redaction_keys: &redaction_keys,
    };
    let json = args.output.json;
    let mut print = |r: &Reported<'_>| {
        if json {
            outln!(
                "{}",
                report::with(
                    report::finding_json(r.finding),
                    json!({"origin": r.origin, "range": r.range.map(|(a, b)| json!({"from": a, "to": b}))}),
                )
            );
        } else {
            outln!("{}: {}", r.origin, report::finding_text(r.finding));
        }
    };
    chainship_monitor::run(&input, &health, &stop, &mut print).map_err(|e| CliError::from_kind(&e))?;
    Ok(crate::exit::OK)
}
