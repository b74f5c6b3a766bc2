//! Health as `/healthz` reports it: healthy while delivering and anchoring;
//! unhealthy, with a reason, once the chain broke, the sink has failed for
//! longer than `--unhealthy-after`, or anchoring lags past it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
struct State {
    broken: Option<String>,
    sink_failing: Option<(Instant, String)>,
    anchor_failing: Option<(Instant, String)>,
    witness_failing: Option<(Instant, String)>,
}

pub struct Health {
    state: Mutex<State>,
    unhealthy_after: Duration,
}

impl Health {
    pub fn new(unhealthy_after: Duration) -> Self {
        Health {
            state: Mutex::new(State::default()),
            unhealthy_after,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A poisoned lock only means a panic elsewhere; the state is still usable.
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut state)
    }

    pub fn sink_ok(&self) {
        self.with(|s| s.sink_failing = None);
    }

    pub fn sink_failed(&self, reason: &str) {
        self.with(|s| {
            let since = s.sink_failing.as_ref().map_or_else(Instant::now, |(t, _)| *t);
            s.sink_failing = Some((since, reason.to_owned()));
        });
    }

    pub fn anchor_ok(&self) {
        self.with(|s| s.anchor_failing = None);
    }

    pub fn anchor_failed(&self, reason: &str) {
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

    /// The follower is stopping on an error: unhealthy at once.
    pub fn fatal(&self, reason: &str) {
        self.with(|s| s.broken = Some(format!("stopping: {reason}")));
    }

    pub fn chain_broken(&self, reason: &str) {
        self.with(|s| s.broken = Some(format!("chain broken: {reason}")));
    }

    /// `Ok` when healthy, else the reason.
    pub fn status(&self) -> Result<(), String> {
        let limit = self.unhealthy_after;
        self.with(|s| {
            if let Some(reason) = &s.broken {
                return Err(reason.clone());
            }
            if let Some((since, reason)) = &s.sink_failing
                && since.elapsed() > limit
            {
                return Err(format!("sink failing for {}s: {reason}", since.elapsed().as_secs()));
            }
            if let Some((since, reason)) = &s.anchor_failing
                && since.elapsed() > limit
            {
                return Err(format!(
                    "anchoring lagging for {}s: {reason}",
                    since.elapsed().as_secs()
                ));
            }
            if let Some((since, reason)) = &s.witness_failing
                && since.elapsed() > limit
            {
                return Err(format!(
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
    fn failing_sink_turns_unhealthy_only_after_the_limit() {
        let health = Health::new(Duration::from_millis(50));
        health.sink_failed("broker down");
        assert!(health.status().is_ok());
        std::thread::sleep(Duration::from_millis(80));
        assert!(health.status().unwrap_err().contains("broker down"));
        health.sink_ok();
        assert!(health.status().is_ok());
        health.chain_broken("seq 5");
        assert!(health.status().unwrap_err().contains("chain broken: seq 5"));
    }
}
