//! Serves `/metrics` (Prometheus text, rendered by
//! `metrics-exporter-prometheus`) and `/healthz` (200 or 503 with the
//! reason) for the long-running follower.
//!
//! The HTTP here is deliberately minimal: one GET per connection, which is
//! all scrapers and health probes do.

use std::net::SocketAddr;
use std::sync::Arc;

use chainship_follower::Health;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Installs the Prometheus recorder and starts serving on `addr`.
pub async fn start(addr: SocketAddr, health: Arc<Health>) -> Result<SocketAddr, String> {
    let handle = PrometheusBuilder::new()
        .install_recorder()
        .map_err(|e| format!("--metrics-addr: cannot install the metrics recorder: {e}"))?;
    chainship_follower::metrics::describe();
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--metrics-addr {addr}: cannot listen: {e}"))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("--metrics-addr {addr}: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (handle, health) = (handle.clone(), Arc::clone(&health));
            tokio::spawn(async move {
                let _ = respond(stream, &handle, &health).await;
            });
        }
    });
    tracing::info!(%bound, "serving /metrics and /healthz");
    Ok(bound)
}

async fn respond(mut stream: TcpStream, handle: &PrometheusHandle, health: &Health) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < 16 * 1024 {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&buf[..n]);
    }
    let line = String::from_utf8_lossy(&request);
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = match path {
        "/metrics" => ("200 OK", "text/plain; version=0.0.4", handle.render()),
        "/healthz" => match health.status() {
            Ok(()) => ("200 OK", "text/plain", "ok\n".to_owned()),
            Err(reason) => ("503 Service Unavailable", "text/plain", format!("{reason}\n")),
        },
        _ => ("404 Not Found", "text/plain", "try /metrics or /healthz\n".to_owned()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}
