//! `chainship follow`: the long-running sidecar (or `--once` for cron).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chainship_follower::retry::RetryPolicy;
use chainship_follower::{
    AnchorSetup, BoundedRuntime, FileCursor, FollowConfig, Health, OnBreak, Pipeline, RunRules, StartFrom, Stopped,
};
use chainship_sinks::{BatchPolicy, open_sink};
use clap::{Args, ValueEnum};

use crate::args::{PipelineArgs, RunRulesArgs};
use crate::exit::{CliError, CmdResult, OK};

/// Tail the audit database, verify every event, ship batches to a sink.
#[derive(Args, Debug)]
#[command(after_help = "Examples:
  chainship follow --db /data/audit.db --origin prod-eu1/agentrt \\
      --sink file:/var/lib/chainship/events.jsonl --cursor file:/var/lib/chainship/cursor --from-start
  chainship follow --once --db audit.db --origin dev/agentrt --sink stdout: --cursor cursor --from-start | head -3
  CHAINSHIP_DB=audit.db CHAINSHIP_ORIGIN=dev/agentrt CHAINSHIP_SINK=file:out.jsonl CHAINSHIP_FROM_START=true \\
      CHAINSHIP_CURSOR=file:cursor2 chainship follow --metrics-addr 127.0.0.1:9464

Exit codes: 0 stopped or done, 1 chain broken or database/sink disagree, 2 usage or setup error.")]
#[command(mut_arg("db", |a| a.required(true)))]
#[command(mut_arg("origin", |a| a.required(true)))]
#[command(mut_arg("cursor", |a| a.required(true)))]
pub struct FollowArgs {
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub rules: RunRulesArgs,
    /// With no cursor yet, start at seq 1.
    #[arg(long, conflicts_with = "from_seq")]
    pub from_start: bool,
    /// With no cursor yet, start at this seq (the event before it is trusted as stored).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=i64::MAX as u64))]
    pub from_seq: Option<u64>,
    /// Deliver what is there now, then exit 0 (for cron).
    #[arg(long)]
    pub once: bool,
    /// Events per batch, at most [default: the sink's: 10000 for Kafka, where each batch is one
    /// transaction; 500 for a file or stdout; S3 batches by object, see --s3-batch-events].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub batch_size: Option<u64>,
    /// Bytes of records per batch, at most (a single larger event still goes alone).
    #[arg(long, default_value_t = 8 << 20)]
    pub batch_bytes: usize,
    /// The longest a partial batch waits for more events while a delivery is
    /// in flight (when none is, what has checked out goes at once).
    #[arg(long, default_value = "200ms", value_parser = humantime::parse_duration)]
    pub batch_linger: Duration,
    /// How often an idle follower looks for new events.
    #[arg(long, default_value = "250ms", value_parser = humantime::parse_duration)]
    pub poll_interval: Duration,
    /// How often the run check's state is saved beside the cursor (`<cursor>.runs`), so a
    /// restart reads only the events after it (each save waits for the sink to hold its event).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration, help_heading = "Run check")]
    pub runs_save_interval: Duration,
    /// On a chain break: exit (1), or wait for an operator while serving metrics.
    #[arg(long, value_enum, default_value_t = OnBreakArg::Exit)]
    pub on_break: OnBreakArg,
    /// Longest wait between retries of a failing sink.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub retry_max_delay: Duration,
    /// Stop (exit 2) when the sink has failed this long; default: retry forever.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub give_up_after: Option<Duration>,
    /// /readyz turns 503 once the sink or the database has failed (or anchoring lagged) this long.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub unhealthy_after: Duration,
    /// On SIGTERM, how long a failing delivery may still be retried.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub shutdown_grace: Duration,
    /// Serve Prometheus /metrics and /healthz here (e.g. 127.0.0.1:9464).
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<SocketAddr>,
    /// Publish a head at most this often (0s: after every batch); the newest
    /// is published at once when the follower stops. Events delivered in
    /// between are covered by the next head (see the README's table).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub anchor_interval: Duration,
    /// While no event arrives, publish the last head again this often, so
    /// `anchor verify --max-age` can tell a quiet runtime from a stopped follower (0s: never).
    #[arg(long, default_value = "30m", value_parser = humantime::parse_duration)]
    pub anchor_heartbeat: Duration,
    /// Publish heads only: no checkpoints and tiles (the transparency log
    /// that `prove` and `check-proof` use). Checkpoints are on by default.
    #[arg(long)]
    pub no_checkpoints: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum OnBreakArg {
    Exit,
    Wait,
}

pub fn run(args: &FollowArgs) -> CmdResult {
    let open = args.pipeline.db.open_options().map_err(|e| CliError::from_kind(&e))?;
    args.pipeline.refuse_overlaps()?;
    let db_path = args.pipeline.db.path()?;
    let origin = args.pipeline.origin.get()?;
    let start = match (args.from_start, args.from_seq) {
        (true, _) => StartFrom::Start,
        (false, Some(n)) => StartFrom::Seq(n),
        (false, None) => StartFrom::Cursor,
    };
    let sink = args.pipeline.sink.config().map_err(CliError::usage)?;
    let batch = sink.batch_policy(BatchPolicy {
        max_events: args
            .batch_size
            .map_or(sink.default_batch_events(), |n| n.try_into().unwrap_or(usize::MAX)),
        max_bytes: args.batch_bytes,
        linger: args.batch_linger,
        group_commit: true,
        compression: None,
    });
    let config = FollowConfig {
        db: db_path.to_owned(),
        open,
        origin: origin.to_owned(),
        batch,
        record_format: args.pipeline.sink.write.record_format,
        poll_interval: args.poll_interval.max(Duration::from_millis(1)),
        once: args.once,
        start,
        on_break: match args.on_break {
            OnBreakArg::Exit => OnBreak::Exit,
            OnBreakArg::Wait => OnBreak::Wait,
        },
        retry: RetryPolicy {
            max_delay: args.retry_max_delay.max(Duration::from_millis(100)),
            give_up_after: args.give_up_after,
            shutdown_grace: args.shutdown_grace,
            ..RetryPolicy::default()
        },
        runs: args.rules.profile()?.map(|profile| RunRules {
            profile,
            config: args.rules.config(),
            save_interval: args.runs_save_interval,
        }),
        start_warnings: args
            .pipeline
            .anchor
            .anchor
            .is_none()
            .then(|| crate::commands::check::NO_ANCHOR_WARNING.to_owned())
            .into_iter()
            .collect(),
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // A second signal while shutting down exits at once.
        let _ = signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop));
        let _ = signal_hook::flag::register(signal, Arc::clone(&stop));
    }
    let runtime = BoundedRuntime::new(args.shutdown_grace).map_err(|e| CliError::from_kind(&e))?;
    let health = Arc::new(Health::new(args.unhealthy_after));
    if let Some(addr) = args.metrics_addr {
        runtime
            .block_on(chainship_follower::probe_server::start(addr, Arc::clone(&health)))
            .map_err(|e| CliError::usage(format!("--metrics-addr: {e}")))?;
    }
    // Checked here, not by clap: either may come from the config file, whose
    // values clap sees as defaults and its `requires` does not count.
    if args.pipeline.anchor.anchor.is_some() && args.pipeline.signing.signing_keys.is_empty() {
        return Err(CliError::usage(
            "--anchor needs --signing-key: heads are signed with the follower's key",
        ));
    }
    let keys = args.pipeline.signing.load()?;
    let (witnesses, quorum) = args.pipeline.witness.load()?;
    if !witnesses.is_empty() && (args.pipeline.anchor.anchor.is_none() || args.no_checkpoints) {
        return Err(CliError::usage(
            "--witness: witnesses cosign checkpoints, which need --anchor (and not --no-checkpoints)",
        ));
    }
    let store = args
        .pipeline
        .anchor
        .anchor
        .as_ref()
        .map(|url| args.pipeline.anchor.open(url, Some(args.pipeline.retain)));
    if let Some(store) = &store {
        chainship_follower::anchoring::store_ready(&runtime, store).map_err(|e| CliError::from_kind(&e))?;
        chainship_follower::anchoring::key_is_this_origins(&runtime, store, origin, &keys)
            .map_err(|e| CliError::from_kind(&e))?;
    }
    let anchor = store.map(|store| AnchorSetup {
        store,
        keys,
        checkpoints: !args.no_checkpoints,
        witnesses,
        quorum,
        interval: args.anchor_interval,
        heartbeat: args.anchor_heartbeat,
    });
    let pipeline = Pipeline {
        config,
        sink: open_sink(&sink, origin),
        cursor: FileCursor::new(args.pipeline.cursor.get()?),
        anchor,
        retry_max_delay: args.retry_max_delay,
        shutdown_grace: args.shutdown_grace,
        stop,
        health,
    };
    match pipeline.run(&runtime).into_result(db_path) {
        Ok(Stopped::Done { delivered, anchored }) => {
            let delivered = delivered.map_or(0, |h| h.seq);
            let anchored = anchored.map_or("nothing (no --anchor)".to_owned(), |a| format!("seq {a}"));
            tracing::info!(
                delivered,
                "stopped: delivered up to seq {delivered}, anchored up to {anchored}"
            );
            Ok(OK)
        }
        Ok(Stopped::Interrupted(m)) => {
            tracing::warn!("{m}");
            Ok(OK)
        }
        Err(e) => Err(CliError::from_kind(&e)),
    }
}
