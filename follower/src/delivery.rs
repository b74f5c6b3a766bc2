//! Delivering batches: the sink call (retried while the failure is
//! transient), then the cursor, then the announcement the anchoring task
//! listens to — always in that order, one batch at a time.
//!
//! [`Pipeline`] runs this on its own thread with at most one batch in
//! flight, so the follow loop reads, checks and encodes the next batch
//! while the current one is written: the write and the CPU work overlap.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

use chainship_chain::Head;
use chainship_sinks::{Batch, ErrorKind, Sink, SinkError};
use tokio::sync::watch;

use crate::cursor::{CursorLock, FileCursor};
use crate::error::FollowError;
use crate::hash_feed::HashFeed;
use crate::health::Health;
use crate::metrics;
use crate::retry::{RetryEnd, RetryPolicy, retry_transient};

/// Everything needed to deliver a batch and record it.
pub struct Delivery {
    sink: Box<dyn Sink>,
    cursor: FileCursor,
    rt: tokio::runtime::Handle,
    stop: Arc<AtomicBool>,
    health: Arc<Health>,
    retry: RetryPolicy,
    announce: watch::Sender<Option<Head>>,
    /// Where delivered hashes go for the transparency log, when it is on.
    feed: Option<Arc<HashFeed>>,
    /// The cursor's lock this process holds, reasserted before each delivery.
    lock: Option<Arc<std::sync::Mutex<CursorLock>>>,
}

impl Delivery {
    /// Sink calls run on `rt`; `stop` ends retries; `health` hears of failures.
    pub fn new(
        sink: Box<dyn Sink>,
        cursor: FileCursor,
        rt: tokio::runtime::Handle,
        stop: Arc<AtomicBool>,
        health: Arc<Health>,
        retry: RetryPolicy,
    ) -> Self {
        let (announce, _) = watch::channel(None);
        Delivery {
            sink,
            cursor,
            rt,
            stop,
            health,
            retry,
            announce,
            feed: None,
            lock: None,
        }
    }

    pub fn cursor(&self) -> &FileCursor {
        &self.cursor
    }

    pub fn sink_name(&self) -> String {
        self.sink.describe()
    }

    pub fn sink_reads_back(&self) -> bool {
        self.sink.reads_back()
    }

    /// Every head delivered and recorded, newest first.
    pub fn subscribe(&self) -> watch::Receiver<Option<Head>> {
        self.announce.subscribe()
    }

    /// Delivers only while the cursor's lock is still this process's.
    pub fn guard_with(&mut self, lock: Arc<std::sync::Mutex<CursorLock>>) {
        self.lock = Some(lock);
    }

    /// Hands every delivered batch's hashes to `feed` (before its head is announced).
    pub fn feed_hashes(&mut self, feed: Arc<HashFeed>) {
        self.feed = Some(feed);
    }

    /// Tells the listeners (the anchoring task) where delivery stands.
    pub fn announce(&self, head: Option<Head>) {
        self.health.delivered(head.map_or(0, |h| h.seq));
        let _ = self.announce.send(head);
    }

    /// Delivers `batch`, then stores its last head in the cursor and announces it.
    pub fn deliver(&mut self, batch: &mut Batch) -> Result<(), FollowError> {
        let Some(head) = batch.last_head() else { return Ok(()) };
        // A batch compressed as it was built gets its last bytes and trailer.
        batch
            .seal()
            .map_err(|e| FollowError::setup(format!("compressing the batch ending at seq {}: {e}", head.seq)))?;
        let batch = &*batch;
        if let Some(lock) = &self.lock
            && let Err(e) = lock.lock().unwrap_or_else(|p| p.into_inner()).reassert()
        {
            self.health.fatal(&e.to_string());
            return Err(e.into());
        }
        self.with_retry("delivering a batch", |sink, rt| rt.block_on(sink.deliver(batch)))?;
        self.health.sink_ok();
        if let Err(e) = self.cursor.store(head) {
            // Delivered but not recorded: stop now (a restart reads the sink back), never go quiet.
            tracing::error!(%head, error = %e, "the batch was delivered but the cursor could not be written; stopping");
            self.health.fatal(&e.to_string());
            return Err(e.into());
        }
        metrics::delivered(batch.len(), batch.bytes(), head.seq);
        tracing::debug!(first = batch.first_seq(), last = %head, events = batch.len(), "delivered");
        if let Some(feed) = &self.feed {
            feed.push(batch.records.iter().map(|r| (r.seq, r.hash)));
        }
        self.health.delivered(head.seq);
        let _ = self.announce.send(Some(head));
        Ok(())
    }

    /// Calls the sink until it succeeds, retrying transient failures.
    pub fn with_retry<T>(
        &mut self,
        what: &str,
        mut attempt: impl FnMut(&mut Box<dyn Sink>, &tokio::runtime::Handle) -> Result<T, SinkError>,
    ) -> Result<T, FollowError> {
        let health = Arc::clone(&self.health);
        let sink_name = self.sink.describe();
        let (sink, rt) = (&mut self.sink, &self.rt);
        let result = retry_transient(
            &self.retry,
            &self.stop,
            |e, n| {
                health.sink_failed(&e.message);
                if e.kind == ErrorKind::Transient {
                    tracing::warn!(sink = %sink_name, attempt = n, error = %e, "{what} failed; retrying");
                }
            },
            || attempt(sink, rt),
        );
        result.map_err(|end| match end {
            RetryEnd::Fatal(e) => e.into(),
            RetryEnd::GaveUp(e) => FollowError::setup(format!("{what}: gave up retrying: {e}")),
            RetryEnd::Interrupted(e) => FollowError::Interrupted(format!(
                "shutdown while the sink was still failing at {what} ({e}); the batch was not acknowledged and will be sent again on restart"
            )),
        })
    }
}

/// A delivery thread with at most one batch in flight.
pub struct Pipeline {
    to_worker: Option<SyncSender<Batch>>,
    from_worker: Receiver<Result<Batch, FollowError>>,
    in_flight: bool,
    /// An empty batch handed back by a delivery that [`Pipeline::check`] saw finish.
    spare: Option<Batch>,
    worker: Option<JoinHandle<()>>,
}

impl Pipeline {
    pub fn spawn(mut delivery: Delivery) -> Pipeline {
        let (to_worker, batches) = sync_channel::<Batch>(0);
        let (acks, from_worker) = sync_channel(1);
        let worker = std::thread::Builder::new()
            .name("delivery".into())
            .spawn(move || {
                for mut batch in batches {
                    let result = delivery.deliver(&mut batch);
                    let failed = result.is_err();
                    batch.clear();
                    if acks.send(result.map(|()| batch)).is_err() || failed {
                        return;
                    }
                }
            })
            .expect("spawning the delivery thread");
        Pipeline {
            to_worker: Some(to_worker),
            from_worker,
            in_flight: false,
            spare: None,
            worker: Some(worker),
        }
    }

    /// Hands `batch` over for delivery once the previous one is acknowledged,
    /// and returns an empty batch to fill next.
    pub fn submit(&mut self, batch: Batch) -> Result<Batch, FollowError> {
        let spare = if self.in_flight {
            self.wait()?
        } else {
            self.spare.take().unwrap_or_else(|| Batch::like(&batch))
        };
        let sent = self.to_worker.as_ref().is_some_and(|tx| tx.send(batch).is_ok());
        if !sent {
            return Err(FollowError::setup("the delivery thread has stopped"));
        }
        self.in_flight = true;
        Ok(spare)
    }

    /// Whether a delivery is in flight (not yet seen acknowledged).
    pub fn busy(&self) -> bool {
        self.in_flight
    }

    /// Without waiting: the error of a delivery that has failed, so an idle
    /// follower stops at once instead of only at its next batch.
    pub fn check(&mut self) -> Result<(), FollowError> {
        if !self.in_flight {
            return Ok(());
        }
        match self.from_worker.try_recv() {
            Ok(result) => {
                self.in_flight = false;
                self.spare = Some(result?);
                Ok(())
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => Ok(()),
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.in_flight = false;
                Err(FollowError::setup("the delivery thread has stopped"))
            }
        }
    }

    /// Waits until nothing is in flight, returning the last delivery's error if any.
    pub fn drain(&mut self) -> Result<(), FollowError> {
        if self.in_flight {
            self.wait()?;
        }
        Ok(())
    }

    fn wait(&mut self) -> Result<Batch, FollowError> {
        self.in_flight = false;
        self.from_worker
            .recv()
            .unwrap_or_else(|_| Err(FollowError::setup("the delivery thread has stopped")))
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        self.to_worker = None; // ends the worker's loop
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
    }
}
