//! End to end: `dwctl stage create`, `stage show`, `stage abort` and `dwctl rollout` (run
//! through the dwctl library, as its binary does) against real `dw-agent` processes that
//! apply the stage. Each node's published snapshot is checked: the staged value on exactly
//! the nodes the cohort function names while the stage is open, on every node once the
//! rollout promoted it. The failure paths too: a rollout whose check fails aborts (exit 7)
//! and its cohort's agents return to current routing; a step whose cohort node's agent is
//! stopped times out (exit 8), the stage stays served by the others, and `rollout resume`
//! finishes it once the agent runs again. Needs `etcd` on PATH: run inside
//! `scripts/devenv exec --`.

use crate::support::*;
use serde_json::{Value, json};

const NODES: usize = 6;

/// `dwctl ARGS` against `endpoint`, which must succeed: its JSON outcome.
async fn run(endpoint: &str, args: &[&str]) -> Value {
    let (code, outcome) = crate::support::dwctl(&[endpoint.to_owned()], args).await;
    assert_eq!(code, 0, "dwctl {args:?}: {outcome}");
    outcome
}

/// The shard node `path` publishes for DE.
fn de_shard(path: &std::path::Path) -> Option<(String, Vec<String>)> {
    let snapshot = read_snapshot(path)?;
    let value: Value =
        serde_json::from_str(snapshot.kvs.get(&format!("{PREFIX}region/DE"))?).ok()?;
    let stages = snapshot.stages.iter().map(|s| s.id.clone()).collect();
    Some((value["shard"].as_str()?.to_owned(), stages))
}

/// Real agents `edge-0`.. on one etcd whose DE routes to fra-a (shard eu-1), every one
/// reporting; and the file of a change moving DE to ams-a (shard eu-9).
struct RealFleet {
    // Declared first: the agents stop before etcd and the directory go.
    agents: Vec<AgentProcess>,
    /// (node id, its snapshot file).
    snapshots: Vec<(String, std::path::PathBuf)>,
    endpoint: String,
    file: String,
    _cluster: Cluster,
    _dir: tempfile::TempDir,
}

impl RealFleet {
    async fn start(count: usize) -> RealFleet {
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
        for i in 0..count {
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
                let (code, status) = crate::support::dwctl(&[endpoint], &["status"]).await;
                code == 0 && status["current"] == count
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
        RealFleet {
            agents,
            snapshots,
            endpoint,
            file: file.to_string_lossy().into_owned(),
            _cluster: cluster,
            _dir: dir,
        }
    }

    /// The nodes whose point for stage `id` is below `points`.
    fn members(&self, id: &str, points: u16) -> Vec<String> {
        self.snapshots
            .iter()
            .map(|(node, _)| node.clone())
            .filter(|node| dw_routing::stage::cohort_point(id, node) < points)
            .collect()
    }

    /// Waits until every node publishes DE's `shard` with `stages` applied.
    async fn all_serve(&self, shard: &str, stages: &[&str]) {
        let want = Some((
            shard.to_owned(),
            stages.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        ));
        for (id, snapshot) in &self.snapshots {
            let path = snapshot.clone();
            let want = want.clone();
            eventually(&format!("{id} serves {want:?}"), || {
                let got = de_shard(&path);
                let want = want.clone();
                async move { got == want }
            })
            .await;
        }
    }

    fn stop(self) {
        for mut agent in self.agents {
            signal(agent.child.id(), libc::SIGCONT);
            agent.terminate();
        }
    }
}

/// What etcd holds under `key`, as JSON.
async fn get_json(endpoint: &str, key: &str) -> Option<Value> {
    let mut client = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap();
    let response = client.get(key, None).await.unwrap();
    let kv = response.kvs().first()?;
    serde_json::from_slice(kv.value()).ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stages_and_a_rollout_reach_real_agents() {
    let fleet = RealFleet::start(NODES).await;
    let (endpoint, file, snapshots) = (&fleet.endpoint, &fleet.file, &fleet.snapshots);

    // A 50 % stage: the staged value on the cohort function's nodes, and on no other.
    let members = fleet.members("half", 5000);
    let created = run(
        endpoint,
        &[
            "stage",
            "create",
            file,
            "--cohort",
            "50%",
            "--id",
            "half",
            "--wait=30s",
        ],
    )
    .await;
    assert_eq!(created["fleet"]["reached"], true, "{created}");
    for (id, snapshot) in snapshots {
        let member = members.contains(id);
        let want = if member {
            ("eu-9".to_string(), vec!["half".to_string()])
        } else {
            ("eu-1".to_string(), vec![])
        };
        assert_eq!(de_shard(snapshot), Some(want), "{id} (member: {member})");
    }
    let shown = run(endpoint, &["stage", "show", "half"]).await;
    assert_eq!(shown["serving"], json!(members), "{shown}");
    assert_eq!(shown["not_serving"], json!([]));
    run(endpoint, &["stage", "abort", "half", "--wait=30s"]).await;
    for (id, snapshot) in snapshots {
        assert_eq!(de_shard(snapshot), Some(("eu-1".into(), vec![])), "{id}");
    }

    // A rollout: 50 %, then every node, then promoted.
    let done = run(
        endpoint,
        &[
            "rollout",
            file,
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
    fleet.all_serve("eu-9", &[]).await;
    fleet.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_check_aborts_and_the_cohort_returns_to_current_routing() {
    let fleet = RealFleet::start(4).await;
    // An id whose 50 % cohort holds some of the four nodes but not all.
    let id = (0..100)
        .map(|n| format!("checked-{n}"))
        .find(|id| (1..4).contains(&fleet.members(id, 5000).len()))
        .expect("an id with a partial cohort");
    let members = fleet.members(&id, 5000);
    // The check passes only while every cohort node's file holds the staged shard and no
    // other node's does (so the abort comes after the real agents served the stage), then
    // fails saying why; any other state exits 3 with another reason.
    let mut tests = Vec::new();
    for (id, snapshot) in &fleet.snapshots {
        let grep = format!("grep -q eu-9 {}", snapshot.display());
        tests.push(if members.contains(id) {
            grep
        } else {
            format!("! {grep}")
        });
    }
    let check = format!(
        "{} || {{ echo 'cohort not as staged' >&2; exit 3; }}; echo 'error rate 9%' >&2; exit 1",
        tests.join(" && ")
    );
    let (code, error) = crate::support::dwctl(
        std::slice::from_ref(&fleet.endpoint),
        &[
            "rollout",
            &fleet.file,
            "--steps",
            "50%,100%",
            "--bake",
            "5s",
            "--id",
            &id,
            "--check",
            &check,
            "--check-interval",
            "200ms",
            "--step-timeout",
            "60s",
        ],
    )
    .await;
    assert_eq!(code, 7, "{error}");
    let message = error.as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "rollout {id} aborted at step 1/2 (50.00%): --check failed: the check exited 1: \
             error rate 9%"
        )),
        "{message}"
    );
    assert!(
        message.contains("its cohort routes from current routing again"),
        "{message}"
    );
    // Aborted: the stage key is gone, the record says so, and every node (the cohort
    // too) publishes current routing again, with no stage applied.
    let stage_key = format!("{PREFIX}stage/{id}");
    assert_eq!(get_json(&fleet.endpoint, &stage_key).await, None);
    let progress = get_json(&fleet.endpoint, &format!("/dw/control/rollouts/{id}"))
        .await
        .unwrap();
    assert_eq!(progress["state"], "aborted", "{progress}");
    assert_eq!(progress["step"], 0);
    fleet.all_serve("eu-1", &[]).await;
    let current = get_json(&fleet.endpoint, &format!("{PREFIX}region/DE")).await;
    assert_eq!(
        current.unwrap()["shard"],
        "eu-1",
        "current routing untouched"
    );
    fleet.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_cohort_agent_is_stopped_times_out_and_keeps_the_stage() {
    let fleet = RealFleet::start(4).await;
    let endpoints = [fleet.endpoint.clone()];
    // edge-2's agent stops (SIGSTOP): its report stays on its lease for a while, then the
    // node is missing; either way it never applies the stage.
    let stopped = &fleet.agents[2];
    signal(stopped.child.id(), libc::SIGSTOP);
    let (code, error) = crate::support::dwctl(
        &endpoints,
        &[
            "rollout",
            &fleet.file,
            "--steps",
            "100%",
            "--bake",
            "1s",
            "--id",
            "stuck",
            "--step-timeout",
            "3s",
        ],
    )
    .await;
    assert_eq!(code, 8, "{error}");
    let message = error.as_str().unwrap_or_default();
    assert!(
        message.contains(
            "rollout stuck: step 1/1 (100.00%) timed out after 3.0s: 3/4 cohort node(s) serve \
             the stage; not: edge-2 ("
        ),
        "{message}"
    );
    assert!(message.contains("dwctl rollout resume stuck"), "{message}");
    // Timed out: the stage stays as it is (docs/dwctl.md, exit 8): still open at 100 %,
    // served by the three running agents; the record says timed-out.
    let stage = get_json(&fleet.endpoint, &format!("{PREFIX}stage/stuck"))
        .await
        .expect("the stage stays");
    assert_eq!(stage["cohort"]["points"], 10_000, "{stage}");
    let progress = get_json(&fleet.endpoint, "/dw/control/rollouts/stuck")
        .await
        .unwrap();
    assert_eq!(progress["state"], "timed-out", "{progress}");
    for (id, snapshot) in fleet.snapshots.iter().filter(|(id, _)| id != "edge-2") {
        assert_eq!(
            de_shard(snapshot),
            Some(("eu-9".into(), vec!["stuck".into()])),
            "{id}"
        );
    }
    assert_eq!(
        de_shard(&fleet.snapshots[2].1),
        Some(("eu-1".into(), vec![])),
        "the stopped agent's file is as it was"
    );

    // The agent runs again; once `stage show` (the rollout's own verdict) calls every cohort
    // node serving, `rollout resume` passes the step and promotes.
    signal(stopped.child.id(), libc::SIGCONT);
    eventually("edge-2 serves the stage", || {
        let endpoints = endpoints.clone();
        async move {
            let (_, shown) = crate::support::dwctl(&endpoints, &["stage", "show", "stuck"]).await;
            shown["serving"].as_array().is_some_and(|s| s.len() == 4)
        }
    })
    .await;
    let (code, done) = crate::support::dwctl(&endpoints, &["rollout", "resume", "stuck"]).await;
    assert_eq!(code, 0, "{done}");
    assert_eq!(done["event"], "promoted", "{done}");
    fleet.all_serve("eu-9", &[]).await;
    fleet.stop();
}
