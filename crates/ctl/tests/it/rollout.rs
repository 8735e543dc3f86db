//! `dwctl rollout` against a real etcd: a short rollout promotes; a probe or a check that
//! fails during the bake aborts (exit 7, stage removed); SIGINT leaves the stage and
//! `rollout resume` continues at the recorded step; an empty cohort is refused; a step whose
//! cohort never serves it times out (exit 8); a step the capacity guard refuses stops the
//! rollout (exit 9), resumable. The node reports come from a fake fleet run by
//! the test (each node on a lease, as an agent writes them: a report off its lease would not
//! be believed); crates/agent/tests/it/rollout.rs runs the same against real dw-agent processes.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::common::fleet::{Behaviour, Fleet, agent_report, applying, probe_server};
use crate::common::rollout::{
    audit_of, events, named, record, rollout, rollout_argv, rollout_json, setup, stage_of, steps,
};
use crate::common::{CONTROL, region_key};
use dw_routing::stage::cohort_point;
use etcd_client::PutOptions;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_rollout_promotes_step_by_step() {
    let (etcd, ids, file) = setup(10).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let run = rollout_json(
        &etcd,
        &file,
        "de-move",
        "50%,100%",
        "1s",
        &[
            "--check",
            "true",
            "--check-interval",
            "200ms",
            "--reason",
            "CHG-7",
        ],
    );
    fleet.stop().await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events = events(&run.stdout);
    assert_eq!(steps(&events), [1, 2]);
    assert_eq!(named(&events, "baking").len(), 2);
    assert_eq!(named(&events, "step-passed").len(), 2);
    let members: Vec<&String> = ids
        .iter()
        .filter(|id| cohort_point("de-move", id) < 5000)
        .collect();
    assert_eq!(named(&events, "baking")[0]["serving"], json!(members));
    assert_eq!(named(&events, "baking")[1]["serving"], json!(ids));
    let done = events.last().unwrap();
    assert_eq!(done["event"], "promoted", "{}", run.stdout);
    // The staged value is current routing, the stage gone, the record says promoted.
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-9"
    );
    assert!(stage_of(&etcd, "de-move").await.is_none());
    let progress = record(&etcd, "de-move").await.unwrap();
    assert_eq!(progress["state"], "promoted");
    assert_eq!(progress["step"], 2);
    // Audit records as for the stage commands: create, widen, promote.
    let history = etcd.dwctl(&[
        "--output",
        "json",
        "history",
        &format!("{CONTROL}stages/de-move"),
    ]);
    for action in ["create", "widen", "promote"] {
        assert!(
            history
                .stdout
                .contains(&format!("\\\"action\\\":\\\"{action}\\\"")),
            "{action}: {}",
            history.stdout
        );
    }
    // A finished rollout is not resumed.
    assert_eq!(etcd.dwctl(&["rollout", "resume", "de-move"]).code, 1);
    assert_eq!(etcd.dwctl(&["rollout", "resume", "nope"]).code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_probe_failing_during_the_bake_aborts_the_stage() {
    let (etcd, ids, file) = setup(6).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    // Healthy for the first three probes, failing after: the bake of step 1 sees it.
    let (url, served) = probe_server(3).await;
    let before = etcd.get(&region_key("DE")).await.unwrap();
    let probe = format!("ams-a={url}");
    let run = rollout(
        &etcd,
        &file,
        "probed",
        "50%,100%",
        "2s",
        &[
            "--probe",
            &probe,
            "--probe-interval",
            "200ms",
            "--fail-after",
            "2",
        ],
    );
    fleet.stop().await;
    assert_eq!(run.code, 7, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("probe of ams-a failed 2 time(s) in a row: status 500"),
        "{}",
        run.stderr
    );
    assert!(
        run.stdout.contains("probe-failed: ams-a: status 500"),
        "{}",
        run.stdout
    );
    assert!(served.load(Ordering::SeqCst) >= 5);
    assert!(
        stage_of(&etcd, "probed").await.is_none(),
        "the stage is aborted"
    );
    assert_eq!(
        etcd.get(&region_key("DE")).await.unwrap(),
        before,
        "current routing untouched"
    );
    let progress = record(&etcd, "probed").await.unwrap();
    assert_eq!(progress["state"], "aborted");
    assert_eq!(progress["step"], 0);
    let audit = audit_of(&etcd, "probed").await.unwrap();
    assert_eq!(audit["action"], "abort");
    assert!(
        audit["reason"].as_str().unwrap().contains("probe of ams-a"),
        "{audit}"
    );

    // A probe of an origin the change does not route to is refused, nothing written.
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let run = rollout(
        &etcd,
        &file,
        "other",
        "100%",
        "1s",
        &["--probe", "par-a=http://127.0.0.1:1/"],
    );
    fleet.stop().await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(stage_of(&etcd, "other").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_failing_during_the_bake_aborts_the_stage() {
    let (etcd, ids, file) = setup(6).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    // Passes twice, then fails, saying why on stderr.
    let counter = etcd.data_dir.join("runs");
    let check = format!(
        "n=$(cat {0} 2>/dev/null || echo 0); echo $((n+1)) > {0}; \
         [ \"$DW_ROLLOUT_ID\" = checked ] || exit 9; [ $n -lt 2 ] || {{ echo 'error rate 7%' >&2; exit 1; }}",
        counter.display()
    );
    let (code, json, stderr) = etcd.dwctl_json(&rollout_argv(
        &file,
        "checked",
        "100%",
        "2s",
        &["--check", &check, "--check-interval", "200ms"],
    ));
    fleet.stop().await;
    assert_eq!(code, 7, "{stderr}");
    // --output json: the error document is the last line of stdout.
    let _ = json;
    assert!(
        stderr.contains("--check failed: the check exited 1: error rate 7%"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&counter).unwrap().trim(), "3");
    assert!(stage_of(&etcd, "checked").await.is_none());
    assert_eq!(record(&etcd, "checked").await.unwrap()["state"], "aborted");
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_leaves_the_stage_and_resume_continues_at_its_step() {
    let (etcd, ids, file) = setup(8).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let mut argv = vec!["--output", "json"];
    argv.extend(rollout_argv(
        &file,
        "paused",
        "40%,70%,100%",
        "1s",
        &["--check", "true"],
    ));
    let mut child = etcd
        .tokio_command(&argv)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    // Interrupt once step 2 bakes.
    while let Some(line) = tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("an event within 60 s")
        .unwrap()
    {
        let event: Value = serde_json::from_str(&line).unwrap();
        seen.push(event.clone());
        if event["event"] == "baking" && event["step"] == 2 {
            break;
        }
    }
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = child.wait().await.unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .await
        .unwrap();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(
        stderr.contains("dwctl rollout resume paused --check \"true\""),
        "{stderr}"
    );
    assert!(stderr.contains("dwctl stage abort paused"), "{stderr}");
    // The stage stays at step 2's cohort; the record says where.
    let stage = stage_of(&etcd, "paused").await.expect("the stage stays");
    assert_eq!(stage["cohort"]["points"], 7000);
    let progress = record(&etcd, "paused").await.unwrap();
    assert_eq!(progress["state"], "interrupted");
    assert_eq!(progress["step"], 1);
    assert!(progress["bake_started_at"].is_string());
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-1"
    );

    // A new rollout of the same id is refused while this one can be resumed; the check
    // must be given again (a command read from etcd is never run).
    assert_eq!(rollout(&etcd, &file, "paused", "100%", "1s", &[]).code, 1);
    assert_eq!(etcd.dwctl(&["rollout", "resume", "paused"]).code, 2);
    let run = etcd.dwctl(&[
        "--output", "json", "rollout", "resume", "paused", "--check", "true",
    ]);
    fleet.stop().await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events = events(&run.stdout);
    assert_eq!(named(&events, "resumed")[0]["step"], 2);
    assert_eq!(steps(&events), [2, 3], "resumed at the recorded step");
    assert_eq!(events.last().unwrap()["event"], "promoted");
    assert!(stage_of(&etcd, "paused").await.is_none());
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-9"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_cohort_is_refused_with_nothing_written() {
    let (etcd, ids, file) = setup(3).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    // An id whose 1 % cohort holds none of the three nodes.
    let id = (0..)
        .map(|n| format!("empty-{n}"))
        .find(|id| ids.iter().all(|node| cohort_point(id, node) >= 100))
        .unwrap();
    let before = etcd.dump("/dw/").await;
    let run = rollout(&etcd, &file, &id, "1%,100%", "1s", &[]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("holds 0 live node(s)"),
        "{}",
        run.stderr
    );
    // --min-nodes: three live nodes are fewer than four.
    let run = rollout(&etcd, &file, "few", "100%", "1s", &["--min-nodes", "4"]);
    fleet.stop().await;
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("fewer than --min-nodes 4"),
        "{}",
        run.stderr
    );
    let after: Vec<(String, String)> = etcd
        .dump("/dw/")
        .await
        .into_iter()
        .filter(|(key, _)| !key.starts_with("/dw/nodes"))
        .collect();
    let before: Vec<(String, String)> = before
        .into_iter()
        .filter(|(key, _)| !key.starts_with("/dw/nodes"))
        .collect();
    assert_eq!(after, before, "nothing written");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_cohort_never_serves_it_times_out_and_keeps_the_stage() {
    let (etcd, ids, file) = setup(4).await;
    let mut fleet_nodes = applying(&ids);
    fleet_nodes[2].1 = Behaviour::Never;
    let fleet = Fleet::start(&etcd, &fleet_nodes).await;
    let run = rollout(
        &etcd,
        &file,
        "stuck",
        "100%",
        "1s",
        &["--step-timeout", "1s"],
    );
    assert_eq!(run.code, 8, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("3/4 cohort node(s) serve the stage; not: edge-2 (routes from revision"),
        "{}",
        run.stderr
    );
    assert!(stage_of(&etcd, "stuck").await.is_some(), "the stage stays");
    assert_eq!(record(&etcd, "stuck").await.unwrap()["state"], "timed-out");

    // A node that reports a staged key rejected aborts the rollout.
    etcd.dwctl(&["stage", "abort", "stuck"]);
    fleet.stop().await;
    fleet_nodes[2].1 = Behaviour::RejectsDe;
    let fleet = Fleet::start(&etcd, &fleet_nodes).await;
    let run = rollout(&etcd, &file, "rejecting", "100%", "5s", &[]);
    fleet.stop().await;
    assert_eq!(run.code, 7, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("node edge-2 reports the staged key /dw/routing/region/DE rejected"),
        "{}",
        run.stderr
    );
    assert!(stage_of(&etcd, "rejecting").await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_cohort_node_blocks_the_step() {
    let (etcd, ids, file) = setup(3).await;
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    // edge-9: its live report is gone while the lease its seen record names lives.
    let mut client = etcd.client().await;
    let live = client.lease_grant(60, None).await.unwrap().id();
    let report = agent_report("edge-9", live, 1, "ok");
    client
        .put(
            "/dw/nodes-seen/edge-9",
            report.to_json(),
            Some(PutOptions::new().with_lease(live)),
        )
        .await
        .unwrap();
    let run = rollout(&etcd, &file, "gap", "100%", "1s", &["--step-timeout", "1s"]);
    fleet.stop().await;
    assert_eq!(run.code, 8, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("edge-9 (missing:"), "{}", run.stderr);
}

/// A step the capacity guard refuses stops the rollout (exit 9, nothing written by the
/// step, the stage at the last passed step), recorded as stopped; resumed once the load
/// fits, it goes on from that step and promotes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_the_capacity_guard_refuses_stops_the_rollout_resumably() {
    let (etcd, ids, file) = setup(10).await;
    let traffic = etcd.data_dir.join("traffic.json");
    std::fs::write(&traffic, r#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
    let traffic = format!("--traffic={}", traffic.display());
    // ams-a's load now (b) and with the file's values on every node (a), as the dry run
    // of a stage on the whole fleet predicts them: its guard is set between the first
    // step's load (half the fleet: (a + b) / 2) and the second's (a).
    let (code, dry, stderr) = etcd.dwctl_json(&[
        "stage",
        "create",
        &file,
        "--cohort",
        "100%",
        "--id",
        "probe",
        "--dry-run",
        &traffic,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let ams = dry["prediction"]["origins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|origin| origin["origin"] == "ams-a")
        .cloned()
        .unwrap_or_else(|| panic!("{dry}"));
    let (b, a) = (
        ams["before"].as_f64().unwrap(),
        ams["after"].as_f64().unwrap(),
    );
    assert!(a > b + 50.0, "the file moves load onto ams-a: {ams}");
    let capacity = ((a + b) / 2.0 + a) / 2.0 / 0.8;
    let set = etcd.dwctl(&["origin", "capacity", "ams-a", &format!("{capacity:.1}")]);
    assert_eq!(set.code, 0, "{}", set.stderr);

    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let run = rollout_json(&etcd, &file, "de-move", "50%,100%", "1s", &[&traffic]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    let stopped = events(&run.stdout);
    assert_eq!(named(&stopped, "step-passed").len(), 1, "{}", run.stdout);
    // The creation (step 1's cohort) was predicted and shown, within the guard.
    let predicted = named(&stopped, "predicted");
    assert_eq!(predicted.len(), 1, "{}", run.stdout);
    assert_eq!(predicted[0]["step"], 1);
    assert_eq!(predicted[0]["prediction"]["made"], true);
    assert_eq!(predicted[0]["prediction"]["staged"]["share_after"], 0.5);
    let refused = named(&stopped, "refused");
    assert_eq!(refused.len(), 1, "{}", run.stdout);
    assert_eq!(refused[0]["step"], 2);
    let error = stopped.last().unwrap();
    assert_eq!(error["error"]["kind"], "overload", "{}", run.stdout);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(
            "rollout de-move stopped at step 2/2 (100.00%): refused, nothing written: the \
             change puts origins above their guard"
        ),
        "{message}"
    );
    assert!(message.contains("ams-a: predicted"), "{message}");
    assert!(
        message.contains("dwctl rollout resume de-move"),
        "{message}"
    );
    // The stage stays at the first step's cohort; the record says stopped, at step 2.
    assert_eq!(
        stage_of(&etcd, "de-move").await.unwrap()["cohort"]["points"],
        5000
    );
    let progress = record(&etcd, "de-move").await.unwrap();
    assert_eq!(progress["state"], "stopped");
    assert_eq!(progress["step"], 1);
    assert!(
        progress["outcome"]
            .as_str()
            .unwrap()
            .contains("the capacity guard refused the step's widen at step 2/2"),
        "{progress}"
    );

    // Capacity raised: the resumed rollout widens, bakes and promotes.
    let set = etcd.dwctl(&["origin", "capacity", "ams-a", &format!("{:.1}", a * 2.0)]);
    assert_eq!(set.code, 0, "{}", set.stderr);
    let run = etcd.dwctl(&["--output", "json", "rollout", "resume", "de-move", &traffic]);
    fleet.stop().await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let resumed = events(&run.stdout);
    assert_eq!(resumed.last().unwrap()["event"], "promoted");
    // The step's widen and the promote were predicted, each shown.
    let predicted = named(&resumed, "predicted");
    assert_eq!(predicted.len(), 2, "{}", run.stdout);
    assert!(predicted.iter().all(|event| event["step"] == 2));
    assert_eq!(record(&etcd, "de-move").await.unwrap()["state"], "promoted");
}
