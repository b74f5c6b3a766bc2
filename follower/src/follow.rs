//! The follow loop: read pages after the resume point, check every event
//! against the chain, gather them into batches, deliver, then move the
//! cursor.
//!
//! The loop itself is synchronous and runs on its own thread; only the
//! sink calls are async (they are run on the tokio runtime the CLI
//! provides). A second thread reads the next page while this one checks
//! and encodes the last, so reading and hashing overlap.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chainship_chain::{ChainBreak, ChainCheck, EventDb, Head, PrevHash, ReadAhead, ReadPlan, Waited};
use chainship_sinks::{Batch, Sink};
use tokio::sync::watch;

use crate::config::{FollowConfig, OnBreak};
use crate::cursor::FileCursor;
use crate::delivery::{Delivery, Pipeline};
use crate::error::FollowError;
use crate::health::Health;
use crate::metrics;
use crate::resume;
use crate::run_check::FollowerRunCheck;
use crate::run_state::RunStateFile;

/// How a follow ended without an error.
#[derive(Debug)]
pub enum Outcome {
    /// `--once`: everything there at start was delivered.
    Done,
    /// Shutdown was requested; the batch in flight was delivered (or, if
    /// the sink stayed down past the grace, will be sent again next time).
    Stopped,
    /// The chain broke; nothing past the last good event was shipped.
    Broken(Box<ChainBreak>),
}

pub struct Follower {
    cfg: FollowConfig,
    delivery: Delivery,
    stop: Arc<AtomicBool>,
    health: Arc<Health>,
}

/// The batch being filled, and what it continues from.
struct Pending {
    batch: Batch,
    /// Stored hash of the event before the next one (empty before seq 1).
    prev_hash: PrevHash,
    since: Option<Instant>,
}

impl Follower {
    pub fn new(
        cfg: FollowConfig,
        sink: Box<dyn Sink>,
        cursor: FileCursor,
        rt: tokio::runtime::Handle,
        stop: Arc<AtomicBool>,
        health: Arc<Health>,
    ) -> Self {
        let delivery = Delivery::new(sink, cursor, rt, Arc::clone(&stop), Arc::clone(&health), cfg.retry);
        Follower {
            cfg,
            delivery,
            stop,
            health,
        }
    }

    /// Every head the sink acknowledged (and the cursor recorded), newest
    /// first: what the anchor publisher signs.
    pub fn delivered_heads(&self) -> watch::Receiver<Option<Head>> {
        self.delivery.subscribe()
    }

    /// The hashes of every delivered event, for the transparency log
    /// (bounded; see [`crate::hash_feed`]).
    pub fn hash_feed(&mut self) -> Arc<crate::hash_feed::HashFeed> {
        let feed = Arc::new(crate::hash_feed::HashFeed::default());
        self.delivery.feed_hashes(Arc::clone(&feed));
        feed
    }

    pub fn run(self) -> Result<Outcome, FollowError> {
        let Follower {
            cfg,
            mut delivery,
            stop,
            health,
        } = self;
        // Held to the end of `run`; each delivery checks it is still ours.
        let lock = Arc::new(std::sync::Mutex::new(delivery.cursor().lock()?));
        delivery.guard_with(Arc::clone(&lock));
        let db = opened(&cfg, &health)?;
        let point = resume::resume(&db, &mut delivery, cfg.start, &cfg.origin)?;
        let after_seq = point.after.map_or(0, |h| h.seq);
        delivery.announce(point.after);
        let db_head = db.head()?.map_or(0, |(s, _)| s);
        metrics::resumed(db_head, after_seq);
        tracing::info!(origin = %cfg.origin, sink = %delivery.sink_name(), resume_after = after_seq, db_head, once = cfg.once, "following");
        for warning in &cfg.start_warnings {
            tracing::warn!("{warning}");
        }
        if cfg.once && db_head <= after_seq {
            return Ok(Outcome::Done);
        }

        let plan = ReadPlan {
            // Pages of at most 4,096 events and 1 MiB (about 3,000 of
            // agentrt's events): up to seven are in flight (read ahead,
            // checked, run-checked, spare), whatever the batch size.
            page_events: cfg.batch.max_events.clamp(256, 4096),
            page_bytes: 1 << 20,
            tail: (!cfg.once).then_some(cfg.poll_interval),
            after_hash: point.after.map(|h| h.hash),
            ..ReadPlan::new(after_seq, cfg.once.then_some(db_head))
        };
        let runs = match &cfg.runs {
            Some(rules) => {
                let state = RunStateFile::new(delivery.cursor().sibling(".runs"), &cfg.origin);
                let delivered = delivery.subscribe();
                Some(FollowerRunCheck::rebuild(
                    rules,
                    &db,
                    point.after,
                    Some((state, delivered)),
                )?)
            }
            None => None,
        };
        drop(db);
        let mut fresh = FreshHead::new(&cfg, db_head, Arc::clone(&health));
        let mut idle_behind: Option<Instant> = None;
        let reader = ReadAhead::spawn(opened(&cfg, &health)?, plan);
        // The run check reads each page after it is shipped, on its own thread.
        let runs = runs.map(|r| r.spawn(reader.recycler()));
        let mut check = point.after.map_or_else(ChainCheck::from_start, ChainCheck::after);
        let mut pending = Pending {
            batch: match cfg.batch.compression {
                Some(c) => Batch::compressed(&cfg.origin, c),
                None => Batch::new(&cfg.origin),
            }
            .in_format(cfg.record_format),
            prev_hash: point.after.map_or(PrevHash::NONE, |h| PrevHash::of(h.hash)),
            since: None,
        };
        let mut pipeline = Pipeline::spawn(delivery);
        let mut last_positions = Instant::now();
        // Every way out first hands over what checked out and waits for it.
        let finish = |pipeline: &mut Pipeline, pending: &mut Pending| -> Result<(), FollowError> {
            submit(pipeline, pending, None)?;
            pipeline.drain()
        };

        loop {
            health.turned();
            if stop.load(Ordering::Relaxed) {
                return stopped(finish(&mut pipeline, &mut pending));
            }
            let linger_left = pending.since.map(|t| cfg.batch.linger.saturating_sub(t.elapsed()));
            if linger_left.is_some_and(|left| left.is_zero()) {
                submit(&mut pipeline, &mut pending, Some(&mut fresh))?;
                continue;
            }
            // Group commit: what has checked out goes as soon as the sink is
            // idle; while a delivery is in flight the batch keeps filling, and
            // the next delivery takes all that came meanwhile.
            if cfg.batch.group_commit && pending.since.is_some() {
                if let Err(e) = pipeline.check() {
                    return stopped(Err(e));
                }
                if !pipeline.busy() {
                    submit(&mut pipeline, &mut pending, Some(&mut fresh))?;
                    continue;
                }
            }
            let wait = match linger_left {
                // Looking back at the delivery in flight every millisecond.
                Some(left) if cfg.batch.group_commit => left.min(DELIVERY_POLL),
                Some(left) => left.min(Duration::from_millis(100)),
                None => Duration::from_millis(100),
            };
            match reader.next_page_timeout(wait) {
                Waited::Page(Ok(page)) => {
                    idle_behind = None;
                    let (mut checked, mut broken) = (0, None);
                    for event in page.iter() {
                        let head = match check.check(&event) {
                            Ok(head) => head,
                            Err(b) => {
                                broken = Some(b);
                                break;
                            }
                        };
                        pending
                            .batch
                            .push(&event, head.hash, pending.prev_hash)
                            .map_err(|e| FollowError::setup(format!("{}: {e}", cfg.db.display())))?;
                        checked += 1;
                        pending.prev_hash = PrevHash::of(head.hash);
                        pending.since.get_or_insert_with(Instant::now);
                        if pending.batch.len() >= cfg.batch.max_events || pending.batch.bytes() >= cfg.batch.max_bytes {
                            submit(&mut pipeline, &mut pending, Some(&mut fresh))?;
                        }
                    }
                    match &runs {
                        Some(runs) => runs.send(page, checked),
                        None => reader.give_back(page),
                    }
                    if let Some(broken) = broken {
                        // Ship what checked out, nothing past it.
                        stopped(finish(&mut pipeline, &mut pending))?;
                        return Ok(on_break(&cfg, &stop, &health, broken, &mut fresh));
                    }
                }
                Waited::Page(Err(e)) => {
                    stopped(finish(&mut pipeline, &mut pending))?;
                    return Err(e.into());
                }
                Waited::Nothing => {
                    if let Err(e) = pipeline.check() {
                        return stopped(Err(e));
                    }
                    if cfg.batch.group_commit && pending.since.is_some() {
                        continue;
                    }
                    if last_positions.elapsed() > Duration::from_secs(1) {
                        last_positions = Instant::now();
                        let read = check.last_good().map_or(0, |h| h.seq);
                        let head = fresh.look();
                        metrics::database_head(head);
                        // The reader is idle, yet a fresh connection sees more: its
                        // files changed under it in a way it did not notice. Reopen.
                        if head > read {
                            let since = *idle_behind.get_or_insert_with(Instant::now);
                            if since.elapsed() > Duration::from_secs(2) {
                                tracing::warn!(
                                    db_head = head,
                                    read,
                                    "the reader sees no new events while the database has them; reopening"
                                );
                                reader.request_reopen();
                                idle_behind = None;
                            }
                        } else {
                            idle_behind = None;
                        }
                    }
                }
                Waited::Finished => {
                    finish(&mut pipeline, &mut pending)?;
                    return Ok(Outcome::Done);
                }
            }
        }
    }
}

/// How often a batch filling while a delivery is in flight looks whether
/// that delivery has finished.
const DELIVERY_POLL: Duration = Duration::from_millis(1);

/// Hands the pending batch to the delivery thread (which first waits for
/// the batch before it to be acknowledged).
fn submit(pipeline: &mut Pipeline, pending: &mut Pending, fresh: Option<&mut FreshHead>) -> Result<(), FollowError> {
    let Some(head) = pending.batch.last_head() else {
        return Ok(());
    };
    let full = std::mem::take(&mut pending.batch);
    pending.batch = pipeline.submit(full)?;
    pending.since = None;
    if let Some(fresh) = fresh {
        metrics::database_head(fresh.look().max(head.seq));
    }
    Ok(())
}

/// The database head as a new connection sees it, looked up at most once a
/// second, for metrics and as a second opinion on an idle reader. Not proof
/// on its own: SQLite shares one `-shm` mapping per database within a
/// process, so while the reader still holds a replaced one this connection
/// sees it too. What catches replaced files is the reader's own identity
/// check on every poll (`chain::FileIdentity`), which closes and reopens.
struct FreshHead {
    db: PathBuf,
    open: chainship_chain::OpenOptions,
    seen: u64,
    at: Option<Instant>,
    /// Hears whether the database can be read at all (readiness).
    health: Arc<Health>,
    failing: bool,
}

impl FreshHead {
    fn new(cfg: &FollowConfig, seen: u64, health: Arc<Health>) -> Self {
        FreshHead {
            db: cfg.db.clone(),
            open: cfg.open.clone(),
            seen,
            at: Some(Instant::now()),
            health,
            failing: false,
        }
    }

    fn look(&mut self) -> u64 {
        if self.at.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
            self.at = Some(Instant::now());
            match EventDb::open(&self.db, &self.open).and_then(|db| db.head()) {
                Ok(head) => {
                    self.seen = head.map_or(0, |(s, _)| s);
                    self.health.db_ok();
                    if std::mem::take(&mut self.failing) {
                        tracing::info!(db = %self.db.display(), "the database is readable again");
                    }
                }
                Err(e) => {
                    // Said once when it starts, then by /readyz: never a line a second.
                    if !std::mem::replace(&mut self.failing, true) {
                        tracing::warn!(error = %e, "cannot read the database; retrying (/readyz says so once it lasts past --unhealthy-after)");
                    }
                    self.health.db_failed(&e.to_string());
                }
            }
        }
        self.seen
    }
}

/// The database opened, waiting out SQLite's "not now" (a -wal without its
/// -shm waits for a writer): a wait past `--unhealthy-after` shows in /readyz.
fn opened(cfg: &FollowConfig, health: &Health) -> Result<EventDb, FollowError> {
    health.db_failed("SQLite has not let this process open it yet");
    let db = EventDb::open(&cfg.db, &cfg.open)?;
    health.db_ok();
    Ok(db)
}

/// A shutdown that came while the sink was still failing is a stop, not an error.
fn stopped(result: Result<(), FollowError>) -> Result<Outcome, FollowError> {
    match result {
        Ok(()) => Ok(Outcome::Stopped),
        Err(FollowError::Interrupted(m)) => {
            tracing::warn!("{m}");
            Ok(Outcome::Stopped)
        }
        Err(e) => Err(e),
    }
}

fn on_break(
    cfg: &FollowConfig,
    stop: &AtomicBool,
    health: &Health,
    broken: Box<ChainBreak>,
    fresh: &mut FreshHead,
) -> Outcome {
    metrics::chain_break();
    health.chain_broken(&broken.to_string());
    tracing::error!(
        seq = broken.seq,
        expected = broken.expected_str(),
        found = %broken.found,
        last_good = %broken.last_good.map_or("none".to_owned(), |h| h.to_string()),
        "chain broken: {}; nothing past the last good event was shipped",
        broken.reason()
    );
    if cfg.on_break == OnBreak::Wait {
        tracing::warn!("the chain broke: serving metrics and waiting for an operator (SIGTERM to exit)");
        // Alive, and still reading the database's head: the lag must grow
        // while the runtime writes past the break, never read 0.
        while !stop.load(Ordering::Relaxed) {
            health.turned();
            metrics::database_head(fresh.look());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    Outcome::Broken(broken)
}
