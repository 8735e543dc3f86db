//! A deliberately tiny HTTP/1.1 server for `GET /metrics` and `GET /healthz`.
//!
//! Two read-only endpoints do not justify an HTTP stack in a daemon whose memory budget is
//! a few megabytes: each connection gets one request and one response, then is closed.
//!
//! Nothing on this port may take publication down: every connection costs a descriptor,
//! and the agent needs descriptors to publish. So at most `max_connections` are held at
//! once, each for at most [`CLIENT_TIMEOUT`] (request head and answer together). A
//! connection beyond the cap evicts the oldest one still waiting for its request head (an
//! idle or slow client); when every held connection is already being answered, the new
//! one is closed at once. A flood of idle connections thus costs at most the cap in
//! descriptors, and a prober that sends its request right away is still answered.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;
use tracing::debug;

use crate::metrics::Metrics;

const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a client has to send its request head and read the answer.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections still waiting for their request head, oldest first: eviction candidates.
#[derive(Default)]
struct Waiting(Mutex<VecDeque<(u64, AbortHandle)>>);

impl Waiting {
    /// Queues the task `spawn` starts. The queue's lock is held across the spawn, so that
    /// on a multi-threaded runtime the task cannot finish (and dequeue itself) before it
    /// was queued, which would leave a stale entry behind.
    fn spawn(&self, id: u64, spawn: impl FnOnce() -> AbortHandle) {
        match self.0.lock() {
            Ok(mut queue) => queue.push_back((id, spawn())),
            Err(_) => {
                spawn();
            }
        }
    }

    fn remove(&self, id: u64) {
        if let Ok(mut queue) = self.0.lock() {
            queue.retain(|(held, _)| *held != id);
        }
    }

    /// Aborts the oldest waiting connection; false when there is none.
    fn evict_oldest(&self) -> bool {
        let oldest = self.0.lock().ok().and_then(|mut queue| queue.pop_front());
        match oldest {
            Some((_, handle)) => {
                handle.abort();
                true
            }
            None => false,
        }
    }
}

/// Serves until the future is dropped.
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>, max_connections: usize) {
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let waiting = Arc::new(Waiting::default());
    let mut next_id: u64 = 0;
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let permit = match slots.clone().try_acquire_owned() {
                    Ok(permit) => permit,
                    Err(_) => {
                        // Full: make room by closing the oldest idle connection, if any.
                        if !waiting.evict_oldest() {
                            metrics.metrics_connection_refused();
                            drop(stream);
                            continue;
                        }
                        metrics.metrics_connection_evicted();
                        // The aborted task releases its slot when it is dropped, at the
                        // runtime's next turn.
                        match tokio::time::timeout(
                            Duration::from_millis(100),
                            slots.clone().acquire_owned(),
                        )
                        .await
                        {
                            Ok(Ok(permit)) => permit,
                            _ => {
                                metrics.metrics_connection_refused();
                                drop(stream);
                                continue;
                            }
                        }
                    }
                };
                let metrics = metrics.clone();
                let id = next_id;
                next_id = next_id.wrapping_add(1);
                let queue = waiting.clone();
                waiting.spawn(id, move || {
                    tokio::spawn(async move {
                        let _permit = permit;
                        let answered = tokio::time::timeout(
                            CLIENT_TIMEOUT,
                            answer(stream, &metrics, || queue.remove(id)),
                        );
                        if let Ok(Err(e)) = answered.await {
                            debug!(error = %e, "metrics client went away");
                        }
                        queue.remove(id);
                    })
                    .abort_handle()
                });
                // Let the new connection read its request before the next accept: a prober
                // that sent its request at once is then no eviction candidate, however many
                // idle connections are queued behind it.
                tokio::task::yield_now().await;
            }
            Err(e) => {
                // Usually EMFILE: wait rather than spin.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Reads one request and answers it; `head_read` runs once the request head is in (the
/// connection is then no longer an eviction candidate).
async fn answer(
    mut stream: TcpStream,
    metrics: &Metrics,
    head_read: impl FnOnce(),
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
        }
    }
    head_read();
    let request_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let request_line = String::from_utf8_lossy(request_line);
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        )
        .await;
    }
    let (status, content_type, body) = match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => match metrics.health() {
            Ok(()) => ("200 OK", "text/plain; charset=utf-8", "ok\n".to_owned()),
            Err(reason) => (
                "503 Service Unavailable",
                "text/plain; charset=utf-8",
                format!("{reason}\n"),
            ),
        },
        _ => (
            "404 Not Found",
            "text/plain",
            "try /metrics or /healthz\n".to_owned(),
        ),
    };
    respond(&mut stream, status, content_type, &body).await
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
