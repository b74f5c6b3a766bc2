//! Serves `/metrics` (Prometheus text, rendered by
//! `metrics-exporter-prometheus`), readiness (`/readyz`, also `/healthz`)
//! and liveness (`/livez`), each 200 or 503 with the reason (see
//! `chainship_follower::health`), for the long-running follower, on hyper.
//!
//! The port must never hurt the follower: every connection holds a file
//! descriptor, so at most [`MAX_CONNECTIONS`] are open at once, each for at
//! most [`CONNECTION_TIMEOUT`], and an accept error (EMFILE and the like)
//! pauses the loop instead of spinning it. One request per connection,
//! which is all scrapers and health probes do.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chainship_chain::{Error, permanent};

use crate::Health;

/// What the probes answer and the metrics the port describes: the
/// follower's [`Health`], or another long-running command's.
pub trait Probes: Send + Sync + 'static {
    /// `/readyz` (and `/healthz`): `Ok`, or the reason it is not.
    fn readiness(&self) -> Result<(), Error>;
    /// `/livez`: `Ok` unless the process is stuck.
    fn liveness(&self) -> Result<(), Error>;
    /// Registers the help texts (once the exporter is installed).
    fn describe(&self);
    /// The gauge set to readiness at each scrape.
    fn ready_gauge(&self) -> &'static str;
}

impl Probes for Health {
    fn readiness(&self) -> Result<(), Error> {
        self.status()
    }
    fn liveness(&self) -> Result<(), Error> {
        Health::liveness(self)
    }
    fn describe(&self) {
        crate::metrics::describe();
    }
    fn ready_gauge(&self) -> &'static str {
        crate::metrics::HEALTHY
    }
}
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tokio::sync::Notify;

/// Connections open at once; far more than scrapers and probes need.
const MAX_CONNECTIONS: usize = 64;
/// A client that has not sent its request headers by then is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// No connection lives longer than this, whatever it does.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the accept loop rests after an accept error.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(250);

/// Installs the Prometheus recorder and starts serving on `addr`.
pub async fn start<P: Probes>(addr: SocketAddr, health: Arc<P>) -> Result<SocketAddr, Error> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| permanent!("cannot install the metrics recorder: {e}"))?;
    health.describe();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| permanent!("{addr}: cannot listen: {e}"))?;
    let bound = listener.local_addr().map_err(|e| permanent!("{addr}: {e}"))?;
    tokio::spawn(serve(listener, handle, health));
    tracing::info!(%bound, "serving /metrics, /readyz (/healthz) and /livez");
    Ok(bound)
}

async fn serve<P: Probes>(listener: TcpListener, handle: PrometheusHandle, health: Arc<P>) {
    let slots = Arc::new(Slots::default());
    loop {
        // An evicted connection closes a moment after the next is accepted:
        // accept only while the sockets held stay bounded, so a flood of
        // idle connections never takes the descriptors the export needs
        // (a cursor write, a sink file). The rest wait in the kernel's backlog.
        while slots.live.load(Ordering::Relaxed) >= MAX_CONNECTIONS + EVICTING {
            let _ = tokio::time::timeout(ACCEPT_ERROR_PAUSE, slots.freed.notified()).await;
        }
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                tracing::warn!(error = %e, "metrics port: cannot accept a connection; pausing");
                tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                continue;
            }
        };
        let live = Live::count(&slots);
        // Every slot busy answering: close this one at once (it holds no fd).
        let Some(slot) = Slots::take(&slots) else {
            drop(stream);
            continue;
        };
        let (handle, health) = (handle.clone(), Arc::clone(&health));
        tokio::spawn(async move {
            let state = Arc::clone(&slot.state);
            let service = service_fn(move |request: Request<Incoming>| {
                // The request is in: this connection is no longer idle.
                state.busy.store(true, Ordering::Relaxed);
                std::future::ready(Ok::<_, Infallible>(answer(&request, &handle, health.as_ref())))
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .max_buf_size(16 * 1024)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = tokio::time::timeout(CONNECTION_TIMEOUT, connection) => {}
                _ = slot.state.evict.notified() => {}
            }
            drop(slot);
            drop(live);
        });
    }
}

fn answer<P: Probes>(request: &Request<Incoming>, handle: &PrometheusHandle, health: &P) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match request.uri().path() {
        "/metrics" => {
            // What /healthz says, as a series: alerts see "up but unhealthy".
            metrics::gauge!(health.ready_gauge()).set(f64::from(u8::from(health.readiness().is_ok())));
            (StatusCode::OK, "text/plain; version=0.0.4", handle.render())
        }
        // Readiness: the evidence flows (a break or a failing sink says no).
        "/healthz" | "/readyz" => probe(health.readiness()),
        // Liveness: the loops turn; a follower waiting at a break is alive.
        "/livez" => probe(health.liveness()),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /metrics, /readyz (or /healthz) or /livez\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

fn probe(result: Result<(), Error>) -> (StatusCode, &'static str, String) {
    match result {
        Ok(()) => (StatusCode::OK, "text/plain", "ok\n".to_owned()),
        Err(reason) => (StatusCode::SERVICE_UNAVAILABLE, "text/plain", format!("{reason}\n")),
    }
}

/// The open connections, oldest first. When all are taken, the oldest one
/// still idle (no request yet) is closed for the new one: idle connections
/// must not lock health probes out until they time out.
#[derive(Default)]
struct Slots {
    open: Mutex<VecDeque<Arc<SlotState>>>,
    /// Accepted sockets not closed yet (evicted ones included).
    live: std::sync::atomic::AtomicUsize,
    freed: Notify,
}

/// Connections evicted but not closed yet that the accept loop allows for.
const EVICTING: usize = 8;

/// One accepted socket, counted until it is closed.
struct Live(Arc<Slots>);

impl Live {
    fn count(slots: &Arc<Slots>) -> Live {
        slots.live.fetch_add(1, Ordering::Relaxed);
        Live(Arc::clone(slots))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
        self.0.freed.notify_one();
    }
}

#[derive(Default)]
struct SlotState {
    busy: AtomicBool,
    evict: Notify,
}

/// One open connection; gives its slot back when dropped.
struct Slot {
    state: Arc<SlotState>,
    slots: Arc<Slots>,
}

impl Slots {
    fn take(slots: &Arc<Slots>) -> Option<Slot> {
        let mut open = slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.len() >= MAX_CONNECTIONS {
            let idle = open.iter().position(|s| !s.busy.load(Ordering::Relaxed))?;
            if let Some(evicted) = open.remove(idle) {
                // notify_one keeps the wake-up even if the task is not waiting yet.
                evicted.evict.notify_one();
            }
        }
        let state = Arc::new(SlotState::default());
        open.push_back(Arc::clone(&state));
        Some(Slot {
            state,
            slots: Arc::clone(slots),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        open.retain(|s| !Arc::ptr_eq(s, &self.state));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_house_evicts_the_oldest_idle_connection_never_a_busy_one() {
        let slots = Arc::new(Slots::default());
        let mut held: Vec<Slot> = (0..MAX_CONNECTIONS).map(|_| Slots::take(&slots).unwrap()).collect();
        held[0].state.busy.store(true, Ordering::Relaxed);
        let newcomer = Slots::take(&slots).expect("an idle connection makes room");
        assert_eq!(slots.open.lock().unwrap().len(), MAX_CONNECTIONS);
        assert!(
            !slots
                .open
                .lock()
                .unwrap()
                .iter()
                .any(|s| Arc::ptr_eq(s, &held[1].state)),
            "the oldest idle connection was evicted"
        );
        for s in &held {
            s.state.busy.store(true, Ordering::Relaxed);
        }
        newcomer.state.busy.store(true, Ordering::Relaxed);
        assert!(Slots::take(&slots).is_none(), "all busy: the new connection is refused");
        drop(held.pop());
        assert!(Slots::take(&slots).is_some(), "a finished connection frees its slot");
    }
}
