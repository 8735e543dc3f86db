//! One HTTP/1 server loop for the small metrics ports (dw-agent's `/metrics` and
//! `/healthz`, `dwctl status --serve`'s `/metrics`) that slow or idle clients cannot
//! starve: a scraper that sends its request at once is answered however many connections
//! an attacker holds open.
//!
//! - At most [`Limits::max_connections`] connections are held. A connection beyond the cap
//!   evicts the oldest *idle or slow* one of the client address holding the most such
//!   connections, so that a flood from one address evicts its own, not a scraper's from
//!   another: idle is still waiting for its request head (or dribbling it a byte at a
//!   time), slow has had its answer written for [`Limits::slow_after`] or longer (a client
//!   that sent its request and does not read the answer); one whose answer is still being
//!   made is neither. When no held connection is idle or slow, the new one waits (at most
//!   `slow_after`) for a slot to free or for the oldest being written to to turn slow, and
//!   evicts it then; past that, it evicts the oldest of the busiest address, whatever it is
//!   doing. That wait is the new connection's own task's, never the accept loop's: at most
//!   `max_connections` connections wait for room at once, and one past them is closed at
//!   once. So a flood costs at most three times the cap in descriptors (the held ones, each
//!   waiting one's descriptor duplicated to peek at it, the ones waiting for room), plus
//!   [`Limits::cheap_connections`].
//! - A `GET` of one of [`Limits::cheap_paths`] (a health check, whose answer is a line made
//!   at once) whose whole head is in when it is accepted, or comes in while it waits for
//!   room, is answered outside the cap, in one of [`Limits::cheap_connections`] places of its own: it never waits for room, so
//!   clients that fill the cap and do not read cannot delay it. A connection whose whole head is
//!   in its socket when it is accepted, or when it comes up for eviction (a scraper whose
//!   task has not run yet on a busy runtime), is never evicted.
//! - A request head must be complete within [`Limits::head_timeout`] (hyper's
//!   `header_read_timeout`), and the whole exchange within [`Limits::answer_timeout`]. A
//!   write of the answer that makes no progress for [`Limits::write_timeout`] (a client
//!   that stopped reading, its socket buffers full) closes the connection, so an answer is
//!   held in memory for that long at most past the client's last read.
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

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::AbortHandle;
use tokio::time::Sleep;
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
    /// How long one write of the answer may wait for the client to read (no byte taken):
    /// then the connection is closed.
    pub write_timeout: Duration,
    /// A connection being answered this long or longer counts as slow: at the cap it is
    /// evicted like an idle one.
    pub slow_after: Duration,
    /// Paths whose answers are small and made at once (a health check): a `GET` of one of
    /// them whose whole head is in when it is accepted (or comes in while it waits for
    /// room) is answered outside the cap, in one of [`Limits::cheap_connections`] places of its own, never waiting for room nor
    /// evicted. Empty: none.
    pub cheap_paths: &'static [&'static str],
    /// How many connections to [`Limits::cheap_paths`] are answered outside the cap at
    /// once; past that, one goes through the cap as any other.
    pub cheap_connections: usize,
}

impl Default for Limits {
    /// 64 connections, 2 s for the head, 5 s for the exchange, 8 KiB of head, 2 s for a
    /// write, slow after 1 s, no cheap paths (16 places for them when some are given).
    fn default() -> Limits {
        Limits {
            max_connections: 64,
            head_timeout: Duration::from_secs(2),
            answer_timeout: Duration::from_secs(5),
            max_request_head: 8 * 1024,
            write_timeout: Duration::from_secs(2),
            slow_after: Duration::from_secs(1),
            cheap_paths: &[],
            cheap_connections: 16,
        }
    }
}

/// Told when the cap closes a connection (for the server's own counters).
pub trait Events: Send + Sync + 'static {
    /// An idle or slow connection was closed to make room.
    fn evicted(&self) {}
    /// A new connection was closed: every held one was being answered, and no slot came
    /// free nor did one turn slow within `slow_after`.
    fn refused(&self) {}
}

/// Counts nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl Events for NoEvents {}

/// Where a held connection is.
enum Phase {
    /// Still waiting for its request head; a duplicate of its socket's descriptor to peek
    /// at (the task owns the stream), `None` when none could be made (out of descriptors):
    /// evicted without a look.
    Waiting(Option<OwnedFd>),
    /// Its head is in; its answer is being made.
    Preparing,
    /// Its answer is being written since then.
    Writing(Instant),
}

/// One held connection.
struct Held {
    id: u64,
    task: AbortHandle,
    /// The client's address: eviction takes from the address holding the most.
    peer: IpAddr,
    phase: Phase,
}

/// The held connections, oldest first: the eviction candidates among them are the idle
/// (waiting for their head) and the slow (their answer written for [`Limits::slow_after`]
/// or more: the client does not take it). One whose answer is being made is none.
struct Waiting {
    slow_after: Duration,
    queue: Mutex<VecDeque<Held>>,
}

impl Default for Waiting {
    fn default() -> Waiting {
        Waiting::new(Limits::default().slow_after)
    }
}

impl Waiting {
    fn new(slow_after: Duration) -> Waiting {
        Waiting {
            slow_after,
            queue: Mutex::default(),
        }
    }

    /// Queues the task `spawn` starts, a connection still waiting for its head. The lock
    /// is held across the spawn, so that the task cannot finish (and dequeue itself)
    /// before it was queued.
    fn spawn(
        &self,
        id: u64,
        peer: IpAddr,
        socket: Option<OwnedFd>,
        spawn: impl FnOnce() -> AbortHandle,
    ) {
        self.hold(id, peer, Phase::Waiting(socket), spawn);
    }

    /// Queues the task `spawn` starts, a connection whose head is in already.
    fn spawn_answering(&self, id: u64, peer: IpAddr, spawn: impl FnOnce() -> AbortHandle) {
        self.hold(id, peer, Phase::Preparing, spawn);
    }

    fn hold(&self, id: u64, peer: IpAddr, phase: Phase, spawn: impl FnOnce() -> AbortHandle) {
        match self.queue.lock() {
            Ok(mut queue) => queue.push_back(Held {
                id,
                task: spawn(),
                peer,
                phase,
            }),
            Err(_) => {
                spawn();
            }
        }
    }

    /// The connection's head is in: its answer is being made.
    fn answering(&self, id: u64) {
        self.set(id, Phase::Preparing);
    }

    /// The connection's answer is ready: it is being written from now on.
    fn writing(&self, id: u64) {
        self.set(id, Phase::Writing(Instant::now()));
    }

    fn set(&self, id: u64, phase: Phase) {
        if let Ok(mut queue) = self.queue.lock()
            && let Some(held) = queue.iter_mut().find(|held| held.id == id)
        {
            held.phase = phase;
        }
    }

    /// How long until the oldest connection being written to turns slow (`None`: none
    /// is being written to).
    fn until_next_slow(&self, now: Instant) -> Option<Duration> {
        let queue = self.queue.lock().ok()?;
        queue
            .iter()
            .filter_map(|held| match held.phase {
                Phase::Writing(since) => Some(
                    self.slow_after
                        .saturating_sub(now.saturating_duration_since(since)),
                ),
                Phase::Waiting(_) | Phase::Preparing => None,
            })
            .min()
    }

    fn remove(&self, id: u64) {
        if let Ok(mut queue) = self.queue.lock() {
            queue.retain(|held| held.id != id);
        }
    }

    /// Aborts the oldest idle or slow connection of the client address that holds the
    /// most of them (so that a flood from one address evicts its own connections, never
    /// a scraper's from another), passing over a waiting one whose head is in its socket
    /// by now (about to be answered: it is answered, unharmed). False when none is left.
    fn evict_oldest(&self) -> bool {
        self.evict(false)
    }

    /// The last resort, when no connection turned idle or slow within `slow_after`: the
    /// oldest held connection of the address holding the most, whatever it is doing.
    fn evict_oldest_of_any(&self) -> bool {
        self.evict(true)
    }

    fn evict(&self, any: bool) -> bool {
        let Ok(mut queue) = self.queue.lock() else {
            return false;
        };
        let now = Instant::now();
        let slow_after = self.slow_after;
        let candidate = |held: &Held| match held.phase {
            Phase::Waiting(_) => true,
            Phase::Preparing => any,
            Phase::Writing(since) => any || now.saturating_duration_since(since) >= slow_after,
        };
        loop {
            let mut held: HashMap<IpAddr, usize> = HashMap::new();
            for each in queue.iter().filter(|each| candidate(each)) {
                *held.entry(each.peer).or_default() += 1;
            }
            // The busiest address; on a tie, the one whose oldest candidate is oldest.
            let Some(busiest) = queue
                .iter()
                .filter(|each| candidate(each))
                .rev()
                .map(|each| each.peer)
                .max_by_key(|peer| held.get(peer).copied().unwrap_or(0))
            else {
                return false;
            };
            let Some(at) = queue
                .iter()
                .position(|each| each.peer == busiest && candidate(each))
            else {
                return false;
            };
            if let Phase::Waiting(Some(socket)) = &queue[at].phase
                && head_is_in(socket)
            {
                queue[at].phase = Phase::Preparing;
                continue;
            }
            let Some(victim) = queue.remove(at) else {
                return false;
            };
            victim.task.abort();
            return true;
        }
    }
}

/// Accepts on `listener` and answers each request with `respond` until the future is
/// dropped.
///
/// The accept loop itself never waits: a connection that finds the cap full waits for room
/// in a task of its own (at most [`Limits::max_connections`] such tasks; past them it is
/// refused at once), so that a connection behind it in the accept queue (a health check
/// on a [`Limits::cheap_paths`] path, a scraper) is looked at without delay.
pub async fn serve<F, Fut>(
    listener: TcpListener,
    limits: Limits,
    events: Arc<dyn Events>,
    respond: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let server = Arc::new(Server {
        limits,
        slots: Arc::new(Semaphore::new(limits.max_connections.max(1))),
        waiting: Arc::new(Waiting::new(limits.slow_after)),
        events,
        respond,
        next_id: AtomicU64::new(0),
    });
    let room_waiters = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let cheap = Arc::new(Semaphore::new(limits.cheap_connections));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok((stream, peer)) => (stream, peer.ip()),
            Err(e) => {
                // Usually EMFILE: wait rather than spin.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        if is_cheap(&stream, limits.cheap_paths)
            && let Ok(place) = cheap.clone().try_acquire_owned()
        {
            server.answer_cheap(stream, place);
            continue;
        }
        match server.slots.clone().try_acquire_owned() {
            Ok(permit) => server.hold(stream, peer, permit),
            Err(_) => match room_waiters.clone().try_acquire_owned() {
                Ok(waiter) => {
                    let server = server.clone();
                    let cheap = cheap.clone();
                    tokio::spawn(async move {
                        let _waiter = waiter;
                        // A cheap request whose head was not yet in when it was accepted
                        // (the client's connect raced its write) takes a cheap place as
                        // soon as its head is in, rather than waiting for room.
                        let room = tokio::select! {
                            room = make_room(
                                &server.slots,
                                &server.waiting,
                                server.limits.slow_after,
                                &*server.events,
                            ) => Ok(room),
                            place = cheap_place_once_head_is_in(
                                &stream,
                                server.limits.cheap_paths,
                                &cheap,
                            ) => Err(place),
                        };
                        match room {
                            Ok(Some(permit)) => server.hold(stream, peer, permit),
                            Ok(None) => server.events.refused(),
                            Err(place) => server.answer_cheap(stream, place),
                        }
                    });
                }
                Err(_) => {
                    server.events.refused();
                    drop(stream);
                }
            },
        }
        // Let the new connection read its request before the next accept: a scraper that
        // sent its request at once is then no eviction candidate, however many idle
        // connections are queued behind it.
        tokio::task::yield_now().await;
    }
}

/// What every connection's task shares.
struct Server<F> {
    limits: Limits,
    /// One permit per connection held under the cap.
    slots: Arc<Semaphore>,
    waiting: Arc<Waiting>,
    events: Arc<dyn Events>,
    respond: F,
    next_id: AtomicU64,
}

impl<F, Fut> Server<F>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    /// Holds a connection under the cap (its `permit`) and answers it.
    fn hold(&self, stream: TcpStream, peer: IpAddr, permit: OwnedSemaphorePermit) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let limits = self.limits;
        let respond = self.respond.clone();
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
        let queue = self.waiting.clone();
        let spawn = move || {
            tokio::spawn(async move {
                let _permit = permit;
                let head_read = {
                    let queue = queue.clone();
                    move || queue.answering(id)
                };
                let answer_ready = {
                    let queue = queue.clone();
                    move || queue.writing(id)
                };
                let exchange = answer(stream, limits, respond, head_read, answer_ready);
                if let Ok(Err(e)) = tokio::time::timeout(limits.answer_timeout, exchange).await {
                    debug!(error = %e, "client went away");
                }
                queue.remove(id);
            })
            .abort_handle()
        };
        if ready {
            self.waiting.spawn_answering(id, peer, spawn);
        } else {
            self.waiting.spawn(id, peer, socket, spawn);
        }
    }

    /// Answers a connection to a cheap path in a place of its own (`place`): never queued,
    /// so never evicted, and bounded by the same timeouts.
    fn answer_cheap(&self, stream: TcpStream, place: OwnedSemaphorePermit) {
        let limits = self.limits;
        let respond = self.respond.clone();
        tokio::spawn(async move {
            let _place = place;
            let exchange = answer(stream, limits, respond, || {}, || {});
            if let Ok(Err(e)) = tokio::time::timeout(limits.answer_timeout, exchange).await {
                debug!(error = %e, "client went away");
            }
        });
    }
}

/// A slot for a connection accepted at the cap: the oldest idle or slow connection of the
/// busiest address is evicted; while there is none, a slot that frees meanwhile is taken,
/// or the oldest one being written to is evicted as soon as it turns slow; past
/// `slow_after`, the oldest held one of the busiest address is evicted, whatever it does
/// (all of them were having answers made for that long: a flood of requests). So the new
/// connection waits at most `slow_after` (plus the second below), and is refused only when
/// the slot an eviction freed does not come.
async fn make_room(
    slots: &Arc<Semaphore>,
    waiting: &Waiting,
    slow_after: Duration,
    events: &dyn Events,
) -> Option<OwnedSemaphorePermit> {
    // A little past `slow_after`: by then the oldest one answered is slow, and evicted.
    let last_resort = Instant::now() + slow_after + Duration::from_millis(50);
    loop {
        let evicted = if Instant::now() < last_resort {
            waiting.evict_oldest()
        } else {
            waiting.evict_oldest_of_any()
        };
        if evicted {
            events.evicted();
            // The aborted task releases its slot when dropped, at the runtime's next turn.
            // A second at most: on a starved runtime the turn can take a while, and
            // refusing then would close the very scraper the eviction made room for.
            return match tokio::time::timeout(Duration::from_secs(1), slots.clone().acquire_owned())
                .await
            {
                Ok(Ok(permit)) => Some(permit),
                _ => None,
            };
        }
        let now = Instant::now();
        if now >= last_resort {
            return None;
        }
        let wait = waiting
            .until_next_slow(now)
            .unwrap_or(slow_after)
            .min(last_resort.saturating_duration_since(now))
            // Never a busy loop: a candidate due now is evicted at the next turn.
            .max(Duration::from_millis(1));
        if let Ok(acquired) = tokio::time::timeout(wait, slots.clone().acquire_owned()).await {
            return acquired.ok();
        }
    }
}

/// Whether the socket holds a complete request head already (`\r\n\r\n` within the first
/// 8 KiB, peeked without reading or waiting) for `GET` of one of `paths` (a query aside),
/// over HTTP/1.
fn is_cheap(stream: &impl AsRawFd, paths: &[&str]) -> bool {
    if paths.is_empty() {
        return false;
    }
    let mut buf = [0u8; 8192];
    let n = peek(stream, &mut buf);
    let head = &buf[..n];
    if !head.windows(4).any(|w| w == b"\r\n\r\n") {
        return false;
    }
    cheap_request_line(head, paths)
}

/// A place among the cheap ones for a connection waiting for room, as soon as its whole
/// head is in and asks for one of `paths`; pending forever when it does not (no paths, a
/// head for another path, over 8 KiB without its end, the peer's end, a socket error, no
/// cheap place left): the connection then only waits for room.
async fn cheap_place_once_head_is_in(
    stream: &TcpStream,
    paths: &[&str],
    cheap: &Arc<Semaphore>,
) -> OwnedSemaphorePermit {
    if paths.is_empty() {
        return std::future::pending().await;
    }
    loop {
        if stream.readable().await.is_err() {
            return std::future::pending().await;
        }
        // Peeked inside `try_io`, so that readiness is cleared (on a head not yet whole)
        // only if no new bytes came in after the peek: no wake-up is lost.
        let peeked = stream.try_io(tokio::io::Interest::READABLE, || {
            let mut buf = [0u8; 8192];
            let n = peek_or_error(stream, &mut buf)?;
            let head = &buf[..n];
            if head.windows(4).any(|w| w == b"\r\n\r\n") {
                Ok(Some(cheap_request_line(head, paths)))
            } else if n == 0 || n == buf.len() {
                // The peer's end (readiness that is never cleared), or no head in 8 KiB.
                Ok(None)
            } else {
                Err(io::ErrorKind::WouldBlock.into())
            }
        });
        match peeked {
            Ok(Some(true)) => match cheap.clone().try_acquire_owned() {
                Ok(place) => return place,
                Err(_) => return std::future::pending().await,
            },
            Ok(_) => return std::future::pending().await,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => return std::future::pending().await,
        }
    }
}

/// Whether a head's request line is `GET PATH[?QUERY] HTTP/1.x` for one of `paths`.
fn cheap_request_line(head: &[u8], paths: &[&str]) -> bool {
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let Some(rest) = line.strip_prefix(b"GET ") else {
        return false;
    };
    let Some(space) = rest.iter().position(|&b| b == b' ') else {
        return false;
    };
    let (target, version) = rest.split_at(space);
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    version.starts_with(b" HTTP/1.") && paths.iter().any(|p| p.as_bytes() == path)
}

/// Peeks at most `buf.len()` bytes of what the socket holds, without reading or waiting:
/// how many (0 when none, or on an error).
fn peek(stream: &impl AsRawFd, buf: &mut [u8]) -> usize {
    peek_or_error(stream, buf).unwrap_or(0)
}

/// [`peek`], telling apart the peer's end (`Ok(0)`), nothing in yet (`WouldBlock`) and
/// other errors.
fn peek_or_error(stream: &impl AsRawFd, buf: &mut [u8]) -> io::Result<usize> {
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
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Whether the socket holds a complete request head already (`\r\n\r\n` within the
/// first 8 KiB), peeked without reading or waiting.
fn head_is_in(stream: &impl AsRawFd) -> bool {
    let mut buf = [0u8; 8192];
    let n = peek(stream, &mut buf);
    n >= 4 && buf[..n].windows(4).any(|w| w == b"\r\n\r\n")
}

/// Reads one request and answers it; `head_read` runs once the head is in (the connection
/// is then no eviction candidate), `answer_ready` once the answer is made (a candidate
/// again once it has been written for `slow_after`). Each write has `write_timeout` to make
/// progress.
async fn answer<F, Fut>(
    stream: TcpStream,
    limits: Limits,
    respond: F,
    head_read: impl Fn() + Send + Sync + 'static,
    answer_ready: impl Fn() + Send + Sync + 'static,
) -> hyper::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let head_read = Arc::new(head_read);
    let answer_ready = Arc::new(answer_ready);
    let service = hyper::service::service_fn(move |request| {
        head_read();
        let response = respond(request);
        let answer_ready = answer_ready.clone();
        async move {
            let response = response.await;
            answer_ready();
            Ok::<_, Infallible>(response)
        }
    });
    hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .keep_alive(false)
        .max_buf_size(limits.max_request_head.max(8192))
        .serve_connection(
            TokioIo::new(WriteDeadline::new(stream, limits.write_timeout)),
            service,
        )
        .await
}

/// A stream whose writes fail with `TimedOut` once one has waited `limit` for the client
/// to take a byte (its socket buffers full: a client that does not read). Reads pass
/// through.
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    /// Armed while a write waits.
    stalled: Option<Pin<Box<Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> WriteDeadline<S> {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// A write is pending: Ready(error) once it has waited `limit`.
    fn poll_stall<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let limit = self.limit;
        let stalled = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match stalled.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("the client took no byte for {} ms", limit.as_millis()),
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    /// The outcome of a write: progress disarms the deadline, waiting arms it.
    fn timed<T>(&mut self, cx: &mut Context<'_>, poll: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                self.stalled = None;
                Poll::Ready(result)
            }
            Poll::Pending => self.poll_stall(cx),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.timed(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.timed(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.timed(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.timed(cx, poll)
    }
}

#[cfg(test)]
mod tests;
