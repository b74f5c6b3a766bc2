//! `chainship generate`: writes an agentrt-shaped audit database of chained
//! events (agentrt's own run sequences, see `runs`), and with
//! `--follow-rate` keeps appending like a live runtime.
//!
//! This is the only code in chainship that writes an events table. It
//! creates its own database and touches an existing one only with `--append`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use chainship_chain::{AGENTRT_EVENTS_TABLE, event_hash};
use clap::Args;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use crate::exit::{CliError, CmdResult, OK};

mod runs;

use runs::{Inject, RunGenerator};

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
    let conn = open(&args.db, args.append)?;
    let err = |e: rusqlite::Error| CliError::usage(format!("{}: write failed: {e}", args.db.display()));
    let stream = Stream::resolve(&conn, args).map_err(err)?;
    let mut content = Generator::new(args, &stream);

    let (mut seq, mut prev) = current_head(&conn).map_err(err)?;
    if let Some(late) = args.inject.iter().find(|i| i.at <= seq && !stream.was_stored(i)) {
        return Err(CliError::usage(format!(
            "--inject {late}: seq {} is already written (the database ends at seq {seq})",
            late.at
        )));
    }
    content.skip_to(seq);
    let mut remaining = args.events;
    while remaining > 0 {
        let chunk = remaining.min(10_000);
        let tx = conn.unchecked_transaction().map_err(err)?;
        {
            let mut insert = tx.prepare_cached(INSERT).map_err(err)?;
            for _ in 0..chunk {
                seq += 1;
                prev = content.insert(&mut insert, seq, &prev).map_err(err)?;
            }
        }
        tx.commit().map_err(err)?;
        remaining -= chunk;
    }
    if let Some(rate) = args.follow_rate {
        follow(&conn, &mut content, args, rate).map_err(err)?;
    }
    let unwritten = content.unwritten();
    if !unwritten.is_empty() {
        return Err(CliError::usage(format!(
            "--inject {}: not written, the log ended first (write more --events)",
            unwritten.join(", ")
        )));
    }
    Ok(OK)
}

const RUNS_TABLE: &str = "CREATE TABLE runs (run_id TEXT PRIMARY KEY, created_at TEXT NOT NULL)";

/// What decides the content: kept in the database, so `--append` continues
/// the very stream it was generated with (with another seed, the runs in
/// flight would be cut and other runs' events would follow theirs).
struct Stream {
    seed: u64,
    runs: u64,
    injects: Vec<Inject>,
    /// How many of `injects` were recorded before this run.
    stored: usize,
}

const STREAM_TABLE: &str = "chainship_generator";

impl Stream {
    /// The flags, filled in from (and then recorded in) the database.
    fn resolve(conn: &Connection, args: &GenerateArgs) -> rusqlite::Result<Stream> {
        conn.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {STREAM_TABLE} (seed INTEGER NOT NULL, runs INTEGER NOT NULL, injects TEXT NOT NULL)"
        ))?;
        let stored: Option<(i64, i64, String)> = conn
            .query_row(&format!("SELECT seed, runs, injects FROM {STREAM_TABLE}"), [], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .optional()?;
        let (seed, runs, mut injects): (u64, u64, Vec<Inject>) = match &stored {
            Some((seed, runs, injects)) => (
                *seed as u64,
                *runs as u64,
                injects.split_whitespace().filter_map(|i| i.parse().ok()).collect(),
            ),
            None => (1, 8, Vec::new()),
        };
        let before = injects.len();
        for inject in &args.inject {
            if !injects.contains(inject) {
                injects.push(*inject);
            }
        }
        let stream = Stream {
            seed: args.seed.unwrap_or(seed),
            runs: args.runs.unwrap_or(runs),
            injects,
            stored: before,
        };
        let text: Vec<String> = stream.injects.iter().map(ToString::to_string).collect();
        conn.execute(&format!("DELETE FROM {STREAM_TABLE}"), [])?;
        conn.execute(
            &format!("INSERT INTO {STREAM_TABLE} (seed, runs, injects) VALUES (?1, ?2, ?3)"),
            (stream.seed as i64, stream.runs as i64, text.join(" ")),
        )?;
        Ok(stream)
    }

    /// Whether `inject` was recorded before this run (so already written).
    fn was_stored(&self, inject: &Inject) -> bool {
        self.injects[..self.stored].contains(inject)
    }
}

const INSERT: &str =
    "INSERT INTO events (seq, run_id, step_id, at, type, payload_json, hash) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)";

fn open(path: &Path, append: bool) -> Result<Connection, CliError> {
    let exists = std::fs::symlink_metadata(path).is_ok();
    let err = |e: rusqlite::Error| CliError::usage(format!("{}: {e}", path.display()));
    match (exists, append) {
        (true, false) => Err(CliError::usage(format!(
            "{}: already exists; pass --append to add events to it",
            path.display()
        ))),
        (false, true) => Err(CliError::usage(format!(
            "{}: no such file to --append to",
            path.display()
        ))),
        (true, true) => {
            let conn = Connection::open(path).map_err(err)?;
            conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
            Ok(conn)
        }
        (false, false) => {
            let conn = Connection::open(path).map_err(err)?;
            conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
            conn.pragma_update(None, "journal_mode", "wal").map_err(err)?;
            conn.execute_batch(&format!("{RUNS_TABLE};\n{AGENTRT_EVENTS_TABLE};"))
                .map_err(err)?;
            Ok(conn)
        }
    }
}

fn current_head(conn: &Connection) -> rusqlite::Result<(u64, String)> {
    Ok(conn
        .query_row("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1", [], |r| {
            Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?))
        })
        .optional()?
        .unwrap_or((0, String::new())))
}

/// Appends at `rate` events/s, each in its own write transaction that reads
/// the head under the write lock, as a runtime writing one event at a time does.
fn follow(conn: &Connection, content: &mut Generator, args: &GenerateArgs, rate: f64) -> rusqlite::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Registration only fails for forbidden signals; these two are allowed.
        let _ = signal_hook::flag::register(signal, Arc::clone(&stop));
    }
    let started = Instant::now();
    let mut written: u64 = 0;
    while !stop.load(Ordering::Relaxed)
        && args.follow_for.is_none_or(|d| started.elapsed() < d)
        && args.follow_max.is_none_or(|m| written < m)
    {
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        if written >= due {
            std::thread::sleep(Duration::from_millis(2).min(Duration::from_secs_f64(1.0 / rate)));
            continue;
        }
        let tx = rusqlite::Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
        let (seq, prev) = current_head(&tx)?;
        content.skip_to(seq);
        {
            let mut insert = tx.prepare_cached(INSERT)?;
            content.insert(&mut insert, seq + 1, &prev)?;
        }
        tx.commit()?;
        written += 1;
    }
    Ok(())
}

/// Deterministic event content: agentrt run sequences, each event at its
/// own time, and now and then a large payload.
struct Generator {
    runs: RunGenerator,
    /// How many events the stream has produced (the seq of the last).
    position: u64,
    large_every: u64,
    large_bytes: usize,
    base: SystemTime,
}

impl Generator {
    fn new(args: &GenerateArgs, stream: &Stream) -> Self {
        Generator {
            runs: RunGenerator::new(stream.seed, stream.runs, stream.injects.clone()),
            position: 0,
            large_every: args.large_every,
            large_bytes: args.large_bytes,
            base: SystemTime::UNIX_EPOCH + Duration::from_secs(1_786_953_600), // 2026-08-17T08:00:00Z
        }
    }

    /// Moves the stream on to just after `seq` (the events already in the
    /// database), so an appending generator continues the same runs.
    fn skip_to(&mut self, seq: u64) {
        while self.position < seq {
            self.position += 1;
            self.runs.next_event(self.position);
        }
    }

    fn insert(&mut self, insert: &mut rusqlite::CachedStatement<'_>, seq: u64, prev: &str) -> rusqlite::Result<String> {
        self.skip_to(seq - 1);
        self.position = seq;
        // After a run left running, the log goes quiet for longer than the run
        // check's default --open-after (15m), so the fault shows with defaults.
        let silence = Duration::from_secs(16 * 60) * self.runs.abandoned as u32;
        let event = self.runs.next_event(seq);
        let at = humantime::format_rfc3339_millis(self.base + Duration::from_millis(seq * 137) + silence).to_string();
        let mut payload = event.payload;
        if self.large_every > 0 && seq.is_multiple_of(self.large_every) {
            let blob = "x".repeat(self.large_bytes.saturating_sub(32));
            let rest = payload.strip_prefix('{').unwrap_or("}");
            let sep = if rest.starts_with('}') { "" } else { "," };
            payload = format!(r#"{{"blob":"{blob}"{sep}{rest}"#);
        }
        let hash = event_hash(
            prev.as_bytes(),
            seq,
            event.run_id.as_bytes(),
            event.step_id.as_bytes(),
            at.as_bytes(),
            event.kind.as_bytes(),
            payload.as_bytes(),
        );
        let hash = String::from_utf8_lossy(&hash).into_owned();
        insert.execute((
            seq as i64,
            &event.run_id,
            &event.step_id,
            &at,
            event.kind,
            &payload,
            &hash,
        ))?;
        Ok(hash)
    }

    /// Injections the log was too short for.
    fn unwritten(&self) -> Vec<String> {
        self.runs.pending().iter().map(ToString::to_string).collect()
    }
}
