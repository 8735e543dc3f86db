//! Purging the page cache (`--purge-url`) against real etcd, the agent in this process and
//! a purge endpoint in the test that records every request. Needs `etcd` on PATH: run
//! inside `scripts/devenv exec --`.

use std::net::SocketAddr;
use std::time::Duration;

use dw_agent::{PurgeConfig, ReportConfig};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::support::*;

/// The delay before each purge is sent again, short for the test.
const REPEAT: Duration = Duration::from_millis(300);

/// One request the endpoint received.
#[derive(Debug)]
struct Received {
    request_line: String,
    authorization: Option<String>,
    body: String,
    at: Instant,
}

/// A purge endpoint answering 200 to everything, recording each request.
struct Endpoint {
    requests: mpsc::UnboundedReceiver<Received>,
    server: tokio::task::JoinHandle<()>,
    sender: mpsc::UnboundedSender<Received>,
}

impl Endpoint {
    async fn listen(addr: SocketAddr) -> Endpoint {
        let (sender, requests) = mpsc::unbounded_channel();
        let server = serve(addr, sender.clone()).await;
        Endpoint {
            requests,
            server,
            sender,
        }
    }

    /// Stops listening: connections to the port are refused until [`Endpoint::up`].
    async fn down(&mut self) {
        self.server.abort();
        let _ = (&mut self.server).await;
    }

    async fn up(&mut self, addr: SocketAddr) {
        self.server = serve(addr, self.sender.clone()).await;
    }

    /// The next request, within [`EVENTUALLY`].
    async fn next(&mut self) -> Received {
        tokio::time::timeout(EVENTUALLY, self.requests.recv())
            .await
            .expect("no purge request came")
            .expect("the endpoint stopped")
    }
}

async fn serve(
    addr: SocketAddr,
    sender: mpsc::UnboundedSender<Received>,
) -> tokio::task::JoinHandle<()> {
    let listener = TcpListener::bind(addr).await.unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let sender = sender.clone();
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let mut buffer = [0u8; 4096];
                // Bounded: the agent's bodies are at most 64 KiB.
                while bytes.len() < 256 * 1024 {
                    let Ok(n) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    bytes.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let header = |name: &str| {
                        head.lines().skip(1).find_map(|line| {
                            let (key, value) = line.split_once(':')?;
                            key.eq_ignore_ascii_case(name)
                                .then(|| value.trim().to_owned())
                        })
                    };
                    let length: usize = header("content-length")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(0);
                    if body.len() < length {
                        continue;
                    }
                    let _ = sender.send(Received {
                        request_line: head.lines().next().unwrap_or_default().to_owned(),
                        authorization: header("authorization"),
                        body: body[..length].to_owned(),
                        at: Instant::now(),
                    });
                    let _ = stream
                        .write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        )
                        .await;
                    return;
                }
            });
        }
    })
}

fn purge_config(addr: SocketAddr) -> PurgeConfig {
    PurgeConfig {
        repeat_after: REPEAT,
        ..PurgeConfig::new(&format!("http://{addr}/dw-purge.php")).unwrap()
    }
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The value of a counter on `/metrics`.
fn counter(agent: &RunningAgent, name: &str) -> u64 {
    metric(&agent.status.render_metrics(), name).expect("the counter is served") as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_change_purges_its_line_with_the_secret_then_again_after_the_delay() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut endpoint = Endpoint::listen(addr).await;
    let snapshot = dir.path().join("routing.json");
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.purge = Some(purge_config(addr));
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;

    // The first publication after start purges everything, and again after the delay.
    let first = endpoint.next().await;
    assert_eq!(first.request_line, "POST /dw-purge.php HTTP/1.1");
    assert_eq!(first.body, "all");
    let token = first
        .authorization
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .expect("a bearer token")
        .to_owned();
    assert_eq!(token.len(), 64);
    assert!(
        token
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{token}"
    );
    // The file beside the snapshot holds the token's SHA-256, not the token.
    let hash = std::fs::read_to_string(dir.path().join("routing.json.purge-sha256")).unwrap();
    assert_eq!(hash, format!("{}\n", sha256_hex(&token)));
    assert!(!hash.contains(&token));
    let repeat = endpoint.next().await;
    assert_eq!(repeat.body, "all");
    assert!(
        repeat.at.duration_since(first.at) >= REPEAT,
        "{:?} after, failures {}",
        repeat.at.duration_since(first.at),
        counter(&agent, "dw_agent_purge_failures_total")
    );

    // A key routing does not read purges nothing: the next request is region/DE's.
    put(
        &mut client,
        &format!("{PREFIX}origin/fra-a"),
        r#"{"addr":"10.0.0.1"}"#,
    )
    .await;
    let changed = put(
        &mut client,
        &format!("{PREFIX}region/DE"),
        REGION.replace("eu-1", "eu-2"),
    )
    .await;
    agent.published(changed).await;
    let purge = endpoint.next().await;
    assert_eq!(purge.body, "region/DE");
    assert_eq!(
        purge.authorization.as_deref(),
        Some(format!("Bearer {token}").as_str())
    );
    let again = endpoint.next().await;
    assert_eq!(again.body, "region/DE");
    assert!(again.at.duration_since(purge.at) >= REPEAT);

    // A deleted key and a policy change: both in one publication, one request.
    let mut txn_client = client.clone();
    let txn = etcd_client::Txn::new().and_then([
        etcd_client::TxnOp::delete(format!("{PREFIX}region/FR"), None),
        etcd_client::TxnOp::put(
            format!("{PREFIX}policy/global"),
            r#"{"default":"DE"}"#,
            None,
        ),
    ]);
    txn_client.txn(txn).await.unwrap();
    let purge = endpoint.next().await;
    assert_eq!(purge.body, "policy/global:chain\nregion/FR");
    assert_eq!(counter(&agent, "dw_agent_purge_failures_total"), 0);
    // Counted once answered: the last one may still be on its way back.
    assert!(counter(&agent, "dw_agent_purge_requests_total") >= 4);
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_endpoint_down_routing_publishes_and_the_purge_lands_once_it_is_back() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut endpoint = Endpoint::listen(addr).await;
    let snapshot = dir.path().join("routing.json");
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.purge = Some(purge_config(addr));
    let mut report = ReportConfig::new("purge-node");
    report.min_interval = Duration::from_millis(100);
    config.report = Some(report);
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;
    assert_eq!(endpoint.next().await.body, "all");
    assert_eq!(endpoint.next().await.body, "all", "the repeat");

    endpoint.down().await;
    let changed = put(
        &mut client,
        &format!("{PREFIX}region/DE"),
        REGION.replace("eu-1", "eu-2"),
    )
    .await;
    // Routing does not wait for the cache.
    agent.published(changed).await;
    assert_eq!(read_snapshot(&snapshot).unwrap().revision, changed);
    eventually("purge failures are counted and retried", || async {
        counter(&agent, "dw_agent_purge_failures_total") >= 3
    })
    .await;
    let reader = client.clone();
    eventually("the node report counts purge failures", || {
        let mut reader = reader.clone();
        async move {
            let answer = reader.get("/dw/nodes/purge-node", None).await.unwrap();
            answer.kvs().first().is_some_and(|kv| {
                let report: serde_json::Value = serde_json::from_slice(kv.value()).unwrap();
                report["purge_failures"].as_u64().is_some_and(|n| n > 0)
            })
        }
    })
    .await;

    endpoint.up(addr).await;
    let landed = endpoint.next().await;
    assert_eq!(landed.body, "region/DE");
    let again = endpoint.next().await;
    assert_eq!(again.body, "region/DE");
    assert!(again.at.duration_since(landed.at) >= REPEAT);
    // Counted once answered: the repeat the endpoint just recorded may still be on its way
    // back, so the count is waited for. Four landed (`all` twice, `region/DE` twice).
    eventually("every purge that landed is counted", || async {
        let failures = counter(&agent, "dw_agent_purge_failures_total");
        counter(&agent, "dw_agent_purge_requests_total") >= failures + 4
    })
    .await;
    agent.stop().await;
}

// ---- who receives the secret (issue 40, finding 6) ------------------------------------

/// The uid (and gid) the web server's workers and the squatters run as here: `nobody`.
const NOBODY: u32 = 65534;

/// Drops the calling thread, and only it, to uid and gid [`NOBODY`] with no supplementary
/// group (raw syscalls: glibc's setuid() would change every thread of the test binary).
/// `false` when the test binary is not root.
fn become_nobody_on_this_thread() -> bool {
    // SAFETY: plain syscalls on the calling thread's credentials; no memory is shared.
    unsafe {
        if libc::geteuid() != 0 {
            return false;
        }
        assert_eq!(
            libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()),
            0
        );
        assert_eq!(
            libc::syscall(libc::SYS_setresgid, NOBODY, NOBODY, NOBODY),
            0
        );
        assert_eq!(
            libc::syscall(libc::SYS_setresuid, NOBODY, NOBODY, NOBODY),
            0
        );
    }
    true
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A TCP listener on `addr` made by the calling thread (so owned by its uid), with
/// `SO_REUSEADDR` as web servers set it and, for IPv6, `IPV6_V6ONLY` set to `v6only`.
fn bind_listener(addr: SocketAddr, v6only: bool) -> std::io::Result<std::net::TcpListener> {
    let socket = bind_socket(addr, v6only, false)?;
    listen(&socket)?;
    Ok(socket)
}

/// listen(2) on a socket [`bind_socket`] bound.
fn listen(socket: &std::net::TcpListener) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: listen on a descriptor the listener owns.
    if unsafe { libc::listen(socket.as_raw_fd(), 128) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A TCP socket bound to `addr` by the calling thread, not listening yet: `SO_REUSEADDR`,
/// `SO_REUSEPORT` when `reuseport`, and for IPv6 `IPV6_V6ONLY` set to `v6only`.
fn bind_socket(
    addr: SocketAddr,
    v6only: bool,
    reuseport: bool,
) -> std::io::Result<std::net::TcpListener> {
    use std::os::fd::FromRawFd;
    let fail = || Err(std::io::Error::last_os_error());
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: the fd is owned by the listener returned, or closed on every error path.
    unsafe {
        let fd = libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return fail();
        }
        let listener = std::net::TcpListener::from_raw_fd(fd);
        let on: libc::c_int = 1;
        let size = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        let option = |level, name, value: libc::c_int| {
            libc::setsockopt(fd, level, name, (&value as *const libc::c_int).cast(), size)
        };
        if option(libc::SOL_SOCKET, libc::SO_REUSEADDR, on) != 0
            || (reuseport && option(libc::SOL_SOCKET, libc::SO_REUSEPORT, on) != 0)
        {
            return fail();
        }
        let result = match addr {
            SocketAddr::V4(v4) => {
                let sockaddr = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: v4.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(v4.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                libc::bind(
                    fd,
                    (&sockaddr as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                )
            }
            SocketAddr::V6(v6) => {
                if option(libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, v6only as libc::c_int) != 0 {
                    return fail();
                }
                let sockaddr = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: v6.port().to_be(),
                    sin6_flowinfo: 0,
                    sin6_addr: libc::in6_addr {
                        s6_addr: v6.ip().octets(),
                    },
                    sin6_scope_id: 0,
                };
                libc::bind(
                    fd,
                    (&sockaddr as *const libc::sockaddr_in6).cast(),
                    std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t,
                )
            }
        };
        if result != 0 {
            return fail();
        }
        Ok(listener)
    }
}

/// What a server thread of uid [`NOBODY`] received: the bytes of each connection.
#[derive(Default)]
struct Connections(std::sync::Mutex<Vec<Vec<u8>>>);

impl Connections {
    fn count(&self) -> usize {
        self.0.lock().unwrap().len()
    }
    fn bytes(&self) -> usize {
        self.0.lock().unwrap().iter().map(Vec::len).sum()
    }
    /// The connections that carried the agent's bearer token.
    fn with_token(&self) -> usize {
        let needle = b"authorization: bearer ";
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|c| {
                c.to_ascii_lowercase()
                    .windows(needle.len())
                    .any(|w| w == needle)
            })
            .count()
    }
}

/// A thread of uid [`NOBODY`] that accepts on a listener and answers `200` to anything,
/// as a purge endpoint would: nginx's worker (root made the listener) or a squatter (it
/// made the listener itself).
struct NobodyServer {
    connections: std::sync::Arc<Connections>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NobodyServer {
    /// A worker of uid [`NOBODY`] accepting on `listener`, which root made.
    fn worker(listener: std::net::TcpListener) -> NobodyServer {
        NobodyServer::spawn(move || Ok(listener))
    }

    /// A squatter: a thread of uid [`NOBODY`] binds `addr` itself. The bind's error when
    /// it cannot.
    fn squatter(addr: SocketAddr, v6only: bool) -> std::io::Result<NobodyServer> {
        let (bound, result) = std::sync::mpsc::channel();
        let server = NobodyServer::spawn(move || {
            let listener = bind_listener(addr, v6only);
            let _ = bound.send(listener.as_ref().map(|_| ()).map_err(|e| e.kind()));
            listener
        });
        match result.recv().unwrap() {
            Ok(()) => Ok(server),
            Err(kind) => Err(std::io::Error::from(kind)),
        }
    }

    fn spawn(
        listen: impl FnOnce() -> std::io::Result<std::net::TcpListener> + Send + 'static,
    ) -> NobodyServer {
        use std::io::{Read, Write};
        let connections = std::sync::Arc::new(Connections::default());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (seen, halt) = (connections.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            assert!(become_nobody_on_this_thread(), "the test checked for root");
            let Ok(listener) = listen() else { return };
            listener.set_nonblocking(true).unwrap();
            while !halt.load(std::sync::atomic::Ordering::SeqCst) {
                let mut stream = match listener.accept() {
                    Ok((stream, _)) => stream,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        std::thread::sleep(Duration::from_millis(2));
                        continue;
                    }
                    Err(_) => return,
                };
                stream.set_nonblocking(false).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(500)))
                    .unwrap();
                let mut bytes = Vec::new();
                let mut buffer = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buffer) {
                    if n == 0 {
                        break;
                    }
                    bytes.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let length = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|l| l.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if body.len() >= length {
                            break;
                        }
                    }
                }
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                seen.0.lock().unwrap().push(bytes);
            }
        });
        NobodyServer {
            connections,
            stop,
            thread: Some(thread),
        }
    }

    /// Stops accepting and closes the listener.
    fn stop(mut self) -> std::sync::Arc<Connections> {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            thread.join().unwrap();
        }
        self.connections.clone()
    }
}

/// Purges that landed: requests - failures.
fn landed(agent: &RunningAgent) -> u64 {
    counter(agent, "dw_agent_purge_requests_total")
        - counter(agent, "dw_agent_purge_failures_total")
}

fn no_repeat(url: &str) -> PurgeConfig {
    PurgeConfig {
        repeat_after: Duration::ZERO,
        ..PurgeConfig::new(url).unwrap()
    }
}

/// nginx with workers as `nobody`: root makes the listener, a worker accepts. Linux gives
/// the accepted socket the worker's uid; the agent judges the listener, so every purge
/// lands (before issue 40 about half of them were refused as a squatter's).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_purge_lands_when_a_worker_of_another_uid_accepts_it() {
    if !is_root() {
        println!("skipped: needs root (a thread drops to uid {NOBODY})");
        return;
    }
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    const CHANGES: usize = 20;
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let worker = NobodyServer::worker(bind_listener(addr, false).unwrap());
    let mut config = test_config(cluster.endpoints(), &dir.path().join("routing.json"));
    config.purge = Some(no_repeat(&format!("http://{addr}/dw-purge.php")));
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;
    for change in 0..=CHANGES {
        if change > 0 {
            let region = REGION.replace("eu-1", &format!("eu-{}", change + 1));
            let revision = put(&mut client, &format!("{PREFIX}region/DE"), region).await;
            agent.published(revision).await;
        }
        let worker = &worker;
        eventually("the purge reaches the worker", || async move {
            worker.connections.count() > change
        })
        .await;
    }
    eventually("every purge is counted", || async {
        counter(&agent, "dw_agent_purge_requests_total") > CHANGES as u64
    })
    .await;
    let failures = counter(&agent, "dw_agent_purge_failures_total");
    let connections = worker.stop();
    assert_eq!(
        (failures, connections.count(), connections.with_token()),
        (0, CHANGES + 1, CHANGES + 1),
        "no purge refused, each connection a request with the secret"
    );
    assert_eq!(landed(&agent), CHANGES as u64 + 1);
    agent.stop().await;
}

/// A process of another user holding the purge port, however it binds: it gets
/// connections and no byte (no token), its 200 never counts as landed, and once it is gone
/// and root's listener is back the purge lands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_squatter_of_another_uid_gets_no_byte_on_any_family() {
    if !is_root() {
        println!("skipped: needs root (a thread drops to uid {NOBODY})");
        return;
    }
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let mut skipped = 0;
    // (the purge URL's host, where the squatter binds, IPV6_V6ONLY)
    for (host, squat, v6only) in [
        ("127.0.0.1", "127.0.0.1", false),
        ("127.0.0.1", "0.0.0.0", false),
        ("127.0.0.1", "::", false),
        ("[::1]", "::1", true),
        ("[::1]", "::", true),
    ] {
        let port = free_port();
        let squat_at = SocketAddr::new(squat.parse().unwrap(), port);
        let squatter = match NobodyServer::squatter(squat_at, v6only) {
            Ok(squatter) => squatter,
            Err(e) if squat_at.is_ipv6() => {
                println!("skipped: {squat_at}: no IPv6 here ({e})");
                skipped += 1;
                continue;
            }
            Err(e) => panic!("the squatter cannot bind {squat_at}: {e}"),
        };
        let server: SocketAddr = format!("{host}:{port}").parse().unwrap();
        // Before the web server starts: it cannot take the port the squatter holds.
        let refused = bind_listener(server, true).unwrap_err();
        assert_eq!(refused.kind(), std::io::ErrorKind::AddrInUse, "{squat_at}");

        let listed = put(
            &mut client,
            &format!("{PREFIX}region/DE"),
            REGION.replace("eu-1", &format!("eu-{port}")),
        )
        .await;
        // A snapshot of its own: each scenario is an agent of its own.
        let snapshot = dir.path().join(format!("routing-{port}.json"));
        let mut config = test_config(cluster.endpoints(), &snapshot);
        config.purge = Some(no_repeat(&format!("http://{host}:{port}/dw-purge.php")));
        let mut agent = RunningAgent::start(config).await;
        agent.published(listed).await;
        eventually("the refused purges are counted and retried", || async {
            counter(&agent, "dw_agent_purge_failures_total") >= 3
        })
        .await;
        let connections = squatter.stop();
        assert!(connections.count() >= 1, "{squat_at}: the agent connected");
        assert_eq!(connections.bytes(), 0, "{squat_at}: not a byte, no token");
        assert_eq!(landed(&agent), 0, "{squat_at}: its 200 did not land");

        // The squatter gone, root's listener (a worker of uid nobody accepting) on the
        // port: the retry lands.
        let worker = NobodyServer::worker(bind_listener(server, true).unwrap());
        eventually("the retry lands on root's listener", || async {
            landed(&agent) >= 1
        })
        .await;
        assert_eq!(worker.stop().with_token(), 1, "{squat_at}");
        agent.stop().await;
    }
    println!("squatter families: 5, skipped {skipped}");
}

/// After the web server started on 127.0.0.1, a squatter can still hold the same port on
/// IPv6 (v6-only `[::]`): with a `localhost` URL the agent refuses it and purges through
/// 127.0.0.1. No other user can listen on the port where it would take IPv4 connections,
/// not with a socket bound before the server's, nor with `SO_REUSEPORT` (the kernel rules
/// the check rests on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beside_the_running_server_a_squatter_gets_nothing_and_purges_land() {
    if !is_root() {
        println!("skipped: needs root (a thread drops to uid {NOBODY})");
        return;
    }
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let port = free_port();
    let server: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // A squatter that bound the address before the server, and listens once it does.
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let early = std::thread::spawn(move || {
        assert!(become_nobody_on_this_thread());
        let socket = bind_socket(server, false, false).unwrap();
        bound_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        listen(&socket).map_err(|e| e.kind())
    });
    bound_rx.recv().unwrap();
    // Root's listener in a reuseport group, as nginx's `listen ... reuseport` makes them.
    let root = bind_socket(server, false, true).unwrap();
    listen(&root).unwrap();
    go_tx.send(()).unwrap();
    assert_eq!(
        early.join().unwrap(),
        Err(std::io::ErrorKind::AddrInUse),
        "listen(2) checks the port again: a socket bound earlier cannot listen beside root's"
    );
    let reuseport = std::thread::spawn(move || {
        assert!(become_nobody_on_this_thread());
        bind_socket(server, false, true)
            .and_then(|s| listen(&s))
            .map_err(|e| e.kind())
    });
    assert_eq!(
        reuseport.join().unwrap(),
        Err(std::io::ErrorKind::AddrInUse),
        "SO_REUSEPORT groups only sockets of one owner"
    );
    let worker = NobodyServer::worker(root);
    for (addr, v6only) in [("0.0.0.0", false), ("127.0.0.1", false), ("::", false)] {
        let addr = SocketAddr::new(addr.parse().unwrap(), port);
        match NobodyServer::squatter(addr, v6only) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {}
            Err(e) if addr.is_ipv6() => println!("skipped: {addr}: no IPv6 here ({e})"),
            Err(e) => panic!("{addr}: {e}"),
            Ok(squatter) => {
                squatter.stop();
                panic!("{addr}: another user listens where root's listener does");
            }
        }
    }
    let squat_at: SocketAddr = format!("[::]:{port}").parse().unwrap();
    let Ok(squatter) = NobodyServer::squatter(squat_at, true) else {
        println!("skipped: no IPv6 here");
        worker.stop();
        return;
    };
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let mut config = test_config(cluster.endpoints(), &dir.path().join("routing.json"));
    config.purge = Some(no_repeat(&format!("http://localhost:{port}/dw-purge.php")));
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;
    eventually("the purge lands through 127.0.0.1", || async {
        landed(&agent) >= 1
    })
    .await;
    let squatted = squatter.stop();
    let served = worker.stop();
    assert_eq!(counter(&agent, "dw_agent_purge_failures_total"), 0);
    assert_eq!(served.with_token(), 1);
    assert_eq!(squatted.bytes(), 0, "the squatter got no byte");
    agent.stop().await;
}

/// A listener on `addr` that another user owns (uid 65534), as a squatter's is, that never
/// accepts. A thread of its own switches its effective uid alone to bind it: the raw
/// syscall changes the calling thread only (glibc's wrapper would change every thread of
/// the test process), and the thread ends right after.
fn squat_as_nobody(addr: SocketAddr) -> std::net::TcpListener {
    std::thread::spawn(move || {
        let keep = libc::uid_t::MAX; // -1: unchanged
        // SAFETY: setresuid(2) takes three integers and touches no memory of ours.
        let switched = unsafe { libc::syscall(libc::SYS_setresuid, keep, 65534, keep) };
        assert_eq!(switched, 0, "setresuid (the tests run as root)");
        let listener = std::net::TcpListener::bind(addr);
        // SAFETY: as above; the saved uid is still 0, so the way back is allowed.
        let restored = unsafe { libc::syscall(libc::SYS_setresuid, keep, 0, keep) };
        assert_eq!(restored, 0);
        listener.expect("the squatter binds")
    })
    .join()
    .expect("the squatter's thread")
}

/// With a `localhost` URL and another user's process listening on one loopback address
/// (issue 40, 7b), the purge lands at the web server on the other: each address the name
/// resolves to is tried, 127.0.0.1 then [::1], and the squatter gets a connection with no
/// byte on it. Run once with the squatter on each family.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_localhost_url_purges_past_a_squatter_on_either_loopback() {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host(("localhost", 80))
        .await
        .map(Iterator::collect)
        .unwrap_or_default();
    if !(resolved.iter().any(SocketAddr::is_ipv4) && resolved.iter().any(SocketAddr::is_ipv6)) {
        eprintln!("SKIPPED: localhost resolves to {resolved:?} here, not to both loopbacks");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    for (squatter_ip, server_ip) in [("::1", "127.0.0.1"), ("127.0.0.1", "::1")] {
        let port = free_port();
        let squatter = squat_as_nobody(SocketAddr::new(squatter_ip.parse().unwrap(), port));
        let mut endpoint =
            Endpoint::listen(SocketAddr::new(server_ip.parse().unwrap(), port)).await;
        let snapshot = dir.path().join(format!("routing-{port}.json"));
        let mut config = test_config(cluster.endpoints(), &snapshot);
        config.purge = Some(PurgeConfig {
            repeat_after: Duration::ZERO,
            ..PurgeConfig::new(&format!("http://localhost:{port}/dw-purge.php")).unwrap()
        });
        let mut agent = RunningAgent::start(config).await;
        agent.published(listed).await;
        let landed = endpoint.next().await;
        assert_eq!(landed.body, "all", "squatter on {squatter_ip}");
        assert!(landed.authorization.is_some());
        // Whatever reached the squatter's port: connections with no byte on them.
        squatter.set_nonblocking(true).unwrap();
        while let Ok((mut stream, _)) = squatter.accept() {
            use std::io::Read;
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(5)))
                .unwrap();
            let mut received = Vec::new();
            let _ = stream.read_to_end(&mut received);
            assert!(
                received.is_empty(),
                "the squatter on {squatter_ip} got {received:?}"
            );
        }
        agent.stop().await;
    }
}
