//! `dwctl stage ...` against a real etcd: create, widen, promote, abort; promote's guard
//! (exit 3, --rebase); drains, restores and direct writes keeping open stages in step.
//! Node reports are written by the test (the agent's side is crates/agent/tests/it/stages.rs).

use crate::common::fleet::report_once;
use crate::common::{CONTROL, DE, Etcd, PREFIX, region_key, seed};
use serde_json::{Value, json};

const FR: &str = r#"{"shard":"eu-2","origins":["par-a","par-b"],"weight":{"par-a":50,"par-b":50}}"#;

fn stage_key(id: &str) -> String {
    format!("{PREFIX}stage/{id}")
}

/// A file staging DE onto ams-a only (a change from `DE`).
fn write_file(etcd: &Etcd, name: &str, body: &Value) -> String {
    let path = etcd.data_dir.join(name);
    std::fs::write(&path, body.to_string()).expect("write file");
    path.to_string_lossy().into_owned()
}

fn de_move() -> Value {
    json!({"regions": {
        "DE": {"shard": "eu-9", "origins": ["fra-a", "ams-a"], "weight": {"fra-a": 60, "ams-a": 40}},
        "FR": serde_json::from_str::<Value>(FR).unwrap(),
    }})
}

async fn stage(etcd: &Etcd, id: &str) -> Option<Value> {
    etcd.get_json(&stage_key(id)).await
}

fn staged_region(stage: &Value, geo: &str) -> Option<Value> {
    stage["kvs"][format!("region/{geo}")]
        .as_str()
        .map(|raw| serde_json::from_str(raw).expect("staged JSON"))
}

/// A node report as the agent writes it (on a lease, so that dwctl believes it).
async fn report(etcd: &Etcd, id: &str, labels: Value, stages: Value) {
    report_once(etcd, id, json!({"labels": labels, "stages": stages})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_widen_promote_and_abort() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("FR", FR)]).await;
    let (_, fr_revision) = etcd.get(&region_key("FR")).await.unwrap();
    let (_, de_revision) = etcd.get(&region_key("DE")).await.unwrap();
    for i in 0..10 {
        report(
            &etcd,
            &format!("edge-{i}"),
            json!({"site": "fra"}),
            json!([]),
        )
        .await;
    }
    let file = write_file(&etcd, "de.json", &de_move());

    // The dry run writes nothing and names the cohort nodes the cohort function picks.
    let (code, dry, stderr) = etcd.dwctl_json(&[
        "stage",
        "create",
        &file,
        "--cohort",
        "20%",
        "--id",
        "de-move",
        "--dry-run",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(dry["dry_run"], true);
    assert!(stage(&etcd, "de-move").await.is_none());
    let expected: Vec<String> = (0..10)
        .map(|i| format!("edge-{i}"))
        .filter(|node| dw_routing::stage::cohort_point("de-move", node) < 2000)
        .collect();
    assert_eq!(dry["cohort_nodes"], json!(expected));
    // Only DE differs: FR is the same as current routing.
    assert_eq!(dry["diff"].as_array().unwrap().len(), 1, "{dry}");

    let (code, created, stderr) = etcd.dwctl_json(&[
        "stage", "create", &file, "--cohort", "20%", "--id", "de-move", "--reason", "CHG-1",
    ]);
    assert_eq!(code, 0, "{stderr}");
    let stored = stage(&etcd, "de-move").await.expect("stage written");
    assert_eq!(stored["cohort"]["points"], 2000);
    assert_eq!(stored["kvs"].as_object().unwrap().len(), 1);
    assert_eq!(staged_region(&stored, "DE").unwrap()["shard"], "eu-9");
    assert_eq!(stored["base"]["region/DE"], de_revision);
    assert_eq!(stored["reason"], "CHG-1");
    assert!(created["revision"].as_i64().unwrap() > fr_revision);
    // Current routing is untouched.
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-1"
    );
    // The audit record.
    let audit = etcd
        .get_json(&format!("{CONTROL}stages/de-move"))
        .await
        .unwrap();
    assert_eq!(audit["action"], "create");
    assert_eq!(
        audit["by"].as_str().unwrap().split('@').next(),
        Some("tester")
    );

    // show: cohort members, none serving until their reports say so.
    let revision = etcd.get(&stage_key("de-move")).await.unwrap().1;
    let (code, shown, _) = etcd.dwctl_json(&["stage", "show", "de-move"]);
    assert_eq!(code, 0);
    assert_eq!(shown["cohort_nodes"], json!(expected));
    assert_eq!(shown["serving"], json!([]));
    if let Some(first) = expected.first() {
        report(
            &etcd,
            first,
            json!({"site": "fra"}),
            json!([{"id": "de-move", "revision": revision}]),
        )
        .await;
        let (_, shown, _) = etcd.dwctl_json(&["stage", "show", "de-move"]);
        assert_eq!(shown["serving"], json!([first]));
        let status = etcd.dwctl(&["status"]);
        assert!(
            status.stdout.contains(&format!("stage de-move@{revision}")),
            "{}",
            status.stdout
        );
    }
    let listed = etcd.dwctl(&["stage", "list"]);
    assert!(listed.stdout.contains("de-move"), "{}", listed.stdout);

    // Widen keeps earlier members; narrowing is refused.
    assert_eq!(
        etcd.dwctl(&["stage", "widen", "de-move", "--cohort", "10%"])
            .code,
        4
    );
    let run = etcd.dwctl(&[
        "stage", "widen", "de-move", "--cohort", "50%", "--nodes", "edge-x",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let widened = stage(&etcd, "de-move").await.unwrap();
    assert_eq!(widened["cohort"]["points"], 5000);
    assert_eq!(widened["cohort"]["nodes"], json!(["edge-x"]));
    let (_, shown, _) = etcd.dwctl_json(&["stage", "show", "de-move"]);
    for node in &expected {
        assert!(
            shown["cohort_nodes"]
                .as_array()
                .unwrap()
                .contains(&json!(node))
        );
    }

    // Promote: current routing takes the staged value, the stage is gone.
    let (code, promoted, stderr) = etcd.dwctl_json(&["stage", "promote", "de-move"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(promoted["revision"].as_i64().is_some());
    assert!(stage(&etcd, "de-move").await.is_none());
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    assert_eq!(de["shard"], "eu-9");
    assert_eq!(de["origins"], json!(["fra-a", "ams-a"]));
    let audit = etcd
        .get_json(&format!("{CONTROL}stages/de-move"))
        .await
        .unwrap();
    assert_eq!(audit["action"], "promote");
    let history = etcd.dwctl(&["history", &format!("{CONTROL}stages/de-move")]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    for action in ["create", "widen", "promote"] {
        assert!(
            history
                .stdout
                .contains(&format!("\\\"action\\\":\\\"{action}\\\""))
                || history.stdout.contains(&format!("\"action\":\"{action}\"")),
            "{action}: {}",
            history.stdout
        );
    }

    // Abort: the stage is gone, current routing unchanged.
    let back = write_file(
        &etcd,
        "back.json",
        &json!({"regions": {"DE": serde_json::from_str::<Value>(DE).unwrap()}}),
    );
    assert_eq!(
        etcd.dwctl(&[
            "stage", "create", &back, "--nodes", "edge-1", "--id", "back"
        ])
        .code,
        0
    );
    let run = etcd.dwctl(&["stage", "abort", "back", "--reason", "not today"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(stage(&etcd, "back").await.is_none());
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-9"
    );
    assert_eq!(etcd.dwctl(&["stage", "abort", "back"]).code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_refuses_a_key_changed_outside_dwctl_unless_rebase() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let file = write_file(&etcd, "de.json", &de_move());
    assert_eq!(
        etcd.dwctl(&["stage", "create", &file, "--cohort", "5%", "--id", "s1"])
            .code,
        0
    );
    // etcdctl put: a writer that does not know about stages.
    let outside = DE.replace("eu-1", "eu-outside");
    etcd.etcdctl(&["put", &region_key("DE"), &outside]);
    let before = etcd.dump(PREFIX).await;
    let (code, error, _) = etcd.dwctl_json(&["stage", "promote", "s1"]);
    assert_eq!(code, 3, "{error}");
    assert_eq!(error["error"]["kind"], "stage-conflict");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("region/DE")
    );
    assert_eq!(etcd.dump(PREFIX).await, before, "nothing written");
    let (code, shown, _) = etcd.dwctl_json(&["stage", "show", "s1"]);
    assert_eq!(code, 0);
    assert_eq!(shown["conflicts"], json!(["region/DE"]));

    let run = etcd.dwctl(&["stage", "promote", "s1", "--rebase"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("--rebase"), "{}", run.stdout);
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-9"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_during_a_stage_edits_it_and_promote_does_not_bring_the_origin_back() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let file = write_file(&etcd, "de.json", &de_move());
    assert_eq!(
        etcd.dwctl(&["stage", "create", &file, "--cohort", "5%", "--id", "s1"])
            .code,
        0
    );

    let run = etcd.dwctl(&["drain", "ams-a", "--reason", "INC-7"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("stage s1"), "{}", run.stdout);
    let staged = staged_region(&stage(&etcd, "s1").await.unwrap(), "DE").unwrap();
    assert_eq!(staged["origins"], json!(["fra-a"]));
    assert_eq!(staged["weight"], json!({"fra-a": 100}));
    let record = etcd
        .get_json(&format!("{CONTROL}drains/ams-a"))
        .await
        .unwrap();
    assert!(record["stages"]["s1"]["DE"].is_object(), "{record}");

    // Restore gives the stage back its value too.
    assert_eq!(etcd.dwctl(&["restore", "ams-a"]).code, 0);
    let staged = staged_region(&stage(&etcd, "s1").await.unwrap(), "DE").unwrap();
    assert_eq!(staged["origins"], json!(["fra-a", "ams-a"]));
    assert_eq!(staged["weight"], json!({"fra-a": 60, "ams-a": 40}));

    // Drained again; promote (no false conflict) keeps it out.
    assert_eq!(etcd.dwctl(&["drain", "ams-a"]).code, 0);
    let run = etcd.dwctl(&["stage", "promote", "s1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    assert_eq!(de["shard"], "eu-9");
    assert_eq!(de["origins"], json!(["fra-a"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_write_nothing() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("FR", FR)]).await;
    let file = write_file(&etcd, "de.json", &de_move());
    assert_eq!(
        etcd.dwctl(&["stage", "create", &file, "--cohort", "5%", "--id", "one"])
            .code,
        0
    );
    let before = (etcd.dump(PREFIX).await, etcd.dump(CONTROL).await);

    // A second stage touching DE.
    let other = write_file(
        &etcd,
        "other.json",
        &json!({"regions": {"DE": serde_json::from_str::<Value>(FR).unwrap()}}),
    );
    let run = etcd.dwctl(&["stage", "create", &other, "--cohort", "5%", "--id", "two"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("staged by stage one"), "{}", run.stderr);
    // Invalid staged values: exit 4.
    let invalid = write_file(
        &etcd,
        "bad.json",
        &json!({"regions": {"IT": {"shard": "", "origins": ["a"], "weight": {"a": 100}}}}),
    );
    let (code, error, _) =
        etcd.dwctl_json(&["stage", "create", &invalid, "--cohort", "5%", "--id", "bad"]);
    assert_eq!(code, 4);
    assert_eq!(error["error"]["fields"][0]["field"], "regions.IT.shard");
    // Nothing differs from current routing.
    let same = write_file(
        &etcd,
        "same.json",
        &json!({"regions": {"FR": serde_json::from_str::<Value>(FR).unwrap()}}),
    );
    let run = etcd.dwctl(&["stage", "create", &same, "--cohort", "5%", "--id", "same"]);
    assert_eq!(run.code, 1);
    assert!(run.stderr.contains("nothing to stage"), "{}", run.stderr);
    // An empty cohort, a bad percentage, a bad id.
    let it = write_file(
        &etcd,
        "it.json",
        &json!({"regions": {"IT": serde_json::from_str::<Value>(FR).unwrap()}}),
    );
    assert_eq!(
        etcd.dwctl(&["stage", "create", &it, "--id", "empty"]).code,
        4
    );
    assert_eq!(
        etcd.dwctl(&["stage", "create", &it, "--cohort", "0%", "--id", "empty"])
            .code,
        4
    );
    assert_eq!(
        etcd.dwctl(&["stage", "create", &it, "--cohort", "100.5%"])
            .code,
        4
    );
    assert_eq!(
        etcd.dwctl(&["stage", "create", &it, "--cohort", "5%", "--id", "Bad/Id"])
            .code,
        4
    );
    assert_eq!(before, (etcd.dump(PREFIX).await, etcd.dump(CONTROL).await));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_direct_write_of_a_staged_key_leaves_the_stage() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("FR", FR)]).await;
    let both = json!({"regions": {
        "DE": {"shard": "eu-9", "origins": ["fra-a"], "weight": {"fra-a": 100}},
        "FR": {"shard": "eu-9", "origins": ["par-a"], "weight": {"par-a": 100}},
    }});
    let file = write_file(&etcd, "both.json", &both);
    assert_eq!(
        etcd.dwctl(&["stage", "create", &file, "--cohort", "100%", "--id", "s1"])
            .code,
        0
    );

    let run = etcd.dwctl(&["region", "set", "DE", &DE.replace("eu-1", "eu-direct")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("region/DE was staged by s1"),
        "{}",
        run.stdout
    );
    let stored = stage(&etcd, "s1").await.unwrap();
    assert!(stored["kvs"].get("region/DE").is_none(), "{stored}");
    assert!(stored["kvs"].get("region/FR").is_some());
    // The stage key and the region changed in one revision.
    let (_, region_revision) = etcd.get(&region_key("DE")).await.unwrap();
    let (_, stage_revision) = etcd.get(&stage_key("s1")).await.unwrap();
    assert_eq!(region_revision, stage_revision);

    // The last staged key written directly: the stage goes.
    let fr = write_file(
        &etcd,
        "fr.json",
        &json!({"regions": {"FR": {"shard": "eu-3", "origins": ["par-a"], "weight": {"par-a": 100}}}}),
    );
    let run = etcd.dwctl(&["apply", &fr]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(stage(&etcd, "s1").await.is_none(), "{}", run.stdout);
}

/// Found by the chaos soak: a drain, then any later rewrite of the stage (here a widen),
/// made promote take the drain for a write around dwctl (exit 3); so did a drain of an
/// origin that only the current value lists (the stage was not rewritten with it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promote_believes_dwctls_own_drains_after_the_stage_changed() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let file = write_file(&etcd, "de.json", &de_move());
    let ok = |args: &[&str]| {
        let run = etcd.dwctl(args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
    };
    ok(&["stage", "create", &file, "--nodes", "edge-1", "--id", "s1"]);
    ok(&["drain", "fra-a", "--reason", "INC-8"]);
    ok(&["stage", "widen", "s1", "--nodes", "edge-2"]);
    ok(&["stage", "promote", "s1"]);
    let de = etcd.get_json(&region_key("DE")).await.unwrap();
    assert_eq!(de["shard"], "eu-9");
    assert_eq!(de["origins"], json!(["ams-a"]), "{de}");
    ok(&["restore", "fra-a"]);

    // fra-b is in the current DE value, not in the staged one.
    let file = write_file(
        &etcd,
        "de2.json",
        &json!({"regions": {"DE": {"shard": "eu-7", "origins": ["fra-a"], "weight": {"fra-a": 100}}}}),
    );
    ok(&["region", "set", "DE", DE]);
    ok(&["stage", "create", &file, "--nodes", "edge-1", "--id", "s2"]);
    ok(&["drain", "fra-b", "--reason", "INC-9"]);
    ok(&["restore", "fra-b"]);
    ok(&["stage", "widen", "s2", "--nodes", "edge-3"]);
    ok(&["stage", "promote", "s2"]);
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-7"
    );

    // A write around dwctl is still caught after a rewrite of the stage.
    let file3 = write_file(
        &etcd,
        "de3.json",
        &json!({"regions": {"DE": {"shard": "eu-8", "origins": ["fra-a"], "weight": {"fra-a": 100}}}}),
    );
    ok(&["stage", "create", &file3, "--nodes", "edge-1", "--id", "s4"]);
    etcd.put(&region_key("DE"), DE).await;
    ok(&["stage", "widen", "s4", "--nodes", "edge-2"]);
    assert_eq!(etcd.dwctl(&["stage", "promote", "s4"]).code, 3);
}

/// Issue 30, item 1: `rollback` of `policy/global` built a transaction of its own and left
/// the key in the open stage that staged it (no note), so the cohort kept the staged policy
/// and `stage promote` then failed with exit 3. A rollback is a direct write: the key
/// leaves the stage like after `policy set` or `rollback region/DE`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_of_a_staged_policy_leaves_the_stage() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let ok = |args: &[&str]| {
        let run = etcd.dwctl(args);
        assert_eq!(run.code, 0, "{args:?}: {}{}", run.stdout, run.stderr);
        run
    };
    ok(&["policy", "set", r#"{"default":"DE"}"#]);
    let first_policy = etcd.revision().await;
    ok(&["policy", "set", r#"{"default":"FR"}"#]);
    let both = json!({
        "regions": {"DE": {"shard": "eu-9", "origins": ["fra-a"], "weight": {"fra-a": 100}}},
        "policy": {"default": "IT"},
    });
    let file = write_file(&etcd, "both.json", &both);
    ok(&["stage", "create", &file, "--nodes", "edge-1", "--id", "s1"]);
    let stored = stage(&etcd, "s1").await.unwrap();
    assert!(stored["kvs"].get("policy/global").is_some(), "{stored}");

    let run = ok(&[
        "rollback",
        "policy/global",
        "--to-revision",
        &first_policy.to_string(),
    ]);
    assert!(
        run.stdout.contains("policy/global was staged by s1"),
        "{}",
        run.stdout
    );
    let policy = etcd
        .get_json(&format!("{PREFIX}policy/global"))
        .await
        .unwrap();
    assert_eq!(policy["default"], "DE");
    let stored = stage(&etcd, "s1").await.unwrap();
    assert!(stored["kvs"].get("policy/global").is_none(), "{stored}");
    assert!(stored["kvs"].get("region/DE").is_some(), "{stored}");
    // The stage key and the policy changed in one revision: promote believes it.
    let (_, policy_revision) = etcd.get(&format!("{PREFIX}policy/global")).await.unwrap();
    let (_, stage_revision) = etcd.get(&stage_key("s1")).await.unwrap();
    assert_eq!(policy_revision, stage_revision);
    ok(&["stage", "promote", "s1"]);
    assert_eq!(
        etcd.get_json(&format!("{PREFIX}policy/global"))
            .await
            .unwrap()["default"],
        "DE"
    );
    assert_eq!(
        etcd.get_json(&region_key("DE")).await.unwrap()["shard"],
        "eu-9"
    );
}

/// Issue 30, item 1: keys that are not routing keys (stage and drain records, anything
/// under the control prefix) are not rolled back verbatim around the planners any more:
/// the refusal names the command to use, and nothing is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_of_a_record_is_refused_with_what_to_use() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let file = write_file(&etcd, "de.json", &de_move());
    assert_eq!(
        etcd.dwctl(&["stage", "create", &file, "--nodes", "edge-1", "--id", "s1"])
            .code,
        0
    );
    let created = etcd.revision().await;
    assert_eq!(
        etcd.dwctl(&["stage", "widen", "s1", "--nodes", "edge-2"])
            .code,
        0
    );
    assert_eq!(etcd.dwctl(&["drain", "fra-a", "--reason", "INC-1"]).code, 0);
    let before = (etcd.dump(PREFIX).await, etcd.dump(CONTROL).await);
    for (key, hint) in [
        (stage_key("s1"), "dwctl stage"),
        ("stage/s1".to_string(), "dwctl stage"),
        (format!("{CONTROL}drains/fra-a"), "dwctl restore"),
        (format!("{CONTROL}note"), "region/<geo> and policy/global"),
    ] {
        let run = etcd.dwctl(&["rollback", &key, "--to-revision", &created.to_string()]);
        assert_eq!(run.code, 2, "{key}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(hint), "{key}: {}", run.stderr);
    }
    assert_eq!(before, (etcd.dump(PREFIX).await, etcd.dump(CONTROL).await));
}
