//! Two questions a supervisor asks, kept apart:
//!
//! - **Readiness** (`/readyz`, and `/healthz` as before): is the evidence
//!   flowing? Not once the chain broke, the sink has failed for longer than
//!   `--unhealthy-after`, or anchoring or the witness quorum lags past it.
//!   An operator must look; restarting would not help.
//! - **Liveness** (`/livez`): is the process still turning its loops? Only
//!   a follower whose loops stopped turning for [`LIVENESS_LIMIT`] (stuck,
//!   deadlocked) says no: the one case a restart mends. A follower waiting
//!   at a break (`--on-break wait`) or retrying a sink that is down is alive.

use chainship_chain::{Error, transient};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long the follower's loops may go without turning before `/livez`
/// says the process is stuck. Far above the longest pause a loop takes (a
/// retry waits at most `--retry-max-delay`, 30 s by default, plus the call).
pub const LIVENESS_LIMIT: Duration = Duration::from_secs(180);

/// How far anchoring is behind delivery, and when it last moved.
struct AnchorProgress {
    delivered: u64,
    anchored: u64,
    /// When anchoring last published, or delivery last got ahead of it.
    moved: Instant,
    /// How long a delivered head may wait by design (`--anchor-interval`).
    interval: Duration,
}

#[derive(Default)]
struct State {
    broken: Option<String>,
    anchoring: Option<AnchorProgress>,
    sink_failing: Option<(Instant, String)>,
    anchor_failing: Option<(Instant, String)>,
    witness_failing: Option<(Instant, String)>,
    db_failing: Option<(Instant, String)>,
}

/// What the follower's parts last said about themselves, for the probes:
/// each part reports success or failure as it goes, and the probes read
/// [`Health::status`] (readiness) and [`Health::liveness`].
pub struct Health {
    state: Mutex<State>,
    unhealthy_after: Duration,
    born: Instant,
    /// Milliseconds after `born` when a loop last turned; 0 = not yet.
    turned_at: AtomicU64,
}

impl Health {
    /// Unready once a part has been failing for longer than `unhealthy_after`.
    pub fn new(unhealthy_after: Duration) -> Self {
        Health {
            state: Mutex::new(State::default()),
            unhealthy_after,
            born: Instant::now(),
            turned_at: AtomicU64::new(0),
        }
    }

    /// A loop of the follower turned (read, delivered, retried, waited).
    pub fn turned(&self) {
        let now = self.born.elapsed().as_millis().max(1) as u64;
        self.turned_at.store(now, Ordering::Relaxed);
    }

    /// `Ok` while the follower's loops turn (or have not started: resuming
    /// is bounded work), else how long they have been still.
    pub fn liveness(&self) -> Result<(), Error> {
        self.liveness_within(LIVENESS_LIMIT)
    }

    fn liveness_within(&self, limit: Duration) -> Result<(), Error> {
        let at = self.turned_at.load(Ordering::Relaxed);
        if at == 0 {
            return Ok(());
        }
        let still = self.born.elapsed().saturating_sub(Duration::from_millis(at));
        if still > limit {
            return Err(transient!("no loop of the follower turned for {}s", still.as_secs()));
        }
        Ok(())
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A poisoned lock only means a panic elsewhere; the state is still usable.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut state)
    }

    /// A delivery succeeded.
    pub fn sink_ok(&self) {
        self.turned();
        self.with(|s| s.sink_failing = None);
    }

    /// A delivery failed (and is being retried); `reason` is shown by `/readyz`.
    pub fn sink_failed(&self, reason: &str) {
        self.turned();
        self.with(|s| {
            let since = s.sink_failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
            s.sink_failing = Some((since, reason.to_owned()));
        });
    }

    /// A fresh connection read the database's head.
    pub fn db_ok(&self) {
        self.with(|s| s.db_failing = None);
    }

    /// A fresh connection could not read the database (since the first call):
    /// a reader retrying "not now" forever must not look ready.
    pub fn db_failed(&self, reason: &str) {
        self.with(|s| {
            let since = s.db_failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
            s.db_failing = Some((since, reason.to_owned()));
        });
    }

    /// A head was published.
    pub fn anchor_ok(&self) {
        self.turned();
        self.with(|s| s.anchor_failing = None);
    }

    /// Publishing failed (and is being retried).
    pub fn anchor_failed(&self, reason: &str) {
        self.turned();
        self.with(|s| {
            let since = s.anchor_failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
            s.anchor_failing = Some((since, reason.to_owned()));
        });
    }

    /// The newest checkpoint reached its quorum of cosignatures.
    pub fn witness_ok(&self) {
        self.with(|s| s.witness_failing = None);
    }

    /// The newest checkpoint lacks its quorum (since the first call).
    pub fn witness_failing(&self, reason: &str) {
        self.with(|s| {
            let since = s.witness_failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
            s.witness_failing = Some((since, reason.to_owned()));
        });
    }

    /// Anchoring runs, publishing delivered heads at most every `interval`:
    /// a delivered head left unpublished past that and `--unhealthy-after`
    /// is unready, whether the store fails or hangs.
    pub fn expect_anchoring(&self, interval: Duration) {
        self.with(|s| {
            s.anchoring = Some(AnchorProgress {
                delivered: 0,
                anchored: 0,
                moved: Instant::now(),
                interval,
            })
        });
    }

    /// The sink acknowledged (and the cursor recorded) up to `seq`.
    pub fn delivered(&self, seq: u64) {
        self.with(|s| {
            if let Some(p) = s.anchoring.as_mut() {
                if p.anchored >= p.delivered {
                    p.moved = Instant::now();
                }
                p.delivered = p.delivered.max(seq);
            }
        });
    }

    /// Kept heads now cover `seq`.
    pub fn anchored(&self, seq: u64) {
        self.turned();
        self.with(|s| {
            if let Some(p) = s.anchoring.as_mut()
                && seq > p.anchored
            {
                p.anchored = seq;
                p.moved = Instant::now();
            }
        });
    }

    /// The follower is stopping on an error: unhealthy at once.
    pub fn fatal(&self, reason: &str) {
        self.with(|s| s.broken = Some(format!("stopping: {reason}")));
    }

    /// The chain broke: unready until restarted (an operator must look).
    pub fn chain_broken(&self, reason: &str) {
        self.with(|s| s.broken = Some(format!("chain broken: {reason}")));
    }

    /// `Ok` when healthy, else the reason.
    pub fn status(&self) -> Result<(), Error> {
        let limit = self.unhealthy_after;
        self.with(|s| {
            if let Some(reason) = &s.broken {
                return Err(Error::transient(reason));
            }
            if let Some((since, reason)) = &s.db_failing
                && since.elapsed() > limit
            {
                return Err(transient!(
                    "database unreadable for {}s: {reason}",
                    since.elapsed().as_secs()
                ));
            }
            if let Some((since, reason)) = &s.sink_failing
                && since.elapsed() > limit
            {
                return Err(transient!("sink failing for {}s: {reason}", since.elapsed().as_secs()));
            }
            if let Some((since, reason)) = &s.anchor_failing
                && since.elapsed() > limit
            {
                return Err(transient!(
                    "anchoring lagging for {}s: {reason}",
                    since.elapsed().as_secs()
                ));
            }
            if let Some(p) = &s.anchoring
                && p.delivered > p.anchored
                && p.moved.elapsed() > limit + p.interval
            {
                return Err(transient!(
                    "anchoring has kept no head for {}s while seqs {}..{} wait (the anchor store fails or hangs)",
                    p.moved.elapsed().as_secs(),
                    p.anchored + 1,
                    p.delivered
                ));
            }
            if let Some((since, reason)) = &s.witness_failing
                && since.elapsed() > limit
            {
                return Err(transient!(
                    "witness quorum not met for {}s: {reason}",
                    since.elapsed().as_secs()
                ));
            }
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchoring_that_keeps_nothing_past_the_limit_is_unready() {
        let health = Health::new(Duration::from_millis(20));
        health.expect_anchoring(Duration::from_millis(10));
        health.delivered(100);
        assert!(health.status().is_ok(), "inside the interval and the limit");
        std::thread::sleep(Duration::from_millis(40));
        let why = health.status().unwrap_err();
        assert!(why.message.contains("seqs 1..100 wait"), "{why}");
        health.anchored(100);
        assert!(health.status().is_ok(), "caught up");
        // A stream that keeps anchoring is never unready, however long.
        for seq in (200..400).step_by(100) {
            health.delivered(seq);
            std::thread::sleep(Duration::from_millis(15));
            health.anchored(seq - 50);
            assert!(health.status().is_ok());
        }
    }

    #[test]
    fn liveness_is_the_loops_turning_whatever_the_readiness() {
        let health = Health::new(Duration::from_millis(10));
        assert!(
            health.liveness_within(Duration::ZERO).is_ok(),
            "alive before the loops start"
        );
        health.turned();
        health.chain_broken("seq 5 altered");
        assert!(health.status().is_err(), "a break is not ready");
        assert!(
            health.liveness_within(Duration::from_secs(60)).is_ok(),
            "a break is alive"
        );
        std::thread::sleep(Duration::from_millis(20));
        let still = health.liveness_within(Duration::from_millis(5)).unwrap_err();
        assert!(still.message.contains("no loop of the follower turned"), "{still}");
        health.sink_failed("broker down");
        assert!(
            health.liveness_within(Duration::from_millis(5)).is_ok(),
            "retrying is turning"
        );
    }

    #[test]
    fn failing_sink_turns_unhealthy_only_after_the_limit() {
        let health = Health::new(Duration::from_millis(50));
        health.sink_failed("broker down");
        assert!(health.status().is_ok());
        std::thread::sleep(Duration::from_millis(80));
        assert!(health.status().unwrap_err().message.contains("broker down"));
        health.sink_ok();
        assert!(health.status().is_ok());
        health.chain_broken("seq 5");
        assert!(health.status().unwrap_err().message.contains("chain broken: seq 5"));
    }
}
