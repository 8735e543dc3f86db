//! Node reports and the fleet view, end to end: `dw-agent` processes with node ids against
//! real etcd, and `dwctl status` / `--wait` (run in-process through the dwctl library,
//! with the exit code it would return). Needs `etcd` on PATH: run inside
//! `scripts/devenv exec --`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;

const REGION: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_agents_report_and_wait_follows_the_live_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;

    let mut agents: Vec<AgentProcess> = (0..5)
        .map(|i| {
            let snapshot = dir.path().join(format!("routing-{i}.json"));
            let labels = format!("--labels=dc={},ring={i}", if i < 3 { "fra" } else { "iad" });
            AgentProcess::spawn(
                &node_agent_args(&endpoints, &snapshot, &format!("node-{i}"), &[&labels]),
                &dir.path().join(format!("agent-{i}.log")),
            )
        })
        .collect();

    // Every node at the routing revision: exit 0, and the summary says so.
    let status = status_until(&endpoints, "five nodes are current", |code, s| {
        code == 0 && s["live"] == 5
    })
    .await;
    let revision = status["revision"].as_i64().unwrap();
    assert_eq!(status["current"], 5, "{status}");
    assert_eq!(
        status["summary"],
        format!("5 of 5 live nodes at revision {revision}")
    );
    assert_eq!(node(&status, "node-4")["labels"]["dc"], "iad");
    assert_eq!(node(&status, "node-0")["state"], "ok");
    let (code, fra) = dwctl(&endpoints, &["status", "--labels=dc=fra"]).await;
    assert_eq!((code, fra["live"].as_u64()), (0, Some(3)), "{fra}");

    // A change reaches all five, and --wait says so.
    let started = Instant::now();
    let (code, set) = dwctl(&endpoints, &["region", "set", "FR", REGION, "--wait"]).await;
    assert_eq!(code, 0, "{set}");
    assert_eq!(set["fleet"]["reached"], true, "{set}");
    assert_eq!(set["fleet"]["at_revision"], 5, "{set}");
    eprintln!(
        "region set --wait: 5 nodes reported in {:?}",
        started.elapsed()
    );

    // A frozen agent: --wait 2s times out with exit 5 and names it; status exits 5 too.
    signal(agents[2].child.id(), libc::SIGSTOP);
    let (code, drained) = dwctl(
        &endpoints,
        &["drain", "fra-a", "--region=DE", "--wait", "2s"],
    )
    .await;
    assert_eq!(code, 5, "{drained}");
    let committed = drained["revision"].as_i64().unwrap();
    let lagging = drained["fleet"]["lagging"].as_array().unwrap();
    assert_eq!(lagging.len(), 1, "{drained}");
    assert_eq!(lagging[0]["id"], "node-2");
    assert!(lagging[0]["revision"].as_i64().unwrap() < committed);
    assert_eq!(drained["fleet"]["at_revision"], 4);
    // With a quorum of 80% the four others are enough.
    let (code, restored) = dwctl(
        &endpoints,
        &["restore", "fra-a", "--wait=2s", "--quorum=80"],
    )
    .await;
    assert_eq!(code, 0, "{restored}");
    let (code, status) = dwctl(&endpoints, &["status"]).await;
    assert_eq!(code, 5, "{status}");
    assert_eq!(status["current"], 4, "{status}");
    assert!(node(&status, "node-2")["lag_revisions"].as_i64().unwrap() > 0);

    // Killed: listed as gone once its lease expires (10 s), and --wait no longer waits.
    signal(agents[2].child.id(), libc::SIGKILL);
    let _ = agents[2].child.wait();
    let killed_at = Instant::now();
    let status = status_until(&endpoints, "node-2 is gone", |_, s| s["live"] == 4).await;
    eprintln!(
        "node-2 listed as gone {:?} after SIGKILL",
        killed_at.elapsed()
    );
    assert_eq!(node(&status, "node-2")["state"], "gone");
    assert_eq!(node(&status, "node-2")["live"], false);
    assert_eq!(status["gone"], 1);
    let (code, set) = dwctl(&endpoints, &["region", "set", "FR", REGION, "--wait=5s"]).await;
    assert_eq!(code, 0, "{set}");
    assert_eq!(set["fleet"]["live"], 4, "{set}");

    // A delete is a change too: status's revision is the delete's, and the nodes have it.
    let (code, deleted) = dwctl(&endpoints, &["region", "delete", "FR", "--wait=5s"]).await;
    assert_eq!(code, 0, "{deleted}");
    let (code, status) = dwctl(&endpoints, &["status"]).await;
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["revision"], deleted["revision"], "{status}");

    // A key no node can use: every live node reports it as rejected.
    let bad = format!("{PREFIX}region/XX");
    put(&mut client, &bad, "{not json").await;
    let status = status_until(&endpoints, "the bad key is reported", |_, s| {
        s["nodes"]
            .as_array()
            .is_some_and(|nodes| nodes.iter().filter(|n| n["state"] == "rejected").count() == 4)
    })
    .await;
    let rejected = &node(&status, "node-0")["rejected"];
    assert_eq!(rejected[0]["key"], bad, "{status}");
    assert!(
        rejected[0]["error"].as_str().unwrap().contains("JSON"),
        "{status}"
    );

    // A clean stop (SIGTERM) revokes the lease: gone at once, not after 10 s.
    assert!(agents[0].terminate().success(), "{}", agents[0].log());
    let stopped_at = Instant::now();
    let status = status_until(&endpoints, "node-0 is gone", |_, s| s["live"] == 3).await;
    assert!(stopped_at.elapsed() < Duration::from_secs(5));
    assert_eq!(node(&status, "node-0")["state"], "gone");

    for agent in &mut agents {
        if agent.child.try_wait().unwrap().is_none() {
            assert!(agent.terminate().success(), "{}", agent.log());
        }
    }
}

/// The number of times a key was written, from etcd: its version counts the puts since it
/// was created.
async fn writes_of(client: &mut etcd_client::Client, key: &str) -> i64 {
    let response = client.get(key, None).await.unwrap();
    response.kvs().first().map_or(0, |kv| kv.version())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_changes_costs_a_handful_of_report_writes() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let mut agent = AgentProcess::spawn(
        &node_agent_args(&endpoints, &snapshot, "burst", &[]),
        &dir.path().join("agent.log"),
    );
    let key = "/dw/nodes/burst";
    eventually("the first report", || {
        let mut client = client.clone();
        async move { writes_of(&mut client, key).await > 0 }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = writes_of(&mut client, key).await;

    let started = Instant::now();
    let mut last = 0;
    for n in 0..200 {
        let value = format!(
            r#"{{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{{"fra-a":{},"fra-b":{}}}}}"#,
            n % 100 + 1,
            100 - n % 100
        );
        last = put(&mut client, &format!("{PREFIX}region/DE"), value).await;
    }
    let burst = started.elapsed();
    // The last report carries the last revision.
    status_until(&endpoints, "the burst is reported", |_, s| {
        s["nodes"][0]["revision"].as_u64() == Some(last)
    })
    .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let writes = writes_of(&mut client, key).await - before;
    // At most one write per second of burst, one at the start and one when it ends.
    let allowed = burst.as_secs() as i64 + 3;
    eprintln!("200 changes in {burst:?} cost {writes} report writes (allowed {allowed})");
    assert!(
        writes >= 1 && writes <= allowed,
        "{writes} writes for a {burst:?} burst"
    );
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_refused_by_rbac_does_not_stop_publication() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut admin = cluster.client().await;
    put(&mut admin, &format!("{PREFIX}region/DE"), REGION).await;
    let mut root = enable_auth_with_a_reader(&cluster).await;

    let snapshot = dir.path().join("routing.json");
    let port = free_port();
    let args = node_agent_args(
        &cluster.endpoints(),
        &snapshot,
        "no-write",
        &[
            "--user=agent",
            "--password=agent-pw",
            &format!("--metrics-addr=127.0.0.1:{port}"),
        ],
    );
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    converged(&mut root, &snapshot).await;
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    eventually("the refused report is counted", || async {
        let Some((_, text)) = http_get(addr, "/metrics").await else {
            return false;
        };
        metric(&text, "dw_agent_report_failures_total").is_some_and(|n| n >= 1.0)
    })
    .await;
    // Routing goes on: a change is published, and /healthz stays green.
    put(&mut root, &format!("{PREFIX}region/FR"), REGION).await;
    let published = converged(&mut root, &snapshot).await;
    assert!(published.kvs.contains_key(&format!("{PREFIX}region/FR")));
    let (code, _) = http_get(addr, "/healthz").await.unwrap();
    assert_eq!(code, 200);
    assert!(
        root.get("/dw/nodes/no-write", None)
            .await
            .unwrap()
            .kvs()
            .is_empty()
    );
    let log = agent.log();
    assert!(log.contains("node report"), "{log}");
    assert!(log.contains("routing is unaffected"), "{log}");
    assert!(agent.terminate().success(), "{log}");
}

/// `etcd grpc-proxy start` in front of the cluster, restartable on the same port.
struct GrpcProxy {
    child: std::process::Child,
    listen: String,
    upstream: String,
    log: std::path::PathBuf,
}

impl GrpcProxy {
    fn start(upstream: &str, log: &Path) -> GrpcProxy {
        let listen = format!("127.0.0.1:{}", free_port());
        let child = GrpcProxy::spawn(upstream, &listen, log);
        GrpcProxy {
            child,
            listen,
            upstream: upstream.to_owned(),
            log: log.to_path_buf(),
        }
    }

    /// `upstream`: one member's URL or several, comma-separated.
    fn spawn(upstream: &str, listen: &str, log: &Path) -> std::process::Child {
        let upstream = upstream
            .split(',')
            .map(|url| url.trim_start_matches("http://"))
            .collect::<Vec<_>>()
            .join(",");
        std::process::Command::new("etcd")
            .args([
                "grpc-proxy",
                "start",
                &format!("--endpoints={upstream}"),
                &format!("--listen-addr={listen}"),
                &format!("--metrics-addr=http://127.0.0.1:{}", free_port()),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    }

    fn url(&self) -> String {
        format!("http://{}", self.listen)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same address after [`GrpcProxy::stop`].
    fn start_again(&mut self) {
        self.child = GrpcProxy::spawn(&self.upstream, &self.listen, &self.log);
    }
}

impl Drop for GrpcProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_work_through_etcd_grpc_proxy_and_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let mut proxy = GrpcProxy::start(&cluster.endpoints()[0], &dir.path().join("proxy.log"));
    let proxied = vec![proxy.url()];

    let snapshots: Vec<_> = (0..2)
        .map(|i| dir.path().join(format!("routing-{i}.json")))
        .collect();
    let metrics: Vec<String> = snapshots
        .iter()
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let mut agents: Vec<AgentProcess> = snapshots
        .iter()
        .zip(&metrics)
        .enumerate()
        .map(|(i, (snapshot, metrics))| {
            let metrics = format!("--metrics-addr={metrics}");
            AgentProcess::spawn(
                &node_agent_args(&proxied, snapshot, &format!("proxied-{i}"), &[&metrics]),
                &dir.path().join(format!("agent-{i}.log")),
            )
        })
        .collect();
    // List and watch through the proxy; the reports (leases, txn) go through it too.
    for snapshot in &snapshots {
        converged(&mut client, snapshot).await;
    }
    let status = status_until(&proxied, "both proxied agents report", |code, s| {
        code == 0 && s["live"] == 2
    })
    .await;
    assert_eq!(status["current"], 2, "{status}");
    let (code, set) = dwctl(&proxied, &["region", "set", "FR", REGION, "--wait=10s"]).await;
    assert_eq!(code, 0, "{set}");

    // The proxy never answers progress requests: a watch quiet for twice the stall timeout
    // (3 s) is checked by reads and kept, not ended as stalled.
    let scrape = |address: &String| {
        let address = address.parse().unwrap();
        async move {
            let (code, text) = http_get(address, "/metrics")
                .await
                .expect("the agent's metrics answer");
            assert_eq!(code, 200);
            text
        }
    };
    let mut reconnects = Vec::new();
    for address in &metrics {
        reconnects.push(metric(&scrape(address).await, "dw_agent_reconnects_total"));
    }
    tokio::time::sleep(Duration::from_secs(7)).await;
    for ((agent, address), before) in agents.iter().zip(&metrics).zip(reconnects) {
        let text = scrape(address).await;
        let log = agent.log();
        assert_eq!(metric(&text, "dw_agent_reconnects_total"), before, "{log}");
        assert!(text.contains("cause=\"stalled\"} 0"), "{text}");
        let checks = metric(&text, "dw_agent_silent_watch_checks_total").unwrap_or(0.0);
        assert!(checks >= 1.0, "{text}");
        assert_eq!(metric(&text, "dw_agent_healthy"), Some(1.0), "{text}");
    }
    put(&mut client, &format!("{PREFIX}region/ES"), REGION).await;
    for snapshot in &snapshots {
        let published = converged(&mut client, snapshot).await;
        assert!(published.kvs.contains_key(&format!("{PREFIX}region/ES")));
    }
    // A delete after the newest put, then the reports: status finds the delete through the
    // proxy too (its replay cannot count on progress notifications there).
    let (code, deleted) = dwctl(&proxied, &["region", "delete", "ES", "--wait=10s"]).await;
    assert_eq!(code, 0, "{deleted}");
    let (code, status) = dwctl(&proxied, &["status"]).await;
    assert_eq!(code, 0, "{status}");
    assert_eq!(status["revision"], deleted["revision"], "{status}");

    // The proxy stops; meanwhile etcd changes and compacts past every agent's revision.
    // Started again, it serves the agents a fresh listing and a watch from after it.
    proxy.stop();
    put(&mut client, &format!("{PREFIX}region/GB"), REGION).await;
    let mut compact_at = 0;
    for i in 0..20 {
        let value = format!(r#"{{"shard":"eu-{i}","origins":["fra-a"]}}"#);
        compact_at = put(&mut client, &format!("{PREFIX}region/DE"), value).await;
    }
    client
        .compact(
            compact_at as i64,
            Some(etcd_client::CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap();
    proxy.start_again();
    for snapshot in &snapshots {
        let published = converged(&mut client, snapshot).await;
        assert!(published.kvs.contains_key(&format!("{PREFIX}region/GB")));
    }
    let (code, set) = dwctl(&proxied, &["region", "set", "IT", REGION, "--wait=20s"]).await;
    assert_eq!(code, 0, "{set}");
    for agent in &mut agents {
        assert!(agent.terminate().success(), "{}", agent.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_behind_a_proxy_survive_the_loss_of_its_member() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    // The proxy knows every member; which one it talks to is its own choice, so each
    // member is lost in turn.
    let proxy = GrpcProxy::start(
        &cluster.endpoints().join(","),
        &dir.path().join("proxy.log"),
    );
    let proxied = vec![proxy.url()];
    let snapshots: Vec<_> = (0..2)
        .map(|i| dir.path().join(format!("routing-{i}.json")))
        .collect();
    let mut agents: Vec<AgentProcess> = snapshots
        .iter()
        .enumerate()
        .map(|(i, snapshot)| {
            AgentProcess::spawn(
                &node_agent_args(&proxied, snapshot, &format!("lossy-{i}"), &[]),
                &dir.path().join(format!("agent-{i}.log")),
            )
        })
        .collect();
    for snapshot in &snapshots {
        converged(&mut client, snapshot).await;
    }
    for lost in 0..cluster.members.len() {
        cluster.members[lost].kill();
        let survivors: Vec<String> = cluster
            .endpoints()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| *i != lost)
            .map(|(_, url)| url)
            .collect();
        let mut survivor = etcd_client::Client::connect(survivors, None).await.unwrap();
        let key = format!("{PREFIX}region/L{lost}");
        // Losing the leader costs an election: retry the write until the cluster takes it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = survivor.put(key.as_str(), REGION, None).await {
            assert!(
                Instant::now() < deadline,
                "no write after losing member {lost}: {e}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for (snapshot, agent) in snapshots.iter().zip(&agents) {
            let published = converged(&mut survivor, snapshot).await;
            assert!(published.kvs.contains_key(&key), "{}", agent.log());
        }
        cluster.members[lost].restart();
        assert!(cluster.wait_ready().await, "member {lost} came back");
    }
    // And the fleet view through the same proxy.
    let (code, set) = dwctl(&proxied, &["region", "set", "FR", REGION, "--wait=20s"]).await;
    assert_eq!(code, 0, "{set}");
    for agent in &mut agents {
        assert!(agent.terminate().success(), "{}", agent.log());
    }
}
