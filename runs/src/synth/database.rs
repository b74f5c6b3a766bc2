//! A database of generated events, as agentrt writes it: its `runs` and
//! `events` tables, each event chained to the one before, the content from
//! [`RunGenerator`](super::RunGenerator). The stream's seed, run count and
//! faults are kept in the database, so appending continues the very stream
//! it was generated with (with another seed, the runs in flight would be
//! cut and other runs' events would follow theirs).
//!
//! The only code in chainship that writes an events table: it creates its
//! own database, and touches an existing one only when asked to append.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use chainship_chain::{AGENTRT_EVENTS_INDEX, AGENTRT_EVENTS_TABLE, Error, Setting, event_hash, permanent};
use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::{Inject, RunGenerator};

/// What the stream is made of; what is not given is taken from the
/// database (when appending), else the defaults (seed 1, 8 runs).
#[derive(Clone, Debug, Default)]
pub struct Settings {
    pub seed: Option<u64>,
    pub runs: Option<u64>,
    /// Faults to write (added to those the database recorded).
    pub inject: Vec<Inject>,
    /// Every Nth event carries a large payload (0: never) of this many bytes.
    pub large_every: u64,
    pub large_bytes: usize,
}

/// How long to keep appending in [`SynthDb::follow`].
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// Events per second.
    pub rate: f64,
    /// Stop after this long, or after this many events (else at `stop`).
    pub for_: Option<Duration>,
    pub max: Option<u64>,
}

/// A generated database, open for writing.
pub struct SynthDb {
    conn: Connection,
    content: Generator,
    head: (u64, String),
    path: String,
}

impl SynthDb {
    /// Creates the database at `path` (refused if it exists), or with
    /// `append` opens the one there. A fault asked for at a seq already
    /// written is refused.
    pub fn open(path: &Path, append: bool, settings: &Settings) -> Result<SynthDb, Error> {
        let conn = open(path, append)?;
        let shown = path.display().to_string();
        let err = |e: rusqlite::Error| permanent!("{shown}: write failed: {e}");
        let stream = Stream::resolve(&conn, settings).map_err(err)?;
        let mut content = Generator::new(settings, &stream);
        let head = current_head(&conn).map_err(err)?;
        if let Some(late) = settings.inject.iter().find(|i| i.at <= head.0 && !stream.was_stored(i)) {
            return Err(permanent!(
                "{shown}: the fault {late} cannot be written, seq {} is already written (the database ends at seq {})",
                late.at,
                head.0
            ));
        }
        content.skip_to(head.0);
        Ok(SynthDb {
            conn,
            content,
            head,
            path: shown,
        })
    }

    fn write_err(&self, e: rusqlite::Error) -> Error {
        permanent!("{}: write failed: {e}", self.path)
    }

    /// Appends `events` events, in transactions of 10,000.
    pub fn append(&mut self, events: u64) -> Result<(), Error> {
        let mut remaining = events;
        while remaining > 0 {
            let chunk = remaining.min(10_000);
            self.append_chunk(chunk).map_err(|e| self.write_err(e))?;
            remaining -= chunk;
        }
        Ok(())
    }

    fn append_chunk(&mut self, chunk: u64) -> rusqlite::Result<()> {
        let tx = self.conn.unchecked_transaction()?;
        {
            let mut insert = tx.prepare_cached(INSERT)?;
            for _ in 0..chunk {
                let seq = self.head.0 + 1;
                let hash = self.content.insert(&mut insert, seq, &self.head.1)?;
                self.head = (seq, hash);
            }
        }
        tx.commit()
    }

    /// Appends at `pace`, each event in its own write transaction that reads
    /// the head under the write lock, as a runtime writing one event at a
    /// time does, until `stop` is set or the pace says to stop.
    pub fn follow(&mut self, pace: Pace, stop: &AtomicBool) -> Result<(), Error> {
        let started = Instant::now();
        let mut written: u64 = 0;
        while !stop.load(Ordering::Relaxed)
            && pace.for_.is_none_or(|d| started.elapsed() < d)
            && pace.max.is_none_or(|m| written < m)
        {
            let due = (started.elapsed().as_secs_f64() * pace.rate) as u64;
            if written >= due {
                std::thread::sleep(Duration::from_millis(2).min(Duration::from_secs_f64(1.0 / pace.rate)));
                continue;
            }
            self.append_one().map_err(|e| self.write_err(e))?;
            written += 1;
        }
        Ok(())
    }

    fn append_one(&mut self) -> rusqlite::Result<()> {
        let tx = rusqlite::Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let (seq, prev) = current_head(&tx)?;
        self.content.skip_to(seq);
        let hash = {
            let mut insert = tx.prepare_cached(INSERT)?;
            self.content.insert(&mut insert, seq + 1, &prev)?
        };
        tx.commit()?;
        self.head = (seq + 1, hash);
        Ok(())
    }

    /// Faults the log was too short for.
    pub fn unwritten(&self) -> Vec<String> {
        self.content.unwritten()
    }
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
    fn resolve(conn: &Connection, settings: &Settings) -> rusqlite::Result<Stream> {
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
        for inject in &settings.inject {
            if !injects.contains(inject) {
                injects.push(*inject);
            }
        }
        let stream = Stream {
            seed: settings.seed.unwrap_or(seed),
            runs: settings.runs.unwrap_or(runs),
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

fn open(path: &Path, append: bool) -> Result<Connection, Error> {
    let exists = std::fs::symlink_metadata(path).is_ok();
    let err = |e: rusqlite::Error| permanent!("{}: {e}", path.display());
    match (exists, append) {
        (true, false) => Err(
            permanent!("{}: already exists; append to it to add events", path.display()).with_setting(Setting::Append),
        ),
        (false, true) => Err(permanent!("{}: no such file to append to", path.display())),
        (true, true) => {
            let conn = Connection::open(path).map_err(err)?;
            conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
            Ok(conn)
        }
        (false, false) => {
            let conn = Connection::open(path).map_err(err)?;
            conn.busy_timeout(Duration::from_secs(10)).map_err(err)?;
            conn.pragma_update(None, "journal_mode", "wal").map_err(err)?;
            conn.execute_batch(&format!(
                "{RUNS_TABLE};\n{AGENTRT_EVENTS_TABLE};\n{AGENTRT_EVENTS_INDEX};"
            ))
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
    fn new(settings: &Settings, stream: &Stream) -> Self {
        Generator {
            runs: RunGenerator::new(stream.seed, stream.runs, stream.injects.clone()),
            position: 0,
            large_every: settings.large_every,
            large_bytes: settings.large_bytes,
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
