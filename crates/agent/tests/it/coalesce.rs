//! Burst coalescing (`--coalesce-window`) against real etcd, the agent in this process so
//! that every publication is observed. Needs `etcd` on PATH: run inside
//! `scripts/devenv exec --`.

use std::time::{Duration, Instant};

use crate::support::*;

/// Puts in the burst (the issue's case: one `origin/` key, written again and again).
const BURST: u64 = 500;

/// The value of `dw_agent_coalesced_changes_total`.
fn coalesced(agent: &RunningAgent) -> u64 {
    let text = agent.status.render_metrics();
    metric(&text, "dw_agent_coalesced_changes_total").expect("the counter is served") as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_is_published_first_at_once_then_once_a_window_up_to_its_last_put() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    let listed = put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("dw-routing.json");
    let mut config = test_config(cluster.endpoints(), &snapshot);
    let window = Duration::from_millis(300);
    config.timing.coalesce_window = window;
    // The watchdog ticks several times in every window: a tick must not publish what
    // waits for the window's end (it once did, so a tick in a burst published early).
    config.timing.progress_interval = window / 6;
    let mut agent = RunningAgent::start(config).await;
    agent.published(listed).await;
    // A quiet spell, longer than the window, since that publication.
    tokio::time::sleep(window * 2).await;

    // The first change after a quiet spell is published on its own and waits for nothing.
    let key = format!("{PREFIX}origin/fra-a");
    let started = Instant::now();
    let first = put(&mut client, &key, r#"{"n":0}"#).await;
    agent.published(first).await;
    assert_eq!(coalesced(&agent), 0, "the first change waited");

    // The burst: each put waits for etcd's answer, so each is its own revision.
    let mut last = first;
    for n in 1..=BURST {
        last = put(&mut client, &key, format!("{{\"n\":{n}}}")).await;
    }
    assert_eq!(last, first + BURST);
    // Every publication up to the last put's revision, in order; the last one is its.
    let mut revisions = Vec::new();
    while revisions.last() != Some(&last) {
        let next = tokio::time::timeout(EVENTUALLY, agent.publications.recv())
            .await
            .unwrap_or_else(|_| panic!("revision {last} was never published: {revisions:?}"))
            .expect("the agent stopped");
        assert!(next.revision <= last, "{} after {last}", next.revision);
        revisions.push(next.revision);
    }
    let elapsed = started.elapsed();
    assert!(
        revisions.windows(2).all(|pair| pair[0] < pair[1]),
        "{revisions:?}"
    );
    // Publications are a window apart at least: one for the first change, then at most
    // one per window that passed, which is far fewer than the puts.
    let bound = elapsed.as_millis() / window.as_millis() + 1;
    assert!(
        (revisions.len() as u128) <= bound && (revisions.len() as u64) <= BURST / 10,
        "{} publications for {BURST} puts in {elapsed:?}: {revisions:?}",
        revisions.len()
    );
    let waited = coalesced(&agent);
    assert!(
        waited > 0 && waited <= BURST,
        "{waited} changes waited for a window's end"
    );
    // Nothing is lost: the file holds the last put.
    let published = read_snapshot(&snapshot).unwrap();
    assert_eq!(published.revision, last);
    assert_eq!(published.kvs[&key], format!("{{\"n\":{BURST}}}"));
    assert_eq!(agent.status.get().published_revision, Some(last));
    eprintln!(
        "{BURST} puts in {elapsed:?}: {} publications, {waited} changes coalesced",
        revisions.len()
    );
    agent.stop().await;
}
