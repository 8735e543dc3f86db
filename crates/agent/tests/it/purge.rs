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
