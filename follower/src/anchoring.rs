//! Publishing delivered heads to the anchor store, off the export path.
//!
//! The follower announces every acknowledged head on a `watch` channel;
//! this task signs and publishes the newest one: after every batch, or at
//! most once per `interval` when one is set (so a follower tailing a busy
//! runtime in small batches need not write a head file per batch), and at
//! once when the follower finishes. While the store is down it
//! retries with backoff and, when it comes back, publishes whatever head is
//! newest by then: an outage delays anchoring but never stops the export,
//! and no head is lost, because the newest delivered head is always also
//! in the cursor file and is published again after a restart.
//! With each head goes its checkpoint, the tiles it needs first
//! ([`TreeLog`]). The last published head is kept in `<cursor>.anchored` so the lag is
//! known across restarts.
//!
//! `chainship_anchor_seconds_since_publish` is kept by a task of its own,
//! once a second, so it grows while publishing fails or hangs. It counts
//! from this process's last successful publish; before the first one, from
//! the modification time of `<cursor>.anchored` (when that file records a
//! head and its time is not in the future), else from the follower's start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chainship_anchor::{AnchorStore, Signer, highest_verified_head, publish_head, publish_heartbeat};
use chainship_chain::Head;
use metrics::{counter, gauge};
use tokio::sync::watch;

use crate::cursor::{read_head_file, write_atomically};
use crate::health::Health;
use crate::metrics as m;
use crate::tree_log::TreeLog;

pub struct Anchoring {
    pub store: Arc<AnchorStore>,
    pub keys: Arc<Vec<Arc<dyn Signer>>>,
    pub origin: String,
    /// `<cursor>.anchored`: the last head published.
    pub anchored_file: PathBuf,
    pub max_delay: Duration,
    /// The least time between two published heads (zero: after every batch).
    pub interval: Duration,
    /// While idle, publish the last head again at least this often (zero: never).
    pub heartbeat: Duration,
    pub health: Arc<Health>,
    /// Set when the store contradicts a delivered head: the follower stops.
    pub stop: Arc<std::sync::atomic::AtomicBool>,
    /// The transparency log published with each head (`None`: heads only).
    pub tree_log: Option<TreeLog>,
}

/// Follows what the task has published.
pub struct AnchoringHandle {
    published: watch::Receiver<u64>,
    failure: Arc<std::sync::OnceLock<String>>,
    crashed: Arc<std::sync::OnceLock<String>>,
    last_error: LastError,
}

/// The store's last error, cleared by the next success: what `--once`
/// reports when the newest head could not be published.
type LastError = Arc<std::sync::Mutex<Option<chainship_chain::Error>>>;

impl AnchoringHandle {
    /// Waits until a head at or past `seq` is published, at most `limit`.
    pub async fn wait_for(&mut self, seq: u64, limit: Duration) -> bool {
        tokio::time::timeout(limit, self.published.wait_for(|p| *p >= seq))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    pub fn published_seq(&self) -> u64 {
        *self.published.borrow()
    }

    /// The integrity finding that stopped anchoring (and the follower), if any.
    pub fn failure(&self) -> Option<String> {
        self.failure.get().cloned()
    }

    /// Why the anchoring task ended on an internal error (a setup fault, not a finding), if it did.
    pub fn crashed(&self) -> Option<String> {
        self.crashed.get().cloned()
    }

    /// Why the last attempt to publish failed, if it did.
    pub fn last_error(&self) -> Option<chainship_chain::Error> {
        self.last_error.lock().ok().and_then(|e| e.clone())
    }
}

impl Anchoring {
    pub fn spawn(self, rt: &tokio::runtime::Handle, delivered: watch::Receiver<Option<Head>>) -> AnchoringHandle {
        self.health.expect_anchoring(self.interval);
        let recorded = read_head_file(&self.anchored_file).ok().flatten();
        let start = recorded.map_or(0, |h| h.seq);
        // Nothing counts as published until the store's own heads are read.
        let (tx, published) = watch::channel(0);
        // Until this process publishes, the age counts from the recorded
        // publish, else from now (the follower's start).
        let since = recorded
            .and_then(|_| recorded_at(&self.anchored_file))
            .unwrap_or_else(Instant::now);
        let (published_at, since) = watch::channel(since);
        rt.spawn(report_age(since));
        let start_head = recorded.filter(|h| h.seq == start);
        let failure = Arc::new(std::sync::OnceLock::new());
        let last_error = LastError::default();
        let errors = Arc::clone(&last_error);
        let (health, stop) = (Arc::clone(&self.health), Arc::clone(&self.stop));
        let crashed = Arc::new(std::sync::OnceLock::new());
        let crash = Arc::clone(&crashed);
        let task = self.run(delivered, tx, published_at, start_head, Arc::clone(&failure), errors);
        // A panic below (a library's, e.g. a TLS client with no trust store)
        // must stop the follower loudly: anchoring that silently ended would
        // leave the export running with nothing signed.
        rt.spawn(async move {
            use futures::FutureExt;
            if let Err(panic) = std::panic::AssertUnwindSafe(task).catch_unwind().await {
                let why = panic_text(panic.as_ref());
                let message = format!(
                    "anchoring stopped on an internal error ({why}); no head is signed until the follower restarts"
                );
                tracing::error!("{message}");
                health.fatal(&message);
                let _ = crash.set(message);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
            }
        });
        AnchoringHandle {
            published,
            failure,
            crashed,
            last_error,
        }
    }

    async fn run(
        mut self,
        mut delivered: watch::Receiver<Option<Head>>,
        published: watch::Sender<u64>,
        published_at: watch::Sender<Instant>,
        start_head: Option<Head>,
        failure: Arc<std::sync::OnceLock<String>>,
        last_error: LastError,
    ) {
        let remember = |e: Option<&chainship_chain::Error>| {
            if let Ok(mut slot) = last_error.lock() {
                *slot = e.cloned();
            }
        };
        // A head below one already kept would read as the log going backwards
        // (another follower of this origin, e.g. to another sink, got further):
        // publish only past the highest kept head. Only heads this follower's
        // keys signed count: a planted or torn file must not stop publishing.
        let verifiers: Vec<_> = chainship_anchor::signer::verifiers(&self.keys);
        let kept = match highest_verified_head(self.store.as_ref(), &self.origin, &verifiers).await {
            Ok(kept) => kept,
            Err(e) => {
                remember(Some(&e));
                tracing::warn!(store = %self.store.describe(), error = %e, "cannot list the kept heads; publishing from the last recorded one");
                None
            }
        };
        // Only the store says what it keeps: `<cursor>.anchored` may name a head
        // published to another store (the follower was pointed at a new one).
        let mut last = kept.map_or(0, |h| h.seq);
        // The highest delivered head below `last` shown to be on the kept tree.
        let mut covered_checked = 0;
        // The head a heartbeat re-publishes: the last one this follower published.
        let mut last_head = start_head.filter(|h| h.seq == last);
        let mut next_beat = Instant::now() + self.heartbeat;
        // Waiters learn that kept heads cover a delivered one only after the
        // check below has compared them (see the loop's first lines).
        gauge!(m::ANCHORED_SEQ).set(last as f64);
        let new_backoff = || crate::retry::background_backoff(self.max_delay);
        let mut backoff = new_backoff();
        let mut last_published: Option<Instant> = None;
        // Once the follower is done, the newest head goes out without waiting for the interval.
        let mut finishing = false;
        // Since when publishing has failed, to say so when it recovers.
        let mut failing_since: Option<Instant> = None;
        loop {
            let newest = *delivered.borrow_and_update();
            // A head this follower's key signed for the seq just delivered, with
            // another hash: another chain under this origin and key. Stop.
            if let (Some(k), Some(h)) = (kept, newest)
                && h.seq == k.seq
                && h.hash != k.hash
            {
                let message = format!(
                    "heads-disagree: {} already keeps head {k} for origin {:?}, signed by this follower's key, but the delivered head is {h}",
                    self.store.describe(),
                    self.origin
                );
                tracing::error!("{message}; stopping");
                self.stop_on(&failure, message);
                return;
            }
            // No `<cursor>.anchored` (lost, or never written): the store's own
            // highest head, once delivered here too, is what heartbeats repeat.
            if last_head.is_none() && newest.is_some() && newest == kept {
                last_head = kept;
            }
            // Below the highest kept head (another follower of this origin got
            // further): nothing to publish, but this database's tree must be a
            // prefix of the kept one, or it is another history under this origin.
            if let (Some(head), Some(log)) = (newest.filter(|h| h.seq <= last), self.tree_log.as_mut())
                && head.seq > covered_checked
            {
                match log.prepare(head).await {
                    Ok(()) => covered_checked = head.seq,
                    Err(e) if e.kind == chainship_chain::ErrorKind::Integrity => {
                        tracing::error!(store = %self.store.describe(), %head, error = %e, "the kept checkpoints are another history than this database's; stopping");
                        self.stop_on(&failure, e.message);
                        return;
                    }
                    Err(e) => tracing::debug!(error = %e, "comparing with the kept tree failed; trying again"),
                }
            }
            // Covered and compared: the newest delivered head, as far as kept heads reach.
            let covered = newest.map_or(0, |h| h.seq.min(last));
            self.health.anchored(covered);
            published.send_if_modified(|p| {
                let raise = *p < covered;
                if raise {
                    *p = covered;
                }
                raise
            });
            if let Some(head) = newest.filter(|h| h.seq > last) {
                let wait = last_published.map_or(Duration::ZERO, |at| self.interval.saturating_sub(at.elapsed()));
                if !finishing && !wait.is_zero() {
                    gauge!(m::ANCHOR_LAG).set(head.seq.saturating_sub(last) as f64);
                    // The tree keeps up while the head waits; a failure here
                    // is met again, and reported, when the head is published.
                    if let Some(log) = self.tree_log.as_mut() {
                        match log.prepare(head).await {
                            Ok(()) => {}
                            Err(e) if e.kind == chainship_chain::ErrorKind::Integrity => {
                                tracing::error!(store = %self.store.describe(), %head, error = %e, "the tree contradicts the anchor store; stopping");
                                self.stop_on(&failure, e.message);
                                return;
                            }
                            Err(e) => tracing::debug!(error = %e, "extending the tree between heads failed"),
                        }
                    }
                    tokio::select! {
                        _ = tokio::time::sleep(wait) => {}
                        changed = delivered.changed() => finishing = changed.is_err(),
                    }
                    continue;
                }
                let store = self.store.describe();
                let outcome = said_while_slow(&store, head, async {
                    // The checkpoint first: a head is never kept without its Merkle companion.
                    if let Some(log) = self.tree_log.as_mut() {
                        log.publish(head).await?;
                    }
                    let with_checkpoint = self.tree_log.is_some();
                    // The highest head kept before it (0: none known, say nothing).
                    let previous = Some(last);
                    publish_head(
                        self.store.as_ref(),
                        &self.keys,
                        &self.origin,
                        head,
                        with_checkpoint,
                        previous,
                    )
                    .await
                })
                .await;
                match outcome {
                    Ok(()) => {
                        if let Some(log) = self.tree_log.as_mut() {
                            log.head_published(head);
                        }
                        if let Some(failed_since) = failing_since.take() {
                            tracing::info!(
                                store = %self.store.describe(),
                                %head,
                                after_s = failed_since.elapsed().as_secs(),
                                "the anchor store is back: head published after {:.1}s of failures",
                                failed_since.elapsed().as_secs_f64()
                            );
                        }
                        last = head.seq;
                        last_head = Some(head);
                        let now = Instant::now();
                        next_beat = now + self.heartbeat;
                        last_published = Some(now);
                        published_at.send_replace(now);
                        backoff = new_backoff();
                        let _ = published.send(last);
                        if let Err(e) = write_atomically(&self.anchored_file, format!("{head}\n").as_bytes()) {
                            tracing::warn!(file = %self.anchored_file.display(), error = %e, "cannot record the last anchored head");
                        }
                        gauge!(m::ANCHORED_SEQ).set(last as f64);
                        gauge!(m::ANCHOR_LAG).set(0.0);
                        self.health.anchor_ok();
                        self.health.anchored(last);
                        remember(None);
                        tracing::debug!(%head, store = %self.store.describe(), "head published");
                        continue;
                    }
                    Err(e) if e.kind == chainship_chain::ErrorKind::Integrity => {
                        // The store keeps another head for this seq: retrying cannot
                        // change that, and going on would publish past a contradiction.
                        counter!(m::ANCHOR_ERRORS).increment(1);
                        tracing::error!(store = %self.store.describe(), %head, error = %e, "the anchor store contradicts a delivered head; stopping");
                        self.stop_on(&failure, e.message);
                        return;
                    }
                    Err(e) => {
                        failing_since.get_or_insert_with(Instant::now);
                        remember(Some(&e));
                        counter!(m::ANCHOR_ERRORS).increment(1);
                        gauge!(m::ANCHOR_LAG).set(head.seq.saturating_sub(last) as f64);
                        self.health.anchor_failed(&e.message);
                        let delay = if e.is_transient() {
                            backoff.next().unwrap_or(self.max_delay)
                        } else {
                            self.max_delay
                        };
                        tracing::warn!(
                            store = %self.store.describe(),
                            head = %head,
                            last_anchored = last,
                            lag_events = head.seq.saturating_sub(last),
                            retry_in_ms = delay.as_millis() as u64,
                            error = %e,
                            "publishing the head failed; export goes on, the newest head is published when the store is back"
                        );
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                }
            }
            let beat = last_head.filter(|_| !self.heartbeat.is_zero());
            tokio::select! {
                changed = delivered.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep_until(next_beat.into()), if beat.is_some() => {
                    let head = beat.expect("guarded by the select condition");
                    next_beat = self.heartbeat_once(head, &published_at).await;
                }
            }
        }
    }

    /// An integrity failure: unhealthy, the follower told to stop, and the
    /// reason kept for its exit (1).
    fn stop_on(&self, failure: &std::sync::OnceLock<String>, message: String) {
        self.health.fatal(&message);
        let _ = failure.set(message);
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Publishes `head` again while nothing new arrives, so `anchor verify
    /// --max-age` tells a quiet runtime from a frozen follower. Returns
    /// when the next heartbeat is due.
    async fn heartbeat_once(&self, head: Head, published_at: &watch::Sender<Instant>) -> Instant {
        let publishing = publish_heartbeat(self.store.as_ref(), &self.keys, &self.origin, head);
        match said_while_slow(&self.store.describe(), head, publishing).await {
            Ok(()) => {
                let now = Instant::now();
                published_at.send_replace(now);
                // Its time, for the age after a restart (see `recorded_at`).
                let _ = write_atomically(&self.anchored_file, format!("{head}\n").as_bytes());
                self.health.anchor_ok();
                tracing::debug!(%head, "heartbeat published");
                now + self.heartbeat
            }
            Err(e) => {
                counter!(m::ANCHOR_ERRORS).increment(1);
                self.health.anchor_failed(&e.message);
                tracing::warn!(store = %self.store.describe(), %head, error = %e, "publishing a heartbeat failed; retrying");
                Instant::now() + self.max_delay.min(self.heartbeat)
            }
        }
    }
}

/// How long a publication may take before the log says the store is not
/// answering (a store that hangs returns no error to log).
const SLOW_PUBLISH: Duration = Duration::from_secs(5);

/// Runs a publication to `store`, saying in the log every [`SLOW_PUBLISH`]
/// that it has not finished, and once it has: a frozen store shows in the
/// log, not only in `/readyz`.
async fn said_while_slow<T>(store: &str, head: Head, publishing: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    tokio::pin!(publishing);
    loop {
        tokio::select! {
            out = &mut publishing => {
                if started.elapsed() >= SLOW_PUBLISH {
                    tracing::info!(store, %head, after_s = started.elapsed().as_secs(), "the anchor store answered after {:.1}s", started.elapsed().as_secs_f64());
                }
                return out;
            }
            _ = tokio::time::sleep(SLOW_PUBLISH) => {
                tracing::warn!(
                    store,
                    %head,
                    waited_s = started.elapsed().as_secs(),
                    "the anchor store has not answered for {} s while publishing a head (frozen or unreachable?); export goes on, the newest head is published when it answers",
                    started.elapsed().as_secs()
                );
            }
        }
    }
}

/// Sets the age gauge once a second from the last publish time, whatever
/// the publishing loop is doing; ends with that loop (its sender dropped).
async fn report_age(mut since: watch::Receiver<Instant>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        gauge!(m::ANCHOR_AGE).set(since.borrow_and_update().elapsed().as_secs_f64());
        tokio::select! {
            _ = tick.tick() => {}
            changed = since.changed() => if changed.is_err() { return },
        }
    }
}

/// When the head in `<cursor>.anchored` was published, as its modification
/// time; None when that time is unknown or in the future (a clock that
/// jumped, a copied file), which would make the age read too small.
fn recorded_at(file: &Path) -> Option<Instant> {
    let modified = std::fs::metadata(file).and_then(|m| m.modified()).ok()?;
    let age = SystemTime::now().duration_since(modified).ok()?;
    Instant::now().checked_sub(age)
}

/// What a panic said, for a one-line error.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_owned())
}

/// Whether the anchor store can be used at all, before anything is shipped:
/// a setting that can never work (no credentials anywhere) is the error; a
/// store that is only away is retried as the follower runs. On a task, so
/// that a library panicking while it sets up its client (the AWS SDK with no
/// CA certificates) is one error, as in anchoring.
pub fn store_ready(runtime: &tokio::runtime::Runtime, store: &Arc<AnchorStore>) -> Result<(), chainship_chain::Error> {
    let probe = Arc::clone(store);
    match runtime.block_on(runtime.spawn(async move { probe.ready().await })) {
        Ok(Err(e)) if e.kind != chainship_chain::ErrorKind::Transient => Err(e),
        Ok(_) => Ok(()),
        Err(join) => Err(chainship_chain::Error::permanent(format!(
            "anchoring stopped on an internal error ({}) setting up the anchor store; nothing was shipped",
            join.try_into_panic()
                .map_or_else(|_| "a panic".to_owned(), |p| panic_text(p.as_ref()))
        ))),
    }
}

/// Refuses a signing key that is demonstrably another origin's: named
/// after an origin (not this one) the anchor store keeps heads for. In a
/// fleet sharing one store, a follower handed its neighbour's key would
/// sign this origin's heads and checkpoints with it. A key named otherwise
/// (`prod-eu1/chainship`, or a rotation's new name) is not refused here; a
/// fleet check trusts an origin's heads only to the key named after it. A
/// store that cannot be listed now is not a reason to stop (anchoring
/// waits for it anyway).
pub fn key_is_this_origins(
    runtime: &tokio::runtime::Runtime,
    store: &Arc<AnchorStore>,
    origin: &str,
    keys: &[Arc<dyn Signer>],
) -> Result<(), chainship_chain::Error> {
    for key in keys {
        let name = key.name();
        if name == origin || chainship_chain::origin::parse_origin(name).is_err() {
            continue;
        }
        let (probe, other) = (Arc::clone(store), name.to_owned());
        let listed = runtime.block_on(runtime.spawn(async move { probe.head_seqs(&other).await }));
        if let Ok(Ok(seqs)) = listed
            && !seqs.is_empty()
        {
            return Err(chainship_chain::Error::permanent(format!(
                "the signing key is named {name:?}, another origin this anchor store keeps {} head(s) for: it is that origin's key, not {origin:?}'s (a fleet mix-up?); sign with the key named after {origin:?}",
                seqs.len()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_recorded_publish_time_is_the_files_mtime_unless_unusable() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cursor.anchored");
        assert!(recorded_at(&file).is_none(), "no file");

        std::fs::write(&file, "1:00\n").unwrap();
        let an_hour = Duration::from_secs(3600);
        let f = std::fs::File::options().write(true).open(&file).unwrap();
        f.set_modified(SystemTime::now() - an_hour).unwrap();
        let age = recorded_at(&file).unwrap().elapsed();
        assert!(age >= an_hour && age < an_hour + Duration::from_secs(60), "{age:?}");

        // A time in the future would make the age read 0 for as long.
        f.set_modified(SystemTime::now() + an_hour).unwrap();
        assert!(recorded_at(&file).is_none());
    }
}
