//! Staged changes as the agents publish them: ten nodes, one etcd, and each node's file
//! checked against the overlay computed here, from etcd's keys and the node id alone
//! (membership by xxh3 directly, not through dw-routing's cohort function), so that an
//! overlay bug cannot hide behind the implementation agreeing with itself.
//! Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::support::*;
use dw_agent::ReportConfig;
use serde_json::{Value, json};
use xxhash_rust::xxh3::xxh3_64;

const NODES: usize = 10;

/// Staged keys (relative to the prefix) and their values; `None`: absent on the cohort.
type Staged = BTreeMap<String, Option<String>>;

fn region(shard: &str, origin: &str) -> String {
    json!({"shard": shard, "origins": [origin], "weight": {origin: 1}}).to_string()
}

/// The stage record as dwctl writes it, by hand here.
fn stage_record(id: &str, points: u32, kvs: Value) -> String {
    json!({"schema": 1, "id": id, "cohort": {"points": points}, "kvs": kvs,
        "base": {}, "created_by": "test", "created_at": "", "reason": "test"})
    .to_string()
}

fn member(stage: &str, node: &str, points: u32) -> bool {
    xxh3_64(format!("{stage}\0{node}").as_bytes()) % 10_000 < u64::from(points)
}

/// What node `node` must publish: etcd's routing keys, stage keys left out, the staged
/// values in place on a member.
fn expected(
    etcd: &BTreeMap<String, String>,
    node: &str,
    stage: Option<(&str, u32, &Staged)>,
) -> BTreeMap<String, String> {
    let mut kvs: BTreeMap<String, String> = etcd
        .iter()
        .filter(|(key, _)| !key.starts_with(&format!("{PREFIX}stage/")))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some((id, points, staged)) = stage
        && member(id, node, points)
    {
        for (key, value) in staged {
            let key = format!("{PREFIX}{key}");
            match value {
                Some(value) => kvs.insert(key, value.clone()),
                None => kvs.remove(&key),
            };
        }
    }
    kvs
}

struct Node {
    id: String,
    snapshot: PathBuf,
    agent: Option<RunningAgent>,
}

async fn start_node(endpoints: Vec<String>, id: &str, snapshot: &std::path::Path) -> RunningAgent {
    let mut config = test_config(endpoints, snapshot);
    config.report = Some(ReportConfig::new(id));
    RunningAgent::start(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cohort_serves_the_stage_and_no_other_node_does() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(
        &mut client,
        &format!("{PREFIX}region/DE"),
        region("eu-1", "fra-a"),
    )
    .await;
    put(
        &mut client,
        &format!("{PREFIX}region/FR"),
        region("eu-1", "par-a"),
    )
    .await;
    put(
        &mut client,
        &format!("{PREFIX}policy/global"),
        r#"{"default":"DE"}"#,
    )
    .await;

    let mut nodes = Vec::new();
    for i in 0..NODES {
        let id = format!("edge-{i}");
        let snapshot = dir.path().join(format!("{id}.json"));
        let agent = start_node(cluster.endpoints(), &id, &snapshot).await;
        nodes.push(Node {
            id,
            snapshot,
            agent: Some(agent),
        });
    }

    let staged: Staged = BTreeMap::from([
        ("region/DE".to_string(), Some(region("eu-2", "ams-a"))),
        ("region/FR".to_string(), None),
    ]);
    let kvs = json!({"region/DE": staged["region/DE"], "region/FR": null});
    let key = format!("{PREFIX}stage/eu-move");

    // 20 %, then widened to 60 %: every node checked against the independent overlay.
    for points in [2_000u32, 6_000] {
        let revision = put(
            &mut client,
            &key,
            stage_record("eu-move", points, kvs.clone()),
        )
        .await;
        let (_, etcd) = etcd_state(&mut client, revision).await;
        for node in &nodes {
            let want = expected(&etcd, &node.id, Some(("eu-move", points, &staged)));
            eventually(
                &format!("{} serves the {points}-point cohort", node.id),
                || {
                    let got = read_snapshot(&node.snapshot);
                    let want = want.clone();
                    async move { got.is_some_and(|s| s.revision >= revision && s.kvs == want) }
                },
            )
            .await;
            let published = read_snapshot(&node.snapshot).unwrap();
            if member("eu-move", &node.id, points) {
                assert_eq!(published.stages.len(), 1, "{}", node.id);
                assert_eq!(published.stages[0].id, "eu-move");
                assert_eq!(published.stages[0].revision, revision);
            } else {
                assert!(published.stages.is_empty(), "{}", node.id);
            }
        }
    }
    let members_at_60: Vec<&str> = nodes
        .iter()
        .filter(|n| member("eu-move", &n.id, 6_000))
        .map(|n| n.id.as_str())
        .collect();
    assert!(
        !members_at_60.is_empty() && members_at_60.len() < NODES,
        "the test needs members and non-members: {members_at_60:?}"
    );

    // The report names the stage on members only.
    for node in &nodes {
        let report_key = format!("/dw/nodes/{}", node.id);
        let is_member = member("eu-move", &node.id, 6_000);
        eventually(&format!("{}'s report names its stages", node.id), || {
            let mut client = client.clone();
            let report_key = report_key.clone();
            async move {
                let Ok(response) = client.get(report_key, None).await else {
                    return false;
                };
                let Some(kv) = response.kvs().first() else {
                    return false;
                };
                let report: Value = serde_json::from_slice(kv.value()).unwrap_or(Value::Null);
                let stages = report["stages"].as_array().map_or(0, Vec::len);
                stages == usize::from(is_member)
            }
        })
        .await;
    }

    // A member restarted mid-stage stays in its cohort.
    let restarted = nodes
        .iter_mut()
        .find(|n| member("eu-move", &n.id, 6_000))
        .unwrap();
    restarted.agent.take().unwrap().stop().await;
    let marker = put(
        &mut client,
        &format!("{PREFIX}region/IT"),
        region("eu-1", "mil-a"),
    )
    .await;
    restarted.agent =
        Some(start_node(cluster.endpoints(), &restarted.id, &restarted.snapshot).await);
    let (_, etcd) = etcd_state(&mut client, marker).await;
    let want = expected(&etcd, &restarted.id, Some(("eu-move", 6_000, &staged)));
    let path = restarted.snapshot.clone();
    eventually("the restarted member serves the stage again", || {
        let got = read_snapshot(&path);
        let want = want.clone();
        async move { got.is_some_and(|s| s.revision >= marker && s.kvs == want) }
    })
    .await;

    // Abort: the stage key goes, every node serves current routing.
    let aborted = delete(&mut client, &key).await;
    let (_, etcd) = etcd_state(&mut client, aborted).await;
    for node in &nodes {
        let want = expected(&etcd, &node.id, None);
        eventually(&format!("{} serves current routing", node.id), || {
            let got = read_snapshot(&node.snapshot);
            let want = want.clone();
            async move {
                got.is_some_and(|s| s.revision >= aborted && s.kvs == want && s.stages.is_empty())
            }
        })
        .await;
    }
    for node in nodes {
        if let Some(agent) = node.agent {
            agent.stop().await;
        }
    }
}
