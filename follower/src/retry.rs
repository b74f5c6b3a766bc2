//! Retrying transient failures with exponential backoff (the `backon`
//! policy), while staying responsive to shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use backon::{BackoffBuilder, ExponentialBuilder};
use chainship_sinks::{ErrorKind, SinkError};

use crate::metrics;

/// How long to wait between attempts, and when to stop trying.
#[derive(Clone, Copy, Debug)]
pub struct RetryPolicy {
    pub min_delay: Duration,
    pub max_delay: Duration,
    /// Give up after failing this long (`None`: retry forever).
    pub give_up_after: Option<Duration>,
    /// After a shutdown request, how long a failing attempt may still be retried.
    pub shutdown_grace: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(30),
            give_up_after: None,
            shutdown_grace: Duration::from_secs(5),
        }
    }
}

/// Why retrying ended without success.
#[derive(Debug)]
pub enum RetryEnd {
    /// A permanent or integrity error: not worth another attempt.
    Fatal(SinkError),
    /// Transient failures outlasted `give_up_after`.
    GaveUp(SinkError),
    /// Shutdown was requested and the grace ran out.
    Interrupted(SinkError),
}

/// The backoff of a background task that retries a store or a witness
/// forever: 200 ms doubling up to `max_delay`, with jitter.
pub fn background_backoff(max_delay: Duration) -> impl Iterator<Item = Duration> {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(max_delay)
        .with_jitter()
        .without_max_times()
        .build()
}

/// Calls `attempt` until it succeeds or retrying ends. `on_failure` sees
/// every failed attempt (for logs and health).
pub fn retry_transient<T>(
    policy: &RetryPolicy,
    stop: &Arc<AtomicBool>,
    mut on_failure: impl FnMut(&SinkError, u32),
    mut attempt: impl FnMut() -> Result<T, SinkError>,
) -> Result<T, RetryEnd> {
    let started = Instant::now();
    let mut backoff = ExponentialBuilder::default()
        .with_min_delay(policy.min_delay)
        .with_max_delay(policy.max_delay)
        .with_jitter()
        .without_max_times()
        .build();
    let mut stop_seen: Option<Instant> = None;
    let mut failures = 0u32;
    loop {
        let error = match attempt() {
            Ok(value) => {
                if failures > 0 {
                    // The operator's last line must not be the failure.
                    tracing::info!(
                        failed_attempts = failures,
                        after_s = started.elapsed().as_secs(),
                        "the sink is back: delivered after {failures} failed attempt(s) over {:.1}s",
                        started.elapsed().as_secs_f64()
                    );
                }
                return Ok(value);
            }
            Err(e) => e,
        };
        failures += 1;
        metrics::sink_error(error.kind.as_str());
        on_failure(&error, failures);
        if error.kind != ErrorKind::Transient {
            return Err(RetryEnd::Fatal(error));
        }
        if policy.give_up_after.is_some_and(|limit| started.elapsed() > limit) {
            return Err(RetryEnd::GaveUp(error));
        }
        let delay = backoff.next().unwrap_or(policy.max_delay);
        let wake = Instant::now() + delay;
        while Instant::now() < wake {
            if stop.load(Ordering::Relaxed) {
                let since = *stop_seen.get_or_insert_with(Instant::now);
                if since.elapsed() >= policy.shutdown_grace {
                    return Err(RetryEnd::Interrupted(error));
                }
            }
            std::thread::sleep(Duration::from_millis(20).min(wake.saturating_duration_since(Instant::now())));
        }
        metrics::retried();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fast() -> RetryPolicy {
        RetryPolicy {
            min_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            give_up_after: Some(Duration::from_millis(300)),
            shutdown_grace: Duration::from_millis(50),
        }
    }

    #[test]
    fn retries_transient_errors_until_success() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut calls = 0;
        let got = retry_transient(
            &fast(),
            &stop,
            |_, _| {},
            || {
                calls += 1;
                if calls < 4 {
                    Err(SinkError::transient("down"))
                } else {
                    Ok(calls)
                }
            },
        );
        assert_eq!(got.unwrap(), 4);
    }

    #[test]
    fn a_permanent_error_is_not_retried() {
        let stop = Arc::new(AtomicBool::new(false));
        let mut calls = 0;
        let got: Result<(), _> = retry_transient(
            &fast(),
            &stop,
            |_, _| {},
            || {
                calls += 1;
                Err(SinkError::permanent("access denied"))
            },
        );
        assert!(matches!(got, Err(RetryEnd::Fatal(_))));
        assert_eq!(calls, 1);
    }

    #[test]
    fn gives_up_after_the_limit_and_on_shutdown() {
        let stop = Arc::new(AtomicBool::new(false));
        let got: Result<(), _> = retry_transient(&fast(), &stop, |_, _| {}, || Err(SinkError::transient("down")));
        assert!(matches!(got, Err(RetryEnd::GaveUp(_))));
        stop.store(true, Ordering::Relaxed);
        let policy = RetryPolicy {
            give_up_after: None,
            ..fast()
        };
        let got: Result<(), _> = retry_transient(&policy, &stop, |_, _| {}, || Err(SinkError::transient("down")));
        assert!(matches!(got, Err(RetryEnd::Interrupted(_))));
    }
}
