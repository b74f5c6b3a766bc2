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

use crate::db::{DbError, EventDb};
use crate::event::EventBatch;

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
}

impl ReadPlan {
    pub fn new(after: u64, through: Option<u64>) -> Self {
        ReadPlan {
            after,
            through,
            page_events: 8192,
            page_bytes: 4 << 20,
            tail: None,
        }
    }
}

/// A reader thread handing over full pages in seq order.
pub struct ReadAhead {
    pages: Receiver<Result<EventBatch, DbError>>,
    spares: Sender<EventBatch>,
    page_bytes: usize,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl ReadAhead {
    pub fn spawn(db: EventDb, plan: ReadPlan) -> ReadAhead {
        let (page_tx, pages) = bounded(2);
        let (spares, spare_rx) = bounded::<EventBatch>(4);
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("chain-reader".into())
            .spawn(move || read_pages(&db, plan, &page_tx, &spare_rx, &thread_stop))
            .expect("spawning the reader thread");
        ReadAhead {
            pages,
            spares,
            page_bytes: plan.page_bytes,
            stop,
            thread: Some(thread),
        }
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
    pub fn give_back(&self, mut page: EventBatch) {
        page.clear();
        page.shrink_to(self.page_bytes * 2);
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

fn read_pages(
    db: &EventDb,
    plan: ReadPlan,
    pages: &Sender<Result<EventBatch, DbError>>,
    spares: &Receiver<EventBatch>,
    stop: &AtomicBool,
) {
    let mut after = plan.after;
    loop {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        if plan.through.is_some_and(|t| after >= t) {
            return;
        }
        // Taken before the read, so a commit landing just after it is seen.
        let version = match plan.tail {
            Some(_) => match db.data_version() {
                Ok(v) => v,
                Err(e) => {
                    let _ = pages.send(Err(e));
                    return;
                }
            },
            None => 0,
        };
        let mut page = spares.try_recv().unwrap_or_default();
        let result = db.read_page(after, plan.page_events, plan.page_bytes, &mut page);
        if let Some(through) = plan.through {
            let keep = page.iter().take_while(|e| e.seq <= through).count();
            page.truncate(keep);
        }
        let read_any = !page.is_empty();
        if let Some(last) = page.last() {
            after = last.seq.max(after);
        }
        if read_any && pages.send(Ok(page)).is_err() {
            return;
        }
        match result {
            Err(e) => {
                let _ = pages.send(Err(e));
                return;
            }
            Ok(_) if !read_any => match plan.tail {
                None => return,
                Some(poll) => {
                    if let Err(e) = wait_for_commit(db, poll, version, stop) {
                        let _ = pages.send(Err(e));
                        return;
                    }
                }
            },
            Ok(_) => {}
        }
    }
}

/// Sleeps in `poll` steps until another connection commits (the cheap
/// `PRAGMA data_version` moves from `seen`) or `stop` is set. Every tenth
/// step it returns anyway and reads again: a cheap guard, not a need.
fn wait_for_commit(db: &EventDb, poll: Duration, seen: i64, stop: &AtomicBool) -> Result<(), DbError> {
    for _ in 0..10 {
        std::thread::sleep(poll);
        if stop.load(Ordering::Relaxed) || db.data_version()? != seen {
            return Ok(());
        }
    }
    Ok(())
}
