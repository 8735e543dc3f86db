//! `GET /metrics` and `GET /healthz`, served by hyper (HTTP/1.1, one request per
//! connection, then closed).
//!
//! Nothing on this port may take publication down: every connection costs a descriptor,
//! and the agent needs descriptors to publish. So at most `max_connections` are held at
//! once, each for at most [`CLIENT_TIMEOUT`] (request head and answer together). A
//! connection beyond the cap evicts the oldest one still waiting for its request head (an
//! idle or slow client); when every held connection is already being answered, the new
//! one is closed at once. A flood of idle connections thus costs at most the cap in
//! descriptors, and a prober that sends its request right away is still answered.
//! Rendering takes no lock publication holds for longer than a counter update
//! ([`crate::metrics`]).

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;
use tracing::debug;

use crate::metrics::{self, Metrics};

/// The longest request head read (hyper's smallest buffer); a longer one is answered 431.
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
                        let dequeue = {
                            let queue = queue.clone();
                            move || queue.remove(id)
                        };
                        let answered =
                            tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, metrics, dequeue));
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
    stream: TcpStream,
    metrics: Arc<Metrics>,
    head_read: impl Fn() + Send + 'static,
) -> hyper::Result<()> {
    let service = hyper::service::service_fn(move |request| {
        head_read();
        let metrics = metrics.clone();
        async move { Ok::<_, Infallible>(respond(&metrics, &request)) }
    });
    hyper::server::conn::http1::Builder::new()
        .keep_alive(false)
        .max_buf_size(MAX_REQUEST_HEAD)
        .serve_connection(TokioIo::new(stream), service)
        .await
}

fn respond(metrics: &Metrics, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, metrics::CONTENT_TYPE, metrics.render()),
        (&Method::GET, "/healthz") => match metrics.health() {
            Ok(()) => (
                StatusCode::OK,
                "text/plain; charset=utf-8",
                "ok\n".to_owned(),
            ),
            Err(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                format!("{reason}\n"),
            ),
        },
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /metrics or /healthz\n".to_owned(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    headers.insert(
        CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// Sends `request` on a new connection and reads the answer until the server closes.
    async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(CLIENT_TIMEOUT, stream.read_to_end(&mut answer));
        read.await
            .expect("the server closes after one answer")
            .unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    async fn start(max_connections: usize) -> (SocketAddr, Arc<Metrics>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new(Duration::from_secs(60), None));
        tokio::spawn(serve(listener, metrics.clone(), max_connections));
        (addr, metrics)
    }

    #[tokio::test]
    async fn answers_one_request_per_connection() {
        let (addr, _) = start(4).await;
        let metrics = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(
            metrics.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{metrics}"
        );
        assert!(metrics.contains("cache-control: no-store\r\n"), "{metrics}");
        assert!(metrics.contains("\r\n\r\n# HELP dw_agent_"), "{metrics}");
        let health = exchange(addr, b"GET /healthz?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(health.starts_with("HTTP/1.0 503 "), "{health}");
        assert!(health.ends_with("\r\n\r\nstarting\n"), "{health}");
        let other = exchange(addr, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    }

    #[tokio::test]
    async fn a_request_head_over_the_limit_is_refused() {
        let (addr, _) = start(4).await;
        let padding = "a".repeat(MAX_REQUEST_HEAD);
        let request = format!("GET /metrics HTTP/1.1\r\nX-Pad: {padding}\r\n\r\n");
        let answer = exchange(addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        let fits = format!(
            "GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
            &padding[..7000]
        );
        let answer = exchange(addr, fits.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }

    /// At the cap, a new connection evicts the oldest one still waiting for its head.
    #[tokio::test]
    async fn a_connection_over_the_cap_evicts_the_oldest_idle_one() {
        let (addr, metrics) = start(2).await;
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let answer = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        let mut buf = [0u8; 16];
        let first = tokio::time::timeout(CLIENT_TIMEOUT, idle[0].read(&mut buf)).await;
        assert_eq!(
            first.expect("the oldest idle one is closed").unwrap_or(0),
            0
        );
        let text = metrics.render();
        assert!(
            text.contains("\ndw_agent_metrics_connections_evicted_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\ndw_agent_metrics_connections_refused_total 0\n"),
            "{text}"
        );
    }
}
