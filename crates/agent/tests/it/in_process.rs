//! The agent against real etcd, run in this process so every publication is observed.
//! Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

use std::time::Duration;

use crate::support::*;
use dw_agent::State;
use etcd_client::{CompactionOptions, Txn, TxnOp};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_list_put_delete_transactions_and_large_values() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    put(
        &mut client,
        &format!("{PREFIX}policy/global"),
        r#"{"default":"DE"}"#,
    )
    .await;
    put(
        &mut client,
        &format!("{PREFIX}origin/fra-a"),
        r#"{"addr":"10.0.0.1:443"}"#,
    )
    .await;
    put(&mut client, "/elsewhere/region/XX", "not ours").await;
    let snapshot = dir.path().join("dw-routing.json");
    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;

    // Initial list: the file is etcd's state at the list revision.
    let (now, _) = etcd_state(&mut client, 0).await;
    let first = agent.published(now).await;
    let published = read_snapshot(&snapshot).unwrap();
    assert_eq!(published.revision, first.revision);
    assert_eq!(published.prefix, PREFIX);
    assert_eq!(published.kvs, etcd_state(&mut client, now).await.1);
    assert_eq!(published.kvs.len(), 3, "{:?}", published.kvs);

    // Put, then delete: each lands at its own revision.
    let put_revision = put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    agent.published(put_revision).await;
    assert_eq!(
        read_snapshot(&snapshot).unwrap().kvs[&format!("{PREFIX}region/FR")],
        REGION
    );
    let delete_revision = delete(&mut client, &format!("{PREFIX}region/FR")).await;
    agent.published(delete_revision).await;
    assert!(
        !read_snapshot(&snapshot)
            .unwrap()
            .kvs
            .contains_key(&format!("{PREFIX}region/FR"))
    );

    // Writes that change nothing under the prefix are not published: neither a write
    // elsewhere nor a put of the value a key already has. The next publication is the
    // transaction, in one write carrying all of its keys.
    put(&mut client, "/elsewhere/x", "1").await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let txn = Txn::new().and_then(vec![
        TxnOp::put(format!("{PREFIX}region/IT"), REGION, None),
        TxnOp::put(format!("{PREFIX}region/ES"), REGION, None),
        TxnOp::put(
            format!("{PREFIX}policy/global"),
            r#"{"default":"IT"}"#,
            None,
        ),
        TxnOp::delete(format!("{PREFIX}origin/fra-a"), None),
    ]);
    let txn_revision = client.txn(txn).await.unwrap().header().unwrap().revision() as u64;
    let next = agent.publications.recv().await.unwrap();
    assert_eq!(
        next.revision, txn_revision,
        "something other than the transaction was published"
    );
    let after_txn = read_snapshot(&snapshot).unwrap();
    assert_eq!(after_txn.revision, txn_revision);
    assert_eq!(after_txn.kvs, etcd_state(&mut client, txn_revision).await.1);
    assert_eq!(
        after_txn.kvs[&format!("{PREFIX}policy/global")],
        r#"{"default":"IT"}"#
    );
    assert!(!after_txn.kvs.contains_key(&format!("{PREFIX}origin/fra-a")));

    // A value over 1 MiB (etcd's default request limit is 1.5 MiB), carried byte for byte.
    let large = format!("{{\"blob\":\"{}\"}}", "é".repeat(600 * 1024));
    assert!(large.len() > 1024 * 1024);
    let large_revision = put(&mut client, &format!("{PREFIX}region/BIG"), large.clone()).await;
    agent.published(large_revision).await;
    assert_eq!(
        read_snapshot(&snapshot).unwrap().kvs[&format!("{PREFIX}region/BIG")],
        large
    );

    let status = agent.status.get();
    assert_eq!(status.state, State::Watching);
    assert_eq!(status.published_revision, Some(large_revision));
    assert_eq!(status.health, Ok(()));
    agent.stop().await;
    // Stopping leaves the snapshot in place, untouched.
    assert_eq!(read_snapshot(&snapshot).unwrap().revision, large_revision);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_keys_are_listed_in_pages_at_one_revision() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    for batch in 0..(10_000 / 125) {
        let ops: Vec<TxnOp> = (0..125)
            .map(|i| {
                let n = batch * 125 + i;
                TxnOp::put(
                    format!("{PREFIX}region/K{n:05}"),
                    format!("{{\"n\":{n}}}"),
                    None,
                )
            })
            .collect();
        client.txn(Txn::new().and_then(ops)).await.unwrap();
    }
    let snapshot = dir.path().join("dw-routing.json");
    let watcher = FileWatcher::start(&snapshot);
    // Keep writing while the agent lists 100-key pages: every page must be read at the
    // first page's revision, or the published state would match no revision of etcd.
    let storm = Storm::start(client.clone());
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.page_size = 100;
    let agent = RunningAgent::start(config).await;
    eventually("the first publication", || async {
        agent.status.get().snapshot_writes > 0
    })
    .await;
    let writes = storm.stop().await;
    assert!(writes > 0);
    let last = converged(&mut client, &snapshot).await;
    assert!(last.kvs.len() >= 10_000);
    let seen = watcher.finish();
    assert!(!seen.is_empty());
    assert_each_matches_etcd(&mut client, &seen).await;
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_while_cut_off_ends_in_a_fresh_listing() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    for i in 0..20 {
        put(&mut client, &format!("{PREFIX}region/R{i}"), REGION).await;
    }
    let proxy = Proxy::start(&cluster.endpoints()[0]).await;
    let snapshot = dir.path().join("dw-routing.json");
    let mut config = test_config(vec![proxy.url()], &snapshot);
    // The freeze below must not look like a stall: this test is about compaction.
    config.timing.stall_timeout = Duration::from_secs(30);
    let mut agent = RunningAgent::start(config).await;
    let (now, _) = etcd_state(&mut client, 0).await;
    agent.published(now).await;

    // Frozen: the watch stays open but nothing reaches the agent while etcd takes more
    // writes than the connection can buffer, then compacts past the agent's revision.
    proxy.freeze();
    let filler = "x".repeat(4096);
    for i in 0..1500 {
        put(
            &mut client,
            &format!("{PREFIX}region/R{}", i % 40),
            format!("{{\"f\":\"{filler}{i}\"}}"),
        )
        .await;
    }
    let compact_at = delete(&mut client, &format!("{PREFIX}region/R3")).await;
    client
        .compact(
            compact_at as i64,
            Some(CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap();
    proxy.pass();

    // Cut: every connection dropped and refused while etcd moves on and compacts again.
    eventually("the agent catches up after the freeze", || async {
        agent.status.get().mirror_revision >= compact_at
    })
    .await;
    proxy.cut();
    for i in 0..50 {
        put(&mut client, &format!("{PREFIX}region/C{i}"), REGION).await;
    }
    delete(&mut client, &format!("{PREFIX}region/R5")).await;
    let (cut_revision, _) = etcd_state(&mut client, 0).await;
    client
        .compact(
            cut_revision as i64,
            Some(CompactionOptions::new().with_physical()),
        )
        .await
        .unwrap();
    eventually("the agent notices the cut", || async {
        agent.status.get().reconnects > 0
    })
    .await;
    proxy.pass();

    let last = converged(&mut client, &snapshot).await;
    assert!(last.revision >= cut_revision);
    assert!(!last.kvs.contains_key(&format!("{PREFIX}region/R5")));
    eprintln!(
        "restarts after compaction: {:?}",
        agent.status.get().restarts
    );
    let published: Vec<u64> = agent.drain().iter().map(|p| p.revision).collect();
    assert!(published.windows(2).all(|w| w[0] < w[1]), "{published:?}");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_without_regions_is_held_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}policy/global"), "{}").await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("dw-routing.json");
    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
    agent.published(listed).await;

    // Deleting the last region is not published: the file keeps region/DE, and health
    // says why.
    delete(&mut client, &format!("{PREFIX}region/DE")).await;
    eventually("the hold shows in health", || async {
        agent
            .status
            .get()
            .health
            .is_err_and(|reason| reason.contains("--allow-empty"))
    })
    .await;
    let held = read_snapshot(&snapshot).unwrap();
    assert_eq!(held.revision, listed);
    assert!(held.kvs.contains_key(&format!("{PREFIX}region/DE")));

    // A region coming back is published at its own revision.
    let back = put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    agent.published(back).await;
    assert_eq!(agent.status.get().health, Ok(()));
    delete(&mut client, &format!("{PREFIX}region/FR")).await;
    eventually("held again", || async {
        agent.status.get().health.is_err()
    })
    .await;
    agent.stop().await;
    assert_eq!(read_snapshot(&snapshot).unwrap().revision, back);

    // With --allow-empty a restarted agent publishes the empty state.
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.allow_empty = true;
    let agent = RunningAgent::start(config).await;
    let mut check = client.clone();
    let emptied = converged(&mut check, &snapshot).await;
    assert!(emptied.revision > back);
    assert!(!emptied.kvs.keys().any(|k| k.contains("/region/")));
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_leader_killed_and_attached_member_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 3).await;
    let mut client = cluster.client().await;
    let snapshot = dir.path().join("dw-routing.json");
    let watcher = FileWatcher::start(&snapshot);
    let storm = Storm::start(client.clone());
    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
    eventually("the agent watches", || async {
        agent.status.get().state == State::Watching
    })
    .await;

    // SIGKILL the leader in the middle of the storm, then bring it back.
    let leader = loop {
        if let Some(leader) = cluster.leader().await {
            break leader;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let before_kill = agent.status.get().published_revision.unwrap_or(0);
    cluster.members[leader].kill();
    eventually("a publication after the leader died", || async {
        agent.status.get().published_revision.unwrap_or(0) > before_kill
            && agent.status.get().state == State::Watching
    })
    .await;
    cluster.members[leader].restart();

    // SIGSTOP the member the agent is attached to: the watch must not hang on it.
    let attached = agent.status.get().endpoint.unwrap();
    let stopped = cluster
        .endpoints()
        .iter()
        .position(|e| *e == attached)
        .unwrap();
    let before_stop = agent.status.get().published_revision.unwrap_or(0);
    cluster.members[stopped].pause();
    eventually(
        "the agent moves to another member and publishes",
        || async {
            let status = agent.status.get();
            status.endpoint.as_deref() != Some(attached.as_str())
                && status.state == State::Watching
                && status.published_revision.unwrap_or(0) > before_stop
        },
    )
    .await;
    cluster.members[stopped].resume();

    let writes = storm.stop().await;
    assert!(writes > 0);
    let last = converged(&mut client, &snapshot).await;
    assert_eq!(last.kvs, etcd_state(&mut client, last.revision).await.1);
    let seen = watcher.finish();
    assert!(seen.len() > 1);
    assert_each_matches_etcd(&mut client, &seen).await;
    let published: Vec<u64> = agent.drain().iter().map(|p| p.revision).collect();
    assert!(published.windows(2).all(|w| w[0] < w[1]), "{published:?}");
    let restarts = agent.status.get().restarts;
    // The stopped member cost at least one restart (stalled, or keepalive as a watch error).
    assert!(restarts.values().sum::<u64>() >= 1, "{restarts:?}");
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_is_reported_and_retried() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot_dir = dir.path().join("shm");
    std::fs::create_dir(&snapshot_dir).unwrap();
    let snapshot = snapshot_dir.join("dw-routing.json");
    let mut agent = RunningAgent::start(test_config(cluster.endpoints(), &snapshot)).await;
    agent.published(listed).await;

    // The directory disappears (say, a tmpfs unmounted under it): writes fail. It is
    // renamed away in one step, not removed file by file: the heartbeat may put a temp
    // file into it at any moment, and `remove_dir_all` then fails with "not empty".
    std::fs::rename(&snapshot_dir, dir.path().join("shm-gone")).unwrap();
    let changed = put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    eventually("the write error shows in health", || async {
        let status = agent.status.get();
        status.write_errors > 0
            && status
                .health
                .is_err_and(|reason| reason.contains("cannot write the snapshot"))
    })
    .await;
    assert_eq!(agent.status.get().published_revision, Some(listed));

    // It comes back: the pending state is published without any new write to etcd.
    std::fs::create_dir(&snapshot_dir).unwrap();
    agent.published(changed).await;
    let published = read_snapshot(&snapshot).unwrap();
    assert!(published.kvs.contains_key(&format!("{PREFIX}region/FR")));
    assert_eq!(agent.status.get().health, Ok(()));
    agent.stop().await;
}

/// The heartbeat file's JSON, once it is there and parses.
fn heartbeat(path: &std::path::Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_heartbeat_file_is_refreshed_and_says_stale_without_etcd() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("dw-routing.json");
    let path = dir.path().join("dw-routing.json.heartbeat");
    let mut config = test_config(cluster.endpoints(), &snapshot);
    config.heartbeat_interval = Duration::from_millis(100);
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;

    eventually(
        "the heartbeat says current at the published revision",
        || async {
            heartbeat(&path).is_some_and(|beat| {
                beat["state"] == "current" && beat["revision"] == listed && beat["interval"] == 0.1
            })
        },
    )
    .await;
    let meta = std::fs::symlink_metadata(&path).unwrap();
    assert!(meta.file_type().is_file());
    assert_eq!(meta.mode() & 0o777, 0o644);
    // SAFETY: geteuid has no failure mode.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let time = heartbeat(&path).unwrap()["time"].as_u64().unwrap();
    assert!(time.abs_diff(now) <= 5, "time {time}, now {now}");
    // Refreshed: each write is a new file renamed over the name.
    let first = meta.ino();
    eventually("the heartbeat file is rewritten", || async {
        std::fs::metadata(&path).is_ok_and(|m| m.ino() != first)
    })
    .await;

    // etcd goes away: the heartbeat says so, and names the reason; the revision stays.
    cluster.members[0].kill();
    eventually("the heartbeat says stale", || async {
        heartbeat(&path).is_some_and(|beat| {
            beat["state"] == "stale" && beat["revision"] == listed && beat["reason"].is_string()
        })
    })
    .await;
    agent.stop().await;
}
