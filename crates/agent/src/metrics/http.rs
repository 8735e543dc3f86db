//! `GET /metrics` and `GET /healthz`, served by hyper (HTTP/1.1, one request per
//! connection, then closed).
//!
//! Nothing on this port may take publication down: every connection costs a descriptor,
//! and the agent needs descriptors to publish. So (`dw_http_guard`, which `dwctl status
//! --serve` uses too) at most `max_connections` are held at once, each for at most
//! [`HEAD_TIMEOUT`] until its request head is in and [`CLIENT_TIMEOUT`] in all, and a
//! write of the answer waits at most [`WRITE_TIMEOUT`] for the client to read. A
//! connection beyond the cap evicts the oldest idle one (still waiting for its request
//! head) or slow one (answered for [`SLOW_AFTER`] or more: a client that does not read)
//! of the address holding the most of them; when every held connection is being
//! answered, and none for that long, the new one is closed at once.
//!
//! Nor may `/metrics` take `/healthz` down (issue 40, finding 5: a counter file of hostile
//! label values renders 6.6 MB). A `GET /healthz` whose head is in when it is accepted is
//! answered outside the cap, in one of [`HEALTH_CONNECTIONS`] places of its own (past them
//! it goes through the cap): it never waits for room behind clients that do not read, nor
//! behind connections waiting for room (they wait in tasks of their own, not in the accept
//! loop). A render runs on the blocking pool, never on the runtime
//! thread that answers `/healthz` and runs the watch loop; one render runs at a time, and
//! the scrapes that arrive while it runs share it. A render is at most
//! [`MAX_RENDER_BYTES`] (cut at a line's end past it, counted). At most [`RENDERS_HELD`]
//! renders are held in memory (each until its last client has it or is closed); with all
//! of them held, a scrape is answered with the newest one again (counted) rather than
//! waiting. Rendering takes no lock publication holds for longer than a counter update
//! ([`crate::metrics`]).

use std::sync::{Arc, Weak};
use std::time::Instant;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

#[cfg(doc)]
use crate::config::bounds::MAX_RENDER_BYTES;
use crate::config::bounds::{
    CLIENT_TIMEOUT, HEAD_TIMEOUT, HEALTH_CONNECTIONS, MAX_REQUEST_HEAD, RENDERS_HELD, SLOW_AFTER,
    WRITE_TIMEOUT,
};

/// Answered outside the connection cap (`dw_http_guard`'s cheap paths): its answer is a
/// line, made at once from state in memory.
const HEALTH_PATHS: &[&str] = &["/healthz"];
use crate::metrics::{self, Metrics};

/// Counts the guard's evictions and refusals in `/metrics`.
struct Counted(Arc<Metrics>);

impl dw_http_guard::Events for Counted {
    fn evicted(&self) {
        self.0.metrics_connection_evicted();
    }
    fn refused(&self) {
        self.0.metrics_connection_refused();
    }
}

/// One render of `/metrics`, and its place among the [`RENDERS_HELD`]: freed when the
/// last answer holding it is dropped (written, or its connection closed).
struct Rendered {
    text: String,
    _held: OwnedSemaphorePermit,
}

/// A render as an answer's body (a cheap clone per client).
struct Body(Arc<Rendered>);

impl AsRef<[u8]> for Body {
    fn as_ref(&self) -> &[u8] {
        self.0.text.as_bytes()
    }
}

/// The newest render: when it was done, and the render while anyone holds it.
struct Newest {
    done: Instant,
    render: Weak<Rendered>,
}

/// Makes the renders `/metrics` serves (see the module's text).
pub(crate) struct Renders {
    metrics: Arc<Metrics>,
    /// One permit per render that may be held.
    held: Arc<Semaphore>,
    /// One permit: the render being made (kept by the blocking task itself, so a render
    /// whose scrape went away still counts until it ends).
    making: Arc<Semaphore>,
    /// Taken by each scrape in turn: the newest render, to share.
    newest: Mutex<Option<Newest>>,
}

impl Renders {
    pub(crate) fn new(metrics: Arc<Metrics>, held: usize) -> Renders {
        Renders {
            metrics,
            held: Arc::new(Semaphore::new(held.max(1))),
            making: Arc::new(Semaphore::new(1)),
            newest: Mutex::new(None),
        }
    }

    /// The text for a scrape that arrived now: the render that was being made when it
    /// arrived (shared with every scrape that waited for it), or a new one, or, when every
    /// render that may be held is held, the newest one again.
    pub(crate) async fn get(&self) -> Bytes {
        let arrived = Instant::now();
        let mut newest = self.newest.lock().await;
        let alive = newest
            .as_ref()
            .and_then(|n| Some((n.done, n.render.upgrade()?)));
        // Made while this scrape waited: it is as fresh as a scrape can get.
        if let Some((done, render)) = &alive
            && *done >= arrived
        {
            return Bytes::from_owner(Body(render.clone()));
        }
        let held = match (self.held.clone().try_acquire_owned(), alive) {
            (Ok(held), _) => held,
            (Err(_), Some((_, render))) => {
                self.metrics.render_reused();
                return Bytes::from_owner(Body(render));
            }
            // Every place held, and not by the newest render: wait for one.
            (Err(_), None) => match self.held.clone().acquire_owned().await {
                Ok(held) => held,
                Err(_) => return Bytes::new(),
            },
        };
        let Ok(making) = self.making.clone().acquire_owned().await else {
            return Bytes::new();
        };
        let metrics = self.metrics.clone();
        let render = tokio::task::spawn_blocking(move || {
            let _making = making;
            Rendered {
                text: metrics.render(),
                _held: held,
            }
        })
        .await;
        let Ok(render) = render else {
            // The render panicked: an empty answer, the next scrape tries again.
            return Bytes::new();
        };
        let render = Arc::new(render);
        *newest = Some(Newest {
            done: Instant::now(),
            render: Arc::downgrade(&render),
        });
        Bytes::from_owner(Body(render))
    }
}

/// Serves until the future is dropped (the connection handling is `dw_http_guard`'s, shared
/// with `dwctl status --serve`).
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>, max_connections: usize) {
    let limits = dw_http_guard::Limits {
        max_connections,
        head_timeout: HEAD_TIMEOUT,
        answer_timeout: CLIENT_TIMEOUT,
        max_request_head: MAX_REQUEST_HEAD,
        write_timeout: WRITE_TIMEOUT,
        slow_after: SLOW_AFTER,
        cheap_paths: HEALTH_PATHS,
        cheap_connections: HEALTH_CONNECTIONS,
    };
    let events = Arc::new(Counted(metrics.clone()));
    let renders = Arc::new(Renders::new(metrics.clone(), RENDERS_HELD));
    dw_http_guard::serve(listener, limits, events, move |request| {
        let metrics = metrics.clone();
        let renders = renders.clone();
        // Only what routing needs is taken from the request: its method and path.
        let get = request.method() == Method::GET;
        let path = request.uri().path().to_owned();
        async move { respond(&metrics, &renders, get, &path).await }
    })
    .await;
}

async fn respond(
    metrics: &Metrics,
    renders: &Renders,
    get: bool,
    path: &str,
) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (get, path) {
        (true, "/metrics") => (StatusCode::OK, metrics::CONTENT_TYPE, renders.get().await),
        (true, "/healthz") => match metrics.health() {
            Ok(()) => (
                StatusCode::OK,
                "text/plain; charset=utf-8",
                Bytes::from_static(b"ok\n"),
            ),
            Err(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                Bytes::from(format!("{reason}\n")),
            ),
        },
        (true, _) => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"try /metrics or /healthz\n"),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Bytes::from_static(b"GET only\n"),
        ),
    };
    let mut response = Response::new(Full::new(body));
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
    use tokio::net::TcpStream;

    use std::time::Duration;

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

    /// At the cap, a new connection evicts the oldest one still waiting for its head; a
    /// `/healthz` is answered outside the cap and evicts nothing.
    #[tokio::test]
    async fn a_connection_over_the_cap_evicts_the_oldest_idle_one() {
        let (addr, metrics) = start(2).await;
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let answer = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        let text = metrics.render();
        assert!(
            text.contains("\ndw_agent_metrics_connections_evicted_total 0\n"),
            "{text}"
        );
        let answer = exchange(addr, b"GET /other HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 404 "), "{answer}");
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

    /// A collector that blocks its render until the test releases it (at most 20 s),
    /// saying on which thread it runs.
    #[derive(Debug)]
    struct Blocking {
        entered: std::sync::mpsc::SyncSender<std::thread::ThreadId>,
        release: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
        released: Arc<std::sync::atomic::AtomicBool>,
    }

    impl prometheus_client::collector::Collector for Blocking {
        fn encode(
            &self,
            _encoder: prometheus_client::encoding::DescriptorEncoder,
        ) -> Result<(), std::fmt::Error> {
            let _ = self.entered.try_send(std::thread::current().id());
            let release = self.release.lock().unwrap();
            if release.recv_timeout(Duration::from_secs(20)).is_ok() {
                self.released
                    .store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(())
        }
    }

    /// Issue 40, finding 5: a render runs off the thread that serves `/healthz` (this
    /// test's runtime thread, as the agent's one runtime thread): while a render is stuck,
    /// `/healthz` is answered. On main the render ran on that thread, and nothing else did.
    #[tokio::test]
    async fn healthz_is_answered_while_a_render_is_stuck() {
        let (entered, entered_rx) = std::sync::mpsc::sync_channel(1);
        let (release, release_rx) = std::sync::mpsc::channel();
        let released = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut metrics = Metrics::new(Duration::from_secs(60), None);
        metrics.series.add_collector(Box::new(Blocking {
            entered,
            release: std::sync::Mutex::new(release_rx),
            released: released.clone(),
        }));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, Arc::new(metrics), 4));
        let scrape = tokio::spawn(exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"));
        let mut render_thread = None;
        for _ in 0..2000 {
            match entered_rx.try_recv() {
                Ok(thread) => {
                    render_thread = Some(thread);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
        let render_thread = render_thread.expect("the render started");
        assert_ne!(
            render_thread,
            std::thread::current().id(),
            "rendered on the runtime thread"
        );
        let health = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(health.starts_with("HTTP/1.1 503 "), "{health}");
        assert!(health.ends_with("\r\n\r\nstarting\n"), "{health}");
        release.send(()).unwrap();
        let answer = scrape.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(
            released.load(std::sync::atomic::Ordering::SeqCst),
            "the render was released by the test, after /healthz answered"
        );
    }

    /// At most `held` renders live at once: with the one place held, a second scrape
    /// gets the same render (counted), and a new render is made once it is free. Scrapes
    /// arriving while a render runs share the next one; a scrape never gets a render that
    /// started before it arrived while a place is free.
    #[tokio::test]
    async fn renders_held_are_bounded_and_shared() {
        let metrics = Arc::new(Metrics::new(Duration::from_secs(60), None));
        let reused = || metrics.series.single.metrics_renders_reused.get();
        let one = Renders::new(metrics.clone(), 1);
        let first = one.get().await;
        let again = one.get().await;
        assert_eq!(first.as_ptr(), again.as_ptr(), "the one render, again");
        assert_eq!(reused(), 1);
        drop((first, again));
        let fresh = one.get().await;
        assert_eq!(reused(), 1, "a new render once the place is free");
        drop(fresh);
        let two = Renders::new(metrics.clone(), 2);
        let a = two.get().await;
        let b = two.get().await;
        assert_ne!(a.as_ptr(), b.as_ptr(), "a place free: a render of its own");
        let c = two.get().await;
        assert_eq!(b.as_ptr(), c.as_ptr(), "both places held: the newest again");
        assert_eq!(reused(), 2);
        assert!(
            metrics
                .render()
                .contains("\ndw_agent_metrics_renders_reused_total 2\n")
        );
    }

    /// A connection to `to` (IPv4) from the local address `from` (blocking).
    fn connect_from(from: [u8; 4], to: SocketAddr) -> std::io::Result<std::net::TcpStream> {
        use std::os::fd::FromRawFd;
        let SocketAddr::V4(to) = to else {
            return Err(std::io::Error::other("IPv4 only"));
        };
        let address = |ip: [u8; 4], port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes(ip),
            },
            sin_zero: [0; 8],
        };
        let (local, remote) = (address(from, 0), address(to.ip().octets(), to.port()));
        let length = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: plain socket calls on a descriptor this function owns (the stream closes
        // it on every return); bind(2) and connect(2) read the addresses, which live across
        // the calls.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let stream = std::net::TcpStream::from_raw_fd(fd);
            if libc::bind(fd, (&raw const local).cast(), length) != 0
                || libc::connect(fd, (&raw const remote).cast(), length) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(stream)
        }
    }

    /// A counter file as hostile as its layout allows: every one of its 4,096 label sets
    /// with four 128-byte values, each byte one the agent escapes to three.
    fn write_maximal_counter_file(dir: &std::path::Path) {
        use dw_traffic::{
            Counters, LabelSet, ProcessLocks, Step, count, words_to_bytes, zeroed_words,
        };
        let words = zeroed_words();
        let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
        let slot = counters.slot_counters(counters.claim_slot(1).unwrap());
        for set in 0..dw_traffic::layout::MAX_LABEL_SETS {
            let value = |field: u8| {
                let mut value = format!("{set:04}").into_bytes();
                value.push(field);
                value.resize(dw_traffic::layout::MAX_LABEL_BYTES, b'"');
                value
            };
            let labels = LabelSet::new(
                &value(b'g'),
                Step::Country,
                &value(b'k'),
                &value(b'o'),
                &value(b's'),
                false,
            );
            count(slot, counters.label_id(&labels));
        }
        let path = dir.join(dw_traffic::file_name(1000));
        std::fs::write(&path, words_to_bytes(&words)).unwrap();
        std::os::unix::fs::chown(&path, Some(1000), None).expect("chown (root, in the devenv)");
    }

    /// Scrapes in the test below, and clients that send a request and never read. The
    /// scrapes are few: unoptimised (the `tests` profile) a maximal render takes a second
    /// or more. tests/slow-clients/run asks 100 of the release agent, and wants 99 %.
    const SCRAPES: usize = 10;
    const NON_READERS: usize = 64;

    /// Issue 40, finding 5, at its worst: a maximal counter file and 64 clients that send
    /// `GET /metrics` from 127.0.0.2 and never read (each holding its connection 3 s, then
    /// again), against the agent's port on one runtime thread of its own, as in
    /// production; Prometheus scrapes from its own address (127.0.0.1 here). Every one of a
    /// bounded loop of scrapes is answered whole, and every `/healthz` beside them. The
    /// render fits its cap, cut nowhere.
    #[test]
    fn scrapes_are_answered_beside_a_maximal_file_and_clients_that_do_not_read() {
        use std::io::{Read, Write};
        use std::sync::atomic::{AtomicBool, Ordering};

        let dir = tempfile::tempdir().unwrap();
        write_maximal_counter_file(dir.path());
        let metrics = Arc::new(Metrics::new(Duration::from_secs(60), None).with_answers(
            dir.path().to_owned(),
            "n".into(),
            vec![("1000".into(), Some(1000))],
        ));
        let text = metrics.render();
        let series = text
            .lines()
            .filter(|l| l.starts_with("dw_router_answers_total{"))
            .count();
        assert_eq!(series, dw_traffic::layout::MAX_LABEL_SETS);
        assert!(text.len() > 6_000_000, "{}", text.len());
        assert!(
            text.len() <= crate::config::bounds::MAX_RENDER_BYTES,
            "{}",
            text.len()
        );
        assert!(text.contains("\ndw_agent_metrics_render_cuts_total 0\n"));

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        listener.set_nonblocking(true).unwrap();
        let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = {
            let metrics = metrics.clone();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let listener = TcpListener::from_std(listener).unwrap();
                    tokio::select! {
                        () = serve(listener, metrics, 64) => {}
                        _ = stopped => {}
                    }
                });
            })
        };
        let stop = Arc::new(AtomicBool::new(false));
        let non_readers: Vec<_> = (0..NON_READERS)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::SeqCst) {
                        if let Ok(mut stream) = connect_from([127, 0, 0, 2], addr) {
                            let _ = stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
                            for _ in 0..30 {
                                if stop.load(Ordering::SeqCst) {
                                    break;
                                }
                                std::thread::sleep(Duration::from_millis(100));
                            }
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(1));
        let ask = |path: &str| -> Option<Vec<u8>> {
            let mut stream = std::net::TcpStream::connect(addr).ok()?;
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .ok()?;
            stream
                .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .ok()?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).ok()?;
            Some(answer)
        };
        let (mut scraped, mut healthy) = (0, 0);
        for _ in 0..SCRAPES {
            let whole = |answer: &[u8]| {
                answer.starts_with(b"HTTP/1.1 200 ")
                    && answer.len() > 6_000_000
                    && answer.ends_with(b"\n")
                    && std::str::from_utf8(answer)
                        .is_ok_and(|text| text.contains("\ndw_router_answers_overflow_total{"))
            };
            scraped += usize::from(ask("/metrics").is_some_and(|a| whole(&a)));
            healthy +=
                usize::from(ask("/healthz").is_some_and(|a| a.starts_with(b"HTTP/1.1 503 ")));
        }
        stop.store(true, Ordering::SeqCst);
        for non_reader in non_readers {
            non_reader.join().unwrap();
        }
        let _ = stop_server.send(());
        server.join().unwrap();
        let text = metrics.render();
        eprintln!(
            "{scraped} of {SCRAPES} scrapes answered whole, {healthy} /healthz; {}",
            text.lines()
                .filter(|l| l.starts_with("dw_agent_metrics_"))
                .collect::<Vec<_>>()
                .join("; ")
        );
        assert_eq!(scraped, SCRAPES, "scrapes answered whole");
        assert_eq!(healthy, SCRAPES, "/healthz answered every time");
    }
}
