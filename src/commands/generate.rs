//! `chainship generate`: writes an agentrt-shaped audit database of chained
//! events (agentrt's own run sequences, see `runs`), and with
//! `--follow-rate` keeps appending like a live runtime.
//!
//! The database is written by `chainship_runs::synth::database`, the only
//! code in chainship that writes an events table.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::Args;

use crate::exit::{CliError, CmdResult, OK};

use chainship_runs::synth::Inject;
use chainship_runs::synth::database::{Pace, Settings, SynthDb};

/// Write a demo/test audit database of chained events.
#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples:
  chainship generate --db demo.db --events 100000
  chainship generate --db demo.db --append --events 0 --follow-rate 200 --follow-for 5s
  chainship generate --db faults.db --events 5000 --inject unknown-outcome@1200 --inject executed-twice@3000

The events are agentrt's own run sequences (allowed, denied, approved, rejected, invalid
arguments, interrupted and taken over then approved and re-run, model calls), runs
interleaved. The same seed writes the same events; --append continues the same stream (the seed,
runs and faults are kept in the database's chainship_generator table).
Faults for --inject: unknown-outcome, executed-twice, started-without-decision,
left-running, event-after-finish, unknown-step, unrequested-approval (each written at
the first chance at or after SEQ).")]
pub struct GenerateArgs {
    /// The database to create (refused if it exists, unless --append).
    #[arg(long, value_name = "PATH")]
    pub db: PathBuf,
    /// How many events to write at once.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub events: u64,
    /// Add to an existing database instead of creating a new one.
    #[arg(long)]
    pub append: bool,
    /// Then keep appending this many events per second, one transaction each.
    #[arg(long, value_name = "R")]
    pub follow_rate: Option<f64>,
    /// Stop following after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub follow_for: Option<Duration>,
    /// Stop following after this many appended events.
    #[arg(long, value_name = "N")]
    pub follow_max: Option<u64>,
    /// How many runs are interleaved [default: 8, or what the database was generated with].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: Option<u64>,
    /// Every Nth event carries a large payload (0: never).
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub large_every: u64,
    /// Size of a large payload in bytes.
    #[arg(long, default_value_t = 256 * 1024, value_name = "BYTES")]
    pub large_bytes: usize,
    /// Seed for the content: the same seed writes the same events [default: 1, or what
    /// the database was generated with; another seed on --append forks the stream].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Write a fault the run check names, KIND@SEQ (repeatable; see below).
    #[arg(long, value_name = "KIND@SEQ")]
    pub inject: Vec<Inject>,
}

pub fn run(args: &GenerateArgs) -> CmdResult {
    if let Some(rate) = args.follow_rate
        && !(rate > 0.0 && rate.is_finite())
    {
        return Err(CliError::usage(format!(
            "--follow-rate {rate}: must be a positive number of events per second"
        )));
    }
    let settings = Settings {
        seed: args.seed,
        runs: args.runs,
        inject: args.inject.clone(),
        large_every: args.large_every,
        large_bytes: args.large_bytes,
    };
    let usage = |e: chainship_chain::Error| CliError::from_kind(&e);
    let mut db = SynthDb::open(&args.db, args.append, &settings).map_err(usage)?;
    db.append(args.events).map_err(usage)?;
    if let Some(rate) = args.follow_rate {
        let stop = Arc::new(AtomicBool::new(false));
        for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            // Registration only fails for forbidden signals; these two are allowed.
            let _ = signal_hook::flag::register(signal, Arc::clone(&stop));
        }
        let pace = Pace {
            rate,
            for_: args.follow_for,
            max: args.follow_max,
        };
        db.follow(pace, &stop).map_err(usage)?;
    }
    let unwritten = db.unwritten();
    if !unwritten.is_empty() {
        return Err(CliError::usage(format!(
            "--inject {}: not written, the log ended first (write more --events)",
            unwritten.join(", ")
        )));
    }
    Ok(OK)
}
