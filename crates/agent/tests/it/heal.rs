//! Node reports that heal, and conflicts (two agents, one node id), against real etcd:
//! `dw-agent` processes, and `dwctl status` / `--wait` in-process. What a node with a
//! prefix grant on `/dw/nodes/` can do to another node's report (delete it, overwrite it on
//! a lease of its own or on none) is done here by the test's own client. Needs `etcd` on
//! PATH: run inside `scripts/devenv exec --`.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::support::*;
use etcd_client::{Client, PutOptions};
use serde_json::Value;

/// The longest a heal may take here: the agent does it within a second; the bound only
/// keeps a broken agent from hanging the test (no timing is asserted below it).
const HEALED_WITHIN: Duration = Duration::from_secs(5);

const FORGED: &str = r#"{"revision":999999,"state":"ok"}"#;

/// The report under `key`: (its JSON, the lease it is on, its version).
async fn report(client: &mut Client, key: &str) -> Option<(Value, i64, i64)> {
    let response = client.get(key, None).await.unwrap();
    let kv = response.kvs().first()?;
    let value = serde_json::from_slice(kv.value()).unwrap_or(Value::Null);
    Some((value, kv.lease(), kv.version()))
}

async fn metrics_of(addr: SocketAddr, name: &str) -> f64 {
    let (_, text) = http_get(addr, "/metrics").await.expect("metrics answer");
    metric(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"))
}

fn metrics_flag(addr: SocketAddr) -> String {
    format!("--metrics-addr={addr}")
}

fn free_addr() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

/// Waits (up to [`HEALED_WITHIN`]) until both keys of `node` are `instance`'s again, on
/// `lease`; meanwhile every `dwctl status` that shows the forged revision must not count it
/// as current. Returns how long it took.
async fn healed(
    client: &mut Client,
    endpoints: &[String],
    node_id: &str,
    instance: &Value,
    lease: i64,
    check_status: bool,
) -> Duration {
    let started = Instant::now();
    let (live, seen) = (
        format!("/dw/nodes/{node_id}"),
        format!("/dw/nodes-seen/{node_id}"),
    );
    loop {
        if check_status {
            let (code, status) = dwctl(endpoints, &["status"]).await;
            let shown = node(&status, node_id);
            if shown["revision"] == 999_999 {
                assert_eq!(code, 5, "a forged report counted as current: {status}");
                assert_ne!(shown["state"], "ok", "{status}");
                assert_eq!(status["current"], 0, "{status}");
            }
        }
        let live = report(client, &live).await;
        let seen = report(client, &seen).await;
        let ours = |r: &Option<(Value, i64, i64)>, lease_ok: &dyn Fn(i64) -> bool| {
            r.as_ref()
                .is_some_and(|(value, on, _)| value["instance"] == *instance && lease_ok(*on))
        };
        if ours(&live, &|on| on == lease) && ours(&seen, &|on| on != 0) {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < HEALED_WITHIN,
            "the report was not healed within {HEALED_WITHIN:?}: live {live:?}, seen {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleted_and_forged_reports_are_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let addr = free_addr();
    let snapshot = dir.path().join("routing.json");
    let mut agent = AgentProcess::spawn(
        &node_agent_args(&endpoints, &snapshot, "victim", &[&metrics_flag(addr)]),
        &dir.path().join("agent.log"),
    );
    status_until(&endpoints, "the node reports", |code, s| {
        code == 0 && s["live"] == 1
    })
    .await;
    let (first, lease, _) = report(&mut client, "/dw/nodes/victim").await.unwrap();
    let instance = first["instance"].clone();
    assert_eq!(first["schema"], 2, "{first}");
    assert_eq!(metrics_of(addr, "dw_agent_report_heals_total").await, 0.0);

    // 2(a): deleted (the node would show as gone, and --wait not wait for it).
    let deleted = client.delete("/dw/nodes/victim", None).await.unwrap();
    let deleted_at = deleted.header().unwrap().revision();
    let took = healed(&mut client, &endpoints, "victim", &instance, lease, false).await;
    eprintln!("a deleted report came back after {took:?}");
    eventually("the heal is counted", || async {
        metrics_of(addr, "dw_agent_report_heals_total").await >= 1.0
    })
    .await;
    let log = agent.log();
    assert!(
        log.contains("deleted by someone else") && log.contains(&format!("revision={deleted_at}")),
        "{log}"
    );

    // 2(b): overwritten with a forged "ok" at a revision far ahead, on no lease (it would
    // count as live for ever), then on a lease of the forger's own.
    client.put("/dw/nodes/victim", FORGED, None).await.unwrap();
    let took = healed(&mut client, &endpoints, "victim", &instance, lease, true).await;
    eprintln!("a forged report on no lease was rewritten after {took:?}");
    let forger = client.lease_grant(60, None).await.unwrap().id();
    let on_forger = || Some(PutOptions::new().with_lease(forger));
    client
        .put("/dw/nodes/victim", FORGED, on_forger())
        .await
        .unwrap();
    let took = healed(&mut client, &endpoints, "victim", &instance, lease, true).await;
    eprintln!("a forged report on another lease was rewritten after {took:?}");

    // Both keys forged on the forger's lease, naming it (possible under a prefix grant):
    // believable by the lease check alone, so healing is what makes it short-lived.
    let named = format!(r#"{{"revision":999999,"state":"ok","lease":{forger}}}"#);
    let txn = etcd_client::Txn::new().and_then([
        etcd_client::TxnOp::put("/dw/nodes/victim", named.clone(), on_forger()),
        etcd_client::TxnOp::put("/dw/nodes-seen/victim", named, on_forger()),
    ]);
    client.txn(txn).await.unwrap();
    let took = healed(&mut client, &endpoints, "victim", &instance, lease, false).await;
    eprintln!("both keys forged on another lease were rewritten after {took:?}");
    eventually("every heal is counted", || async {
        metrics_of(addr, "dw_agent_report_heals_total").await >= 4.0
    })
    .await;

    // A lagging node (frozen) with a forged report: --wait does not count it, and once
    // the agent runs again its own report is back and the node is current.
    signal(agent.child.id(), libc::SIGSTOP);
    client
        .put("/dw/nodes/victim", FORGED, on_forger())
        .await
        .unwrap();
    let (code, set) = dwctl(&endpoints, &["region", "set", "FR", REGION, "--wait=2s"]).await;
    assert_eq!(code, 5, "{set}");
    assert_eq!(set["fleet"]["lagging"][0]["id"], "victim", "{set}");
    signal(agent.child.id(), libc::SIGCONT);
    healed(&mut client, &endpoints, "victim", &instance, lease, true).await;
    status_until(&endpoints, "the node is current again", |code, s| {
        code == 0 && s["current"] == 1
    })
    .await;
    let (health, _) = http_get(addr, "/healthz").await.unwrap();
    assert_eq!(health, 200);
    assert_eq!(
        metrics_of(addr, "dw_agent_report_conflicts_total").await,
        0.0
    );
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_agents_with_one_node_id_are_a_conflict_and_back_off() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let addrs = [free_addr(), free_addr()];
    let mut agents: Vec<AgentProcess> = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            let snapshot = dir.path().join(format!("routing-{i}.json"));
            AgentProcess::spawn(
                &node_agent_args(&endpoints, &snapshot, "twin", &[&metrics_flag(*addr)]),
                &dir.path().join(format!("agent-{i}.log")),
            )
        })
        .collect();

    // Both see the other: /healthz 503 naming the conflict, and status says `conflict`.
    for addr in addrs {
        eventually("both agents see the conflict", || async move {
            http_get(addr, "/healthz")
                .await
                .is_some_and(|(code, body)| code == 503 && body.contains("conflict"))
        })
        .await;
        assert_eq!(metrics_of(addr, "dw_agent_report_conflict").await, 1.0);
        assert!(metrics_of(addr, "dw_agent_report_conflicts_total").await >= 1.0);
    }
    let status = status_until(&endpoints, "status shows the conflict", |code, s| {
        code == 5 && node(s, "twin")["state"] == "conflict"
    })
    .await;
    assert_eq!(status["current"], 0, "{status}");
    let (_, body) = http_get(addrs[0], "/healthz").await.unwrap();
    assert!(body.contains("instance"), "{body}");
    // --wait does not count the node as current.
    let (code, set) = dwctl(&endpoints, &["region", "set", "FR", REGION, "--wait=2s"]).await;
    assert_eq!(code, 5, "{set}");
    assert_eq!(set["fleet"]["lagging"][0]["state"], "conflict", "{set}");

    // They back off: over ten seconds, a handful of writes, not a rewrite war (without
    // the backoff each would rewrite the other's report at once, hundreds of times).
    let (_, _, before) = report(&mut client, "/dw/nodes/twin").await.unwrap();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let (value, _, after) = report(&mut client, "/dw/nodes/twin").await.unwrap();
    let writes = after - before;
    eprintln!("two agents with one node id wrote its report {writes} times in 10 s");
    assert!(writes <= 12, "{writes} writes in 10 s");
    assert_eq!(value["state"], "conflict", "{value}");
    for agent in &mut agents {
        let log = agent.log();
        assert_eq!(
            log.matches("another agent writes this node's report")
                .count(),
            1,
            "logged once: {log}"
        );
    }
    for agent in &mut agents {
        assert!(agent.terminate().success(), "{}", agent.log());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_agent_takes_its_predecessors_report_without_a_conflict() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let spawn = |n: usize, addr: SocketAddr| {
        AgentProcess::spawn(
            &node_agent_args(&endpoints, &snapshot, "phoenix", &[&metrics_flag(addr)]),
            &dir.path().join(format!("agent-{n}.log")),
        )
    };
    let mut first = spawn(0, free_addr());
    status_until(&endpoints, "the first agent reports", |code, s| {
        code == 0 && s["live"] == 1
    })
    .await;
    let (old, _, _) = report(&mut client, "/dw/nodes/phoenix").await.unwrap();

    // Killed: its report stays, on its live lease, when the next agent starts. Then a
    // clean restart (SIGTERM) of that one.
    signal(first.child.id(), libc::SIGKILL);
    let _ = first.child.wait();
    let addr = free_addr();
    let mut second = spawn(1, addr);
    let reader = client.clone();
    let taken_over = |old: Value| {
        let mut client = reader.clone();
        async move {
            report(&mut client, "/dw/nodes/phoenix")
                .await
                .is_some_and(|(now, _, _)| now["instance"] != old["instance"])
        }
    };
    eventually("the second agent writes its report", || {
        taken_over(old.clone())
    })
    .await;
    let (old, _, _) = report(&mut client, "/dw/nodes/phoenix").await.unwrap();
    assert!(second.terminate().success(), "{}", second.log());
    let addr_third = free_addr();
    let mut third = spawn(2, addr_third);
    eventually("the third agent writes its report", || {
        taken_over(old.clone())
    })
    .await;

    // A few report intervals later: no conflict anywhere.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let status = status_until(&endpoints, "the node is current", |code, s| {
        code == 0 && s["current"] == 1
    })
    .await;
    assert_eq!(node(&status, "phoenix")["state"], "ok", "{status}");
    assert_eq!(
        metrics_of(addr_third, "dw_agent_report_conflicts_total").await,
        0.0
    );
    assert_eq!(
        metrics_of(addr_third, "dw_agent_report_conflict").await,
        0.0
    );
    let (health, body) = http_get(addr_third, "/healthz").await.unwrap();
    assert_eq!(health, 200, "{body}");
    let log = second.log() + &third.log();
    assert!(!log.contains("another agent writes"), "{log}");
    let _ = addr;
    assert!(third.terminate().success(), "{}", third.log());
}
