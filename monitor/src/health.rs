//! The monitor's probes: ready while the copy and the store are read
//! (an outage is retried and shows here, never as a finding), alive while
//! its loop turns.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use chainship_chain::{Error, transient};
use chainship_follower::probe_server::Probes;

/// How long the loop may go without turning before `/livez` says stuck.
pub const LIVENESS_LIMIT: Duration = Duration::from_secs(300);

struct State {
    copy: Option<String>,
    store: Option<String>,
    /// Not ready before the first read of each.
    copy_read: bool,
    store_read: bool,
    turned: Instant,
}

pub struct MonitorHealth {
    state: Mutex<State>,
}

impl Default for MonitorHealth {
    fn default() -> Self {
        MonitorHealth {
            state: Mutex::new(State {
                copy: None,
                store: None,
                copy_read: false,
                store_read: false,
                turned: Instant::now(),
            }),
        }
    }
}

impl MonitorHealth {
    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn turned(&self) {
        self.with(|s| s.turned = Instant::now());
    }

    pub fn copy(&self, result: Result<(), String>) {
        self.with(|s| {
            s.copy_read |= result.is_ok();
            s.copy = result.err();
        });
    }

    pub fn store(&self, result: Result<(), String>) {
        self.with(|s| {
            s.store_read |= result.is_ok();
            s.store = result.err();
        });
    }
}

impl Probes for MonitorHealth {
    fn readiness(&self) -> Result<(), Error> {
        self.with(|s| match (&s.copy, &s.store) {
            (Some(why), _) => Err(transient!("cannot read the copy: {why}")),
            (_, Some(why)) => Err(transient!("cannot read the anchor store: {why}")),
            _ if !s.copy_read => Err(transient!("the copy has not been read yet")),
            _ if !s.store_read => Err(transient!("the anchor store has not been read yet")),
            _ => Ok(()),
        })
    }

    fn liveness(&self) -> Result<(), Error> {
        let idle = self.with(|s| s.turned.elapsed());
        if idle > LIVENESS_LIMIT {
            return Err(transient!("the monitor's loop has not turned for {}s", idle.as_secs()));
        }
        Ok(())
    }

    fn describe(&self) {
        crate::metrics::describe();
    }

    fn ready_gauge(&self) -> &'static str {
        crate::metrics::READY
    }
}
