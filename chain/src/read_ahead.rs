//! Reading pages on a second thread while the caller checks the previous
//! one, so reading (SQLite) and hashing (SHA-256) overlap on two cores.
//!
//! Pages travel in a small bounded channel and come back to be refilled,
//! so memory stays at a few pages whatever the table's size.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use std::path::Path;

use crate::change_watch::ChangeWatch;
use crate::db::{DbError, EventDb, OpenOptions};
use crate::event::EventBatch;
use crate::hash::HexHash;

/// What to read: the events with seq in `(after, through]`.
#[derive(Clone, Copy, Debug)]
pub struct ReadPlan {
    pub after: u64,
    /// Stop at this seq (inclusive); `None` reads until a page comes back empty.
    pub through: Option<u64>,
    pub page_events: usize,
    pub page_bytes: usize,
    /// Keep reading as new events are committed: when a page comes back
    /// empty, wait this long (or until `PRAGMA data_version` moves) and
    /// try again, instead of ending.
    pub tail: Option<Duration>,
    /// The stored hash of event `after`, when known: a tailing reader that
    /// reopens a replaced file checks the new file still holds it.
    pub after_hash: Option<HexHash>,
}

impl ReadPlan {
    pub fn new(after: u64, through: Option<u64>) -> Self {
        ReadPlan {
            after,
            through,
            page_events: 8192,
            page_bytes: 4 << 20,
            tail: None,
            after_hash: None,
        }
    }
}

/// A reader thread handing over full pages in seq order.
pub struct ReadAhead {
    pages: Receiver<Result<EventBatch, DbError>>,
    spares: Sender<EventBatch>,
    page_bytes: usize,
    stop: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    pub fn spawn(db: EventDb, plan: ReadPlan) -> ReadAhead {
        let (page_tx, pages) = bounded(2);
        let (spares, spare_rx) = bounded::<EventBatch>(4);
        let stop = Arc::new(AtomicBool::new(false));
        let reopen = Arc::new(AtomicBool::new(false));
        let flags = Flags {
            stop: Arc::clone(&stop),
            reopen: Arc::clone(&reopen),
        };
        let thread = std::thread::Builder::new()
            .name("chain-reader".into())
            .spawn(move || read_pages(db, plan, &page_tx, &spare_rx, &flags))
            .expect("spawning the reader thread");
        ReadAhead {
            pages,
            spares,
            page_bytes: plan.page_bytes,
            stop,
            reopen,
            thread: Some(thread),
        }
    }

    /// Asks a tailing reader to open the database afresh before its next
    /// read (when a fresh look sees events this reader does not).
    pub fn request_reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }

    /// The next page; `None` once everything planned was read.
    pub fn next_page(&self) -> Option<Result<EventBatch, DbError>> {
        self.pages.recv().ok()
    }

    /// The next page if one comes within `timeout`.
    pub fn next_page_timeout(&self, timeout: Duration) -> Waited {
        match self.pages.recv_timeout(timeout) {
            Ok(page) => Waited::Page(page),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => Waited::Nothing,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => Waited::Finished,
        }
    }

    /// Returns a page for reuse. A page grown by a huge event gives its
    /// memory back first, so one 64 MiB payload does not stay resident.
    pub fn give_back(&self, page: EventBatch) {
        self.recycler().give_back(page);
    }

    /// A handle that gives pages back from another thread.
    pub fn recycler(&self) -> Recycler {
        Recycler {
            spares: self.spares.clone(),
            page_bytes: self.page_bytes,
        }
    }
}

/// Gives pages back to a [`ReadAhead`] from whichever thread finished with them.
#[derive(Clone)]
pub struct Recycler {
    spares: Sender<EventBatch>,
    page_bytes: usize,
}

impl Recycler {
    pub fn give_back(&self, mut page: EventBatch) {
        page.clear();
        page.shrink_to(self.page_bytes);
        let _ = self.spares.try_send(page);
    }
}

/// What [`ReadAhead::next_page_timeout`] got.
pub enum Waited {
    Page(Result<EventBatch, DbError>),
    /// Nothing yet (tailing a quiet database).
    Nothing,
    /// Everything planned was read.
    Finished,
}

impl Drop for ReadAhead {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Dropping the receiver makes the thread's next send fail, which ends it.
        let (_, closed) = bounded(0);
        self.pages = closed;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct Flags {
    stop: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
}

fn read_pages(
    db: EventDb,
    plan: ReadPlan,
    pages: &Sender<Result<EventBatch, DbError>>,
    spares: &Receiver<EventBatch>,
    flags: &Flags,
) {
    let (path, options) = (db.path().to_owned(), db.options().clone());
    // A tailing reader wakes when the database's files are written.
    let watch = plan.tail.and_then(|_| ChangeWatch::start(&path));
    let mut db = Some(db);
    let mut after = plan.after;
    let mut after_hash = plan.after_hash;
    let mut troubles = 0u32;
    loop {
        if flags.stop.load(Ordering::Relaxed) {
            return;
        }
        if plan.through.is_some_and(|t| after >= t) {
            return;
        }
        let stale = db.as_ref().is_none_or(|d| d.files_replaced());
        if plan.tail.is_some() && (flags.reopen.swap(false, Ordering::Relaxed) || stale) {
            // Close first: SQLite shares one -shm mapping per database file
            // within a process, so a new connection opened while the old one
            // is open would attach to the old (deleted) -shm and read garbage.
            db = None;
            match reopen(&path, &options, after, after_hash.as_ref()) {
                Ok(fresh) => db = Some(fresh),
                Err(e) if passing(&e, &mut troubles) => {
                    flags.reopen.store(true, Ordering::Relaxed);
                    continue;
                }
                Err(e) => {
                    let _ = pages.send(Err(e));
                    return;
                }
            }
        }
        let Some(conn) = db.as_ref() else { return };
        // Both taken before the read, so a commit landing just after it is seen.
        let generation = watch.as_ref().map_or(0, ChangeWatch::generation);
        let version = match plan.tail {
            Some(_) => match conn.data_version() {
                Ok(v) => v,
                Err(e) if passing(&e, &mut troubles) => {
                    flags.reopen.store(true, Ordering::Relaxed);
                    continue;
                }
                Err(e) => {
                    let _ = pages.send(Err(e));
                    return;
                }
            },
            None => 0,
        };
        let mut page = spares.try_recv().unwrap_or_default();
        let result = conn.read_page(after, plan.page_events, plan.page_bytes, &mut page);
        // A writer started under an immutable read: what the page holds may
        // be torn, so none of it is used; reopen and read it again.
        if let Err(e @ DbError::WriterStarted(_)) = &result
            && plan.tail.is_some()
            && passing(e, &mut troubles)
        {
            page.clear();
            flags.reopen.store(true, Ordering::Relaxed);
            continue;
        }
        if let Some(through) = plan.through {
            let keep = page.iter().take_while(|e| e.seq <= through).count();
            page.truncate(keep);
        }
        let read_any = !page.is_empty();
        if let Some(last) = page.last() {
            after = last.seq.max(after);
            after_hash = crate::Head::from_stored(last.seq, last.hash).map(|h| h.hash);
        }
        if read_any && pages.send(Ok(page)).is_err() {
            return;
        }
        match result {
            // Nothing was read past the error: reopen and read it again.
            Err(e) if plan.tail.is_some() && !read_any && passing(&e, &mut troubles) => {
                flags.reopen.store(true, Ordering::Relaxed);
            }
            Err(e) => {
                let _ = pages.send(Err(e));
                return;
            }
            Ok(_) if read_any => troubles = 0,
            Ok(_) => match plan.tail {
                None => return,
                Some(poll) => match wait_for_commit(conn, poll, version, flags, watch.as_ref(), generation) {
                    Ok(()) => {}
                    Err(e) if passing(&e, &mut troubles) => flags.reopen.store(true, Ordering::Relaxed),
                    Err(e) => {
                        let _ = pages.send(Err(e));
                        return;
                    }
                },
            },
        }
    }
}

/// Whether a tailing reader should reopen and try again after `e`.
///
/// SQLite's "not now" ([`DbError::Busy`], already waited out for
/// [`crate::db::BUSY_PATIENCE`] by the read itself) and a writer that started
/// under an immutable read always pass: a live writer is the normal state of
/// a followed database, however long it holds it. While a writer restarts,
/// its new -wal and -shm are being set up, and a connection opened in that
/// moment can read them half made ("malformed"): a few tries a fifth of a
/// second apart ride that out; damage that stays is reported.
fn passing(e: &DbError, troubles: &mut u32) -> bool {
    if matches!(e, DbError::Busy { .. } | DbError::WriterStarted(_)) {
        if matches!(e, DbError::Busy { .. }) {
            tracing::warn!(error = %e, "the database stays busy; still retrying");
        } else {
            tracing::info!(error = %e, "reopening");
        }
        std::thread::sleep(Duration::from_millis(20));
        return true;
    }
    let transient = matches!(e, DbError::Read { .. } | DbError::Open { .. } | DbError::NotSqlite(_));
    if !transient || *troubles >= 10 {
        return false;
    }
    *troubles += 1;
    tracing::debug!(error = %e, attempt = *troubles, "reading the database failed while tailing; reopening");
    std::thread::sleep(Duration::from_millis(200));
    true
}

/// Opens the database afresh and checks it still holds event `after` as
/// read before: a file swapped for an older or rewritten copy must stop the
/// reader, not silently become the chain it follows.
fn reopen(path: &Path, options: &OpenOptions, after: u64, after_hash: Option<&HexHash>) -> Result<EventDb, DbError> {
    let fresh = EventDb::open(path, options)?;
    tracing::info!(db = %path.display(), "the database or its WAL was replaced (a writer restarted?); reopened");
    if let (Some(expected), true) = (after_hash, after > 0) {
        let found = fresh.hash_at(after)?;
        if found.as_deref() != Some(&expected[..]) {
            return Err(DbError::Replaced {
                path: path.to_owned(),
                seq: after,
                found: found.map_or("no such event".to_owned(), |h| {
                    format!("hash {}", String::from_utf8_lossy(&h))
                }),
            });
        }
    }
    Ok(fresh)
}

/// Waits until another connection commits (the cheap `PRAGMA
/// data_version` moves from `seen`), the files are replaced, a reopen is
/// asked for, or `stop` is set. With a [`ChangeWatch`] each step ends as
/// soon as the files are written; without one (or when no event comes) a
/// step is `poll`. Every tenth step it returns anyway and reads again: a
/// cheap guard, not a need.
fn wait_for_commit(
    db: &EventDb,
    poll: Duration,
    seen: i64,
    flags: &Flags,
    watch: Option<&ChangeWatch>,
    mut generation: u64,
) -> Result<(), DbError> {
    for _ in 0..10 {
        match watch {
            Some(w) => generation = w.wait_past(generation, poll),
            None => std::thread::sleep(poll),
        }
        if flags.stop.load(Ordering::Relaxed)
            || flags.reopen.load(Ordering::Relaxed)
            || db.files_replaced()
            || db.data_version()? != seen
        {
            return Ok(());
        }
    }
    Ok(())
}
