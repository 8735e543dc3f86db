//! One HTTP/1 server loop for the small metrics ports (dw-agent's `/metrics` and
//! `/healthz`, `dwctl status --serve`'s `/metrics`) that slow or idle clients cannot
//! starve: a scraper that sends its request at once is answered however many connections
//! an attacker holds open.
//!
//! - At most [`Limits::max_connections`] connections are held. A connection beyond the cap
//!   evicts the oldest one still waiting for its request head (idle, or dribbling it a byte
//!   at a time); when every held connection is already being answered, the new one is
//!   closed at once. So a flood costs at most the cap in descriptors (twice: each waiting
//!   connection's descriptor is duplicated to peek at it). A connection whose whole head is
//!   in its socket when it is accepted, or when it comes up for eviction (a scraper whose
//!   task has not run yet on a busy runtime), is never evicted.
//! - A request head must be complete within [`Limits::head_timeout`] (hyper's
//!   `header_read_timeout`), and the whole exchange within [`Limits::answer_timeout`].
//! - A request head over [`Limits::max_request_head`] bytes is answered 431; a body is
//!   never read (one request per connection, then closed).
//!
//! ```no_run
//! use std::sync::Arc;
//! use http_body_util::Full;
//! use hyper::body::Bytes;
//! # async fn run() -> std::io::Result<()> {
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9465").await?;
//! dw_http_guard::serve(listener, dw_http_guard::Limits::default(), Arc::new(dw_http_guard::NoEvents),
//!     |_request| async { hyper::Response::new(Full::new(Bytes::from("ok\n"))) }).await;
//! # Ok(()) }
//! ```

#![deny(missing_docs)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;
use tracing::debug;

/// What the loop allows one client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections held at once (at least 1).
    pub max_connections: usize,
    /// How long a client has to send its whole request head.
    pub head_timeout: Duration,
    /// How long the whole exchange (head, answer written) may take.
    pub answer_timeout: Duration,
    /// The longest request head read (hyper's smallest buffer is 8 KiB); longer: 431.
    pub max_request_head: usize,
}

impl Default for Limits {
    /// 64 connections, 2 s for the head, 5 s for the exchange, 8 KiB of head.
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            head_timeout: Duration::from_secs(2),
            answer_timeout: Duration::from_secs(5),
            max_request_head: 8 * 1024,
        }
    }
}

/// Told when the cap closes a connection (for the server's own counters).
pub trait Events: Send + Sync + 'static {
    /// A connection still waiting for its request head was closed to make room.
    fn evicted(&self) {}
    /// A new connection was closed at once: every held one was being answered.
    fn refused(&self) {}
}

/// Counts nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl Events for NoEvents {}

/// Connections still waiting for their request head, oldest first: eviction candidates,
/// each with a duplicate of its socket's descriptor to peek at (the task owns the stream).
#[derive(Default)]
struct Waiting(Mutex<VecDeque<(u64, AbortHandle, Option<OwnedFd>)>>);

impl Waiting {
    /// Queues the task `spawn` starts. The lock is held across the spawn, so that the task
    /// cannot finish (and dequeue itself) before it was queued.
    fn spawn(&self, id: u64, socket: Option<OwnedFd>, spawn: impl FnOnce() -> AbortHandle) {
        match self.0.lock() {
            Ok(mut queue) => queue.push_back((id, spawn(), socket)),
            Err(_) => {
                spawn();
            }
        }
    }

    fn remove(&self, id: u64) {
        if let Ok(mut queue) = self.0.lock() {
            queue.retain(|(held, _, _)| *held != id);
        }
    }

    /// Aborts the oldest waiting connection whose head is not in its socket; those found
    /// with their head in (about to be answered) leave the queue unharmed. False when none
    /// is left to evict.
    fn evict_oldest(&self) -> bool {
        loop {
            let oldest = self.0.lock().ok().and_then(|mut queue| queue.pop_front());
            match oldest {
                Some((_, _, Some(socket))) if head_is_in(&socket) => continue,
                Some((_, handle, _)) => {
                    handle.abort();
                    return true;
                }
                None => return false,
            }
        }
    }
}

/// Accepts on `listener` and answers each request with `respond` until the future is
/// dropped.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    events: Arc<dyn Events>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let waiting = Arc::new(Waiting::default());
    let mut next_id: u64 = 0;
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Usually EMFILE: wait rather than spin.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !waiting.evict_oldest() {
                    events.refused();
                    drop(stream);
                    continue;
                }
                events.evicted();
                // The aborted task releases its slot when dropped, at the runtime's next turn.
                // A second at most: on a starved runtime the turn can take a while, and
                // refusing then would close the very scraper the eviction made room for.
                match tokio::time::timeout(Duration::from_secs(1), slots.clone().acquire_owned())
                    .await
                {
                    Ok(Ok(permit)) => permit,
                    _ => {
                        events.refused();
                        drop(stream);
                        continue;
                    }
                }
            }
        };
        let id = next_id;
        next_id = next_id.wrapping_add(1);
        let queue = waiting.clone();
        let respond = respond.clone();
        // A client whose whole request head is already in the socket (a scraper sends it
        // at once; in a burst of connections it waits in the accept queue meanwhile) is no
        // eviction candidate: it is answered before its task is even first polled.
        let ready = head_is_in(&stream);
        // A waiting one's duplicate descriptor, peeked at before it is evicted (without one,
        // out of descriptors, it is evicted without a look).
        let socket = if ready {
            None
        } else {
            stream.as_fd().try_clone_to_owned().ok()
        };
        let spawn = move || {
            tokio::spawn(async move {
                let _permit = permit;
                let dequeue = {
                    let queue = queue.clone();
                    move || queue.remove(id)
                };
                let exchange = answer(stream, limits, respond, dequeue);
                if let Ok(Err(e)) = tokio::time::timeout(limits.answer_timeout, exchange).await {
                    debug!(error = %e, "client went away");
                }
                queue.remove(id);
            })
            .abort_handle()
        };
        if ready {
            spawn();
        } else {
            waiting.spawn(id, socket, spawn);
        }
        // Let the new connection read its request before the next accept: a scraper that
        // sent its request at once is then no eviction candidate, however many idle
        // connections are queued behind it.
        tokio::task::yield_now().await;
    }
}

/// Whether the socket holds a complete request head already (`\r\n\r\n` within the
/// first 8 KiB), peeked without reading or waiting.
fn head_is_in(stream: &impl AsRawFd) -> bool {
    let mut buf = [0u8; 8192];
    // SAFETY: recv(2) writes at most buf.len() bytes into buf, which lives across the call;
    // the descriptor is the stream's own, open for the call's duration.
    let n = unsafe {
        libc::recv(
            stream.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    usize::try_from(n).is_ok_and(|n| n >= 4 && buf[..n].windows(4).any(|w| w == b"\r\n\r\n"))
}

/// Reads one request and answers it; `head_read` runs once the head is in (the connection
/// is then no longer an eviction candidate).
async fn answer<F, Fut>(
    stream: TcpStream,
    limits: Limits,
    respond: F,
    head_read: impl Fn() + Send + Sync + 'static,
) -> hyper::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let head_read = Arc::new(head_read);
    let service = hyper::service::service_fn(move |request| {
        head_read();
        let response = respond(request);
        async move { Ok::<_, Infallible>(response.await) }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .keep_alive(false)
        .max_buf_size(limits.max_request_head.max(8192))
        .serve_connection(TokioIo::new(stream), service)
        .await
}

#[cfg(test)]
mod tests;
