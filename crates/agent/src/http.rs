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
