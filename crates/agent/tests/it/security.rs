//! The attacks on the snapshot path (docs/snapshot-trust.md), each reproduced against real
//! etcd: a hostile pre-created file with revision i64::MAX, a symlink, a FIFO, squatted
//! temp names, a second agent on the same path, and etcd replaced by a fresh cluster.
//! Another user is played by chown to uid 65534 (the tests run as root).
//! Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt, lchown, symlink};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::*;
use dw_routing::Snapshot;
use tokio::net::{TcpListener, TcpStream};

/// What an attacker plants: a valid snapshot routing DE to itself, at revision i64::MAX.
fn hostile_bytes() -> Vec<u8> {
    let mut hostile = Snapshot::new(i64::MAX as u64, PREFIX);
    hostile.cluster_id = Some("1".into());
    hostile.kvs.insert(
        format!("{PREFIX}region/DE"),
        r#"{"shard":"evil","origins":["attacker"],"weight":{"attacker":1}}"#.into(),
    );
    hostile.to_json()
}

fn replaced_count(agent: &RunningAgent) -> Option<f64> {
    metric(
        &agent.status.render_metrics(),
        "dw_agent_untrusted_snapshot_replaced_total",
    )
}

fn mkfifo(path: &Path) {
    let name = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_file_with_revision_i64_max_is_replaced_on_first_publication() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");

    // Planted by another user, and then (the agent's own uid, no cluster id, as an older
    // agent would have left it) by someone who could write as the agent: both replaced.
    for owner in [Some(65534), None] {
        if owner.is_some() {
            fs::write(&snapshot, hostile_bytes()).unwrap();
            std::os::unix::fs::chown(&snapshot, owner, owner).unwrap();
        } else {
            let mut hostile = Snapshot::parse(&hostile_bytes()).unwrap();
            hostile.cluster_id = None;
            fs::write(&snapshot, hostile.to_json()).unwrap();
        }
        let (listed, _) = etcd_state(&mut client, 0).await;
        let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
        agent.published(listed).await;
        let published = read_snapshot(&snapshot).unwrap();
        assert_eq!(published.revision, listed);
        assert_eq!(published.kvs[&format!("{PREFIX}region/DE")], REGION);
        assert!(published.cluster_id.is_some_and(|id| id != "1"));
        assert_eq!(fs::metadata(&snapshot).unwrap().uid(), 0);
        assert_eq!(replaced_count(&agent), Some(1.0), "{owner:?}");
        // And it keeps publishing normally afterwards.
        let key = format!("{PREFIX}region/FR{}", owner.unwrap_or(0));
        let next = put(&mut client, &key, REGION).await;
        agent.published(next).await;
        agent.stop().await;
        fs::remove_file(&snapshot).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_symlink_at_the_path_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    // The link points at a file the attacker wants read as the snapshot, or overwritten.
    let victim = dir.path().join("victim.json");
    fs::write(&victim, hostile_bytes()).unwrap();
    symlink(&victim, &snapshot).unwrap();

    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
    agent.published(listed).await;
    assert!(fs::symlink_metadata(&snapshot).unwrap().is_file());
    assert_eq!(read_snapshot(&snapshot).unwrap().revision, listed);
    assert_eq!(fs::read(&victim).unwrap(), hostile_bytes());
    assert_eq!(replaced_count(&agent), Some(1.0));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_at_the_path_neither_hangs_the_agent_nor_stops_publication() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    mkfifo(&snapshot);
    let port = free_port();
    let args = vec![
        format!("--endpoints={}", cluster.endpoints().join(",")),
        format!("--snapshot={}", snapshot.display()),
        format!("--metrics-addr=127.0.0.1:{port}"),
    ]
    .into_iter()
    .chain(fast_flags())
    .collect::<Vec<_>>();
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    eventually("healthz is up", || async {
        http_get(addr, "/healthz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    converged(&mut client, &snapshot).await;
    assert!(fs::symlink_metadata(&snapshot).unwrap().is_file());
    let (_, metrics) = http_get(addr, "/metrics").await.unwrap();
    assert_eq!(
        metric(&metrics, "dw_agent_untrusted_snapshot_replaced_total"),
        Some(1.0)
    );
    assert!(agent.log().contains("FIFO"), "{}", agent.log());
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn squatted_temp_names_do_not_stop_publication() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let victim = dir.path().join("victim");
    fs::write(&victim, b"precious").unwrap();
    // The names older agents used (pid and counter, probe) for every pid up to 2048, and
    // a few hundred names of the new shape: symlinks of another user, pointing at a file
    // the attacker would like overwritten.
    let mut squatted = Vec::new();
    for pid in 1..=2048u32 {
        squatted.push(format!(".routing.json.{pid}.1.tmp"));
        squatted.push(format!(".routing.json.{pid}.probe.tmp"));
    }
    for n in 0..300u32 {
        squatted.push(format!(".routing.json.{n:0>8}"));
    }
    for name in &squatted {
        let path = dir.path().join(name);
        symlink(&victim, &path).unwrap();
        lchown(&path, Some(65534), Some(65534)).unwrap();
    }
    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
    agent.published(listed).await;
    for round in 0..20 {
        let revision = put(&mut client, &format!("{PREFIX}region/R{round}"), REGION).await;
        agent.published(revision).await;
    }
    assert_eq!(fs::read(&victim).unwrap(), b"precious");
    // The squatters' files are not the agent's to remove; its own temp files are gone.
    let left = fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().starts_with(".routing.json.")
        })
        .count();
    assert_eq!(left, squatted.len() + 1, "the squatters and the lock file");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_agent_on_the_same_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("routing.json");
    let args = vec![
        format!("--endpoints={}", cluster.endpoints().join(",")),
        format!("--snapshot={}", snapshot.display()),
        "--metrics-addr=off".to_owned(),
    ]
    .into_iter()
    .chain(fast_flags())
    .collect::<Vec<_>>();
    let mut first = AgentProcess::spawn(&args, &dir.path().join("first.log"));
    converged(&mut client, &snapshot).await;
    let mut second = AgentProcess::spawn(&args, &dir.path().join("second.log"));
    let status = second.wait_exit();
    assert_eq!(status.code(), Some(1), "{}", second.log());
    let log = second.log();
    assert!(
        log.contains(&format!("another dw-agent (pid {})", first.child.id()))
            && log.contains(".routing.json.lock"),
        "{log}"
    );
    // The first one is unaffected; once it is gone, an agent starts on the path again.
    assert!(first.child.try_wait().unwrap().is_none());
    assert!(first.terminate().success(), "{}", first.log());
    let mut third = AgentProcess::spawn(&args, &dir.path().join("third.log"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(third.child.try_wait().unwrap().is_none(), "{}", third.log());
    assert!(third.terminate().success(), "{}", third.log());
}

/// A TCP forwarder whose upstream can be switched; switching drops every connection.
struct Switch {
    url: String,
    upstream: Arc<Mutex<String>>,
    connections: Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>,
}

impl Switch {
    async fn start(upstream: &str) -> Switch {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let upstream = Arc::new(Mutex::new(
            upstream.trim_start_matches("http://").to_owned(),
        ));
        let connections = Arc::new(Mutex::new(Vec::new()));
        let (target, tasks) = (upstream.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((mut downstream, _)) = listener.accept().await {
                let address = target.lock().unwrap().clone();
                let task = tokio::spawn(async move {
                    if let Ok(mut upstream) = TcpStream::connect(address).await {
                        let _ = tokio::io::copy_bidirectional(&mut downstream, &mut upstream).await;
                    }
                });
                tasks.lock().unwrap().push(task);
            }
        });
        Switch {
            url,
            upstream,
            connections,
        }
    }

    fn switch_to(&self, upstream: &str) {
        *self.upstream.lock().unwrap() = upstream.trim_start_matches("http://").to_owned();
        for task in self.connections.lock().unwrap().drain(..) {
            task.abort();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_replaced_by_a_fresh_cluster_with_lower_revisions_is_followed() {
    let dir = tempfile::tempdir().unwrap();
    let old_dir = dir.path().join("old");
    let new_dir = dir.path().join("new");
    fs::create_dir_all(&old_dir).unwrap();
    fs::create_dir_all(&new_dir).unwrap();
    let old = Cluster::start(&old_dir, 1).await;
    let mut client = old.client().await;
    let mut last = 0;
    for n in 0..60 {
        last = put(&mut client, &format!("{PREFIX}region/R{}", n % 5), REGION).await;
    }
    let switch = Switch::start(&old.endpoints()[0]).await;
    let snapshot = dir.path().join("routing.json");
    let mut agent = RunningAgent::start(test_config(vec![switch.url.clone()], &snapshot)).await;
    agent.published(last).await;
    let old_cluster = read_snapshot(&snapshot).unwrap().cluster_id.unwrap();

    // The cluster is rebuilt from scratch behind the same address: a new cluster id, and
    // revisions starting over, far below the published one.
    let new = Cluster::start(&new_dir, 1).await;
    let mut new_client = new.client().await;
    let rebuilt = put(
        &mut new_client,
        &format!("{PREFIX}region/NEW"),
        r#"{"shard":"new-1","origins":["n"],"weight":{"n":1}}"#,
    )
    .await;
    assert!(rebuilt < last);
    let started = Instant::now();
    switch.switch_to(&new.endpoints()[0]);
    drop(old);
    agent.published(rebuilt).await;
    let elapsed = started.elapsed();
    eprintln!("followed the rebuilt cluster {elapsed:?} after the switch");
    let published = read_snapshot(&snapshot).unwrap();
    assert_eq!(published.revision, rebuilt);
    assert_eq!(published.kvs, etcd_state(&mut new_client, rebuilt).await.1);
    assert_ne!(published.cluster_id.unwrap(), old_cluster);
    assert!(
        elapsed < Duration::from_secs(10),
        "followed the new cluster after {elapsed:?}"
    );
    assert_eq!(replaced_count(&agent), Some(1.0));
    // And then follows it as usual, from its low revisions.
    let next = put(&mut new_client, &format!("{PREFIX}region/NEXT"), REGION).await;
    agent.published(next).await;
    eventually("healthy on the new cluster", || async {
        agent.status.get().health.is_ok()
    })
    .await;
    agent.stop().await;
}

/// The node report `/dw/nodes/<id>` as the agent last wrote it.
async fn node_report(client: &mut etcd_client::Client, id: &str) -> Option<serde_json::Value> {
    let response = client.get(format!("/dw/nodes/{id}"), None).await.ok()?;
    let kv = response.kvs().first()?;
    serde_json::from_slice(kv.value()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_the_readers_would_refuse_is_reported_stale() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    // The snapshot directory group-writable (the agent's group, a common mistake): the
    // agent can publish, and every router refuses the file.
    let shared = dir.path().join("run");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o775)).unwrap();
    let snapshot = shared.join("routing.json");
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.report = Some(dw_agent::ReportConfig::new("trust-node"));
    let mut agent = RunningAgent::start(config.clone()).await;
    agent.published(listed).await;
    let health = agent.status.get().health.unwrap_err();
    assert!(
        health.contains("readers refuse the snapshot")
            && health.contains("its directory is writable by group or others (mode 0775)"),
        "{health}"
    );
    eventually("the report says stale", || {
        let mut client = client.clone();
        async move {
            node_report(&mut client, "trust-node")
                .await
                .is_some_and(|report| {
                    report["state"] == "stale"
                        && report["reason"]
                            .as_str()
                            .is_some_and(|r| r.contains("writable by group"))
                })
        }
    })
    .await;
    // Fixed by the operator: the next publication finds the readers agree again.
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o755)).unwrap();
    let next = put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    agent.published(next).await;
    assert_eq!(agent.status.get().health, Ok(()));
    agent.stop().await;

    // Readers told to trust a user that does not exist refuse every file: so does the agent.
    config.trusted_owner = "dw-no-such-user".into();
    let agent = RunningAgent::start(config).await;
    let health = agent.status.get().health.unwrap_err();
    assert!(
        health.contains("\"dw-no-such-user\" names no user"),
        "{health}"
    );
    agent.stop().await;
}
