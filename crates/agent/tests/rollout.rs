//! End to end: `dwctl stage create`, `stage show`, `stage abort` and `dwctl rollout` (run
//! through the dwctl library, as its binary does) against six real `dw-agent` processes that
//! apply the stage. Each node's published snapshot is checked: the staged value on exactly
//! the nodes the cohort function names while the stage is open, on every node once the
//! rollout promoted it. Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

mod support;

use clap::Parser;
use serde_json::{Value, json};
use support::*;

const NODES: usize = 6;

fn dwctl(endpoint: &str, args: &[&str]) -> dwctl::Cli {
    let mut argv = vec!["dwctl", "--endpoints", endpoint, "--output", "json"];
    argv.extend_from_slice(args);
    dwctl::Cli::try_parse_from(argv).expect("dwctl arguments")
}

async fn run(endpoint: &str, args: &[&str]) -> Value {
    let (_trigger, shutdown) = dwctl::Shutdown::new();
    match dwctl::run_command(dwctl(endpoint, args), shutdown).await {
        Ok(outcome) => outcome.json,
        Err(error) => panic!("dwctl {args:?}: {error}"),
    }
}

/// The shard node `path` publishes for DE.
fn de_shard(path: &std::path::Path) -> Option<(String, Vec<String>)> {
    let snapshot = read_snapshot(path)?;
    let value: Value =
        serde_json::from_str(snapshot.kvs.get(&format!("{PREFIX}region/DE"))?).ok()?;
    let stages = snapshot.stages.iter().map(|s| s.id.clone()).collect();
    Some((value["shard"].as_str()?.to_owned(), stages))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_and_a_rollout_reach_real_agents() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoint = cluster.endpoints().remove(0);
    run(
        &endpoint,
        &[
            "region",
            "set",
            "DE",
            r#"{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":1}}"#,
        ],
    )
    .await;
    let mut agents = Vec::new();
    let mut snapshots = Vec::new();
    for i in 0..NODES {
        let id = format!("edge-{i}");
        let snapshot = dir.path().join(format!("{id}.json"));
        let node_flag = format!("--node-id={id}");
        let args = agent_args(&cluster.endpoints(), &snapshot, &[&node_flag]);
        agents.push(AgentProcess::spawn(
            &args,
            &dir.path().join(format!("{id}.log")),
        ));
        snapshots.push((id, snapshot));
    }
    eventually("every agent reports", || {
        let endpoint = endpoint.clone();
        async move {
            let (_t, shutdown) = dwctl::Shutdown::new();
            let status = dwctl::run_command(dwctl(&endpoint, &["status"]), shutdown).await;
            status.is_ok_and(|outcome| outcome.json["current"] == NODES)
        }
    })
    .await;
    let file = dir.path().join("de.json");
    std::fs::write(
        &file,
        json!({"regions": {"DE": {"shard": "eu-9", "origins": ["ams-a"], "weight": {"ams-a": 1}}}})
            .to_string(),
    )
    .unwrap();
    let file = file.to_string_lossy().into_owned();

    // A 50 % stage: the staged value on the cohort function's nodes, and on no other.
    let members: Vec<String> = snapshots
        .iter()
        .map(|(id, _)| id.clone())
        .filter(|id| dw_routing::stage::cohort_point("half", id) < 5000)
        .collect();
    let created = run(
        &endpoint,
        &[
            "stage",
            "create",
            &file,
            "--cohort",
            "50%",
            "--id",
            "half",
            "--wait=30s",
        ],
    )
    .await;
    assert_eq!(created["fleet"]["reached"], true, "{created}");
    for (id, snapshot) in &snapshots {
        let member = members.contains(id);
        let want = if member {
            ("eu-9".to_string(), vec!["half".to_string()])
        } else {
            ("eu-1".to_string(), vec![])
        };
        assert_eq!(de_shard(snapshot), Some(want), "{id} (member: {member})");
    }
    let shown = run(&endpoint, &["stage", "show", "half"]).await;
    assert_eq!(shown["serving"], json!(members), "{shown}");
    assert_eq!(shown["not_serving"], json!([]));
    run(&endpoint, &["stage", "abort", "half", "--wait=30s"]).await;
    for (id, snapshot) in &snapshots {
        assert_eq!(de_shard(snapshot), Some(("eu-1".into(), vec![])), "{id}");
    }

    // A rollout: 50 %, then every node, then promoted.
    let done = run(
        &endpoint,
        &[
            "rollout",
            &file,
            "--steps",
            "50%,100%",
            "--bake",
            "1s",
            "--id",
            "whole",
            "--min-nodes",
            "1",
        ],
    )
    .await;
    assert_eq!(done["event"], "promoted", "{done}");
    for (id, snapshot) in &snapshots {
        let path = snapshot.clone();
        eventually(&format!("{id} serves the promoted value"), || {
            let got = de_shard(&path);
            async move { got == Some(("eu-9".into(), vec![])) }
        })
        .await;
    }
    for mut agent in agents {
        agent.terminate();
    }
}
