//! Findings of the robustness probe, each as the binary meets it: a flood of idle
//! connections on the metrics port, a directory given as `--snapshot`, SIGHUP, and a value
//! that turns into invalid UTF-8 through the watch. Needs `etcd` on PATH: run inside
//! `scripts/devenv exec --`.

use std::fs;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::support::*;
use tokio::net::TcpStream;

/// Keeps `count` connections to `addr` open that never send a byte, reconnecting each one
/// the server closes, until `stop` is set. Returns how many connections it made.
fn flood(addr: SocketAddr, count: usize, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let mut open: Vec<TcpStream> = Vec::with_capacity(count);
        let mut made = 0u64;
        while !stop.load(Ordering::Relaxed) {
            // Drop what the server closed (a read of 0 bytes, or an error).
            open.retain(|stream| {
                let mut byte = [0u8; 1];
                match stream.try_read(&mut byte) {
                    Ok(read) => read > 0,
                    Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                }
            });
            while open.len() < count {
                match tokio::time::timeout(Duration::from_millis(200), TcpStream::connect(addr))
                    .await
                {
                    Ok(Ok(stream)) => {
                        open.push(stream);
                        made += 1;
                    }
                    _ => break,
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        made
    })
}

/// 300 idle connections held open (and reopened when closed) against an agent whose
/// descriptor limit is 256: without a cap on the metrics port the agent runs out of
/// descriptors and stops publishing ("Too many open files"). With it, every change is
/// published promptly and `/healthz` answers throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_metrics_connections_stops_neither_publication_nor_healthz() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let metrics_flag = format!("--metrics-addr={addr}");
    // The default cap, said explicitly. With --metrics-max-connections=4096 (no cap below
    // the descriptor limit) this test fails with "Too many open files", as the agent
    // without a cap did.
    let args = agent_args(
        &cluster.endpoints(),
        &snapshot,
        &[&metrics_flag, "--metrics-max-connections=64"],
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_dw-agent"));
    // SAFETY: setrlimit is async-signal-safe and touches only the child's limits.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut agent = AgentProcess::spawn_with(command, &args, &dir.path().join("agent.log"));
    eventually("the first snapshot", || async { snapshot.exists() }).await;
    eventually("healthz is 200", || async {
        matches!(http_get(addr, "/healthz").await, Some((200, _)))
    })
    .await;

    let stop = Arc::new(AtomicBool::new(false));
    let flooder = flood(addr, 300, stop.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    // Across more than the 5 s idle timeout, so that closed and reopened connections count.
    let mut slowest = Duration::ZERO;
    let mut healthy_answers = 0;
    for round in 0..8 {
        let key = format!("{PREFIX}region/R{round}");
        let started = Instant::now();
        let revision = put(&mut client, &key, REGION).await;
        loop {
            if read_snapshot(&snapshot).is_some_and(|s| s.revision >= revision) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "round {round}: revision {revision} not published within 5 s under the flood; log:\n{}",
                agent.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        slowest = slowest.max(started.elapsed());
        // /healthz answers: a prober that sends its request at once is served.
        let mut answered = false;
        for _ in 0..20 {
            if let Some((200, _)) = http_get(addr, "/healthz").await {
                answered = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            answered,
            "round {round}: /healthz did not answer 200; log:\n{}",
            agent.log()
        );
        healthy_answers += 1;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let made = flooder.await.unwrap();
    assert!(made >= 300, "the flood made only {made} connections");
    assert_eq!(healthy_answers, 8);
    let log = agent.log();
    assert!(!log.contains("Too many open files"), "{log}");
    let (_, metrics) = http_get(addr, "/metrics").await.expect("metrics");
    assert_eq!(
        metric(&metrics, "dw_agent_snapshot_write_errors_total"),
        Some(0.0),
        "{metrics}"
    );
    assert!(
        metric(&metrics, "dw_agent_metrics_connections_evicted_total").unwrap_or(0.0) > 0.0,
        "the cap was reached: {metrics}"
    );
    eprintln!("flood: {made} connections, slowest publication {slowest:?}");
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[test]
fn a_directory_as_snapshot_exits_1_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("dw-router");
    fs::create_dir(&target).unwrap();
    let args = agent_args(&["http://127.0.0.1:1".to_owned()], &target, &[]);
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    let status = agent.wait_exit();
    let log = agent.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&format!("--snapshot {} is a directory", target.display())),
        "{log}"
    );
    assert_eq!(
        fs::read_dir(&target).unwrap().count(),
        0,
        "nothing written into it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_is_logged_and_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let args = agent_args(&cluster.endpoints(), &snapshot, &[]);
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    eventually("the first snapshot", || async { snapshot.exists() }).await;
    signal(agent.child.id(), libc::SIGHUP);
    eventually("SIGHUP is logged", || async {
        agent.log().contains("SIGHUP received and ignored")
    })
    .await;
    signal(agent.child.id(), libc::SIGHUP);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "the agent died on SIGHUP; log:\n{}",
        agent.log()
    );
    // Still publishing.
    let revision = put(&mut client, &format!("{PREFIX}region/AT"), REGION).await;
    eventually("the put after SIGHUP is published", || async {
        read_snapshot(&snapshot).is_some_and(|s| s.revision >= revision)
    })
    .await;
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_turning_into_invalid_utf8_is_logged_by_key_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    put(&mut client, &format!("{PREFIX}region/AT"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let metrics_flag = format!("--metrics-addr={addr}");
    let args = agent_args(&cluster.endpoints(), &snapshot, &[&metrics_flag]);
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    eventually("both regions published", || async {
        read_snapshot(&snapshot).is_some_and(|s| s.kvs.len() == 2)
    })
    .await;
    let key = format!("{PREFIX}region/DE");
    let revision = put(&mut client, &key, vec![b'{', 0xff, 0xfe, b'}']).await;
    eventually("the invalid value is dropped", || async {
        read_snapshot(&snapshot)
            .is_some_and(|s| s.revision >= revision && !s.kvs.contains_key(&key))
    })
    .await;
    let log = agent.log();
    assert!(
        log.lines()
            .any(|line| line.contains("WARN") && line.contains(&key) && line.contains("not UTF-8")),
        "the key is named in a warning: {log}"
    );
    let (_, metrics) = http_get(addr, "/metrics").await.expect("metrics");
    assert_eq!(
        metric(&metrics, "dw_agent_unrepresentable_keys"),
        Some(1.0),
        "{metrics}"
    );
    assert!(agent.terminate().success(), "{}", agent.log());
}
