//! Origin capacities and the guard's headroom against a real etcd: `origin capacity`
//! (set, clear, dry run, limits), `origin list`, `apply` with and without capacities,
//! history and rollback, and a role made before capacities existed.

use crate::common::{CONTROL, DE, Etcd, seed};
use serde_json::Value;

fn capacity_key(origin: &str) -> String {
    format!("{CONTROL}capacity/{origin}")
}

fn headroom_key() -> String {
    format!("{CONTROL}capacity-headroom")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacities_are_set_cleared_and_listed_under_the_control_prefix() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;

    // A dry run writes nothing and says what it would.
    let (code, preview, stderr) =
        etcd.dwctl_json(&["origin", "capacity", "fra-a", "1200", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(preview["dry_run"], true);
    assert_eq!(
        preview["capacities"]["fra-a"]["after"]["answers_per_s"],
        1200
    );
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());

    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "1200", "--reason", "CHG-7"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("+ capacity/fra-a 1200 answers/s"),
        "{}",
        run.stdout
    );
    let stored = etcd
        .get_json(&capacity_key("fra-a"))
        .await
        .expect("written");
    assert_eq!(stored["answers_per_s"], 1200);
    assert_eq!(stored["reason"], "CHG-7");
    assert!(
        stored["by"].as_str().unwrap().starts_with("tester@"),
        "{stored}"
    );
    // Nothing under the agents' prefix, nothing in the policy.
    assert!(
        etcd.dump("/dw/routing/")
            .await
            .iter()
            .all(|(key, _)| !key.contains("capacity"))
    );

    // The same value again: nothing to change.
    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "1200"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("nothing to change"), "{}", run.stdout);

    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-b", "85.5"]).code, 0);
    let run = etcd.dwctl(&["origin", "capacity", "--headroom", "0.9"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ capacity-headroom 0.8 (the default) -> 0.9"),
        "{}",
        run.stdout
    );
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.9
    );

    let (code, listed, _) = etcd.dwctl_json(&["origin", "list"]);
    assert_eq!(code, 0);
    let row = |id: &str| -> Value {
        listed["origins"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["origin"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(row("fra-a")["capacity"], 1200);
    assert_eq!(row("fra-b")["capacity"], 85.5);
    assert_eq!(listed["capacity_headroom"], 0.9);
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(text.contains("capacity 1200 answers/s"), "{text}");
    assert!(text.contains("refuses a change above 90%"), "{text}");

    let run = etcd.dwctl(&["origin", "capacity", "fra-a", "--clear"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());
    let run = etcd.dwctl(&["origin", "capacity", "--clear-headroom"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&headroom_key()).await.is_none());
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(text.contains("refuses a change above 80%"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacity_limits_are_checked_at_their_edges_before_anything_is_written() {
    let etcd = Etcd::start().await;
    for bad in ["0", "-1", "NaN", "inf", "1000000000.001", "many"] {
        let run = etcd.dwctl(&["origin", "capacity", "fra-a", "--", bad]);
        assert_eq!(run.code, 4, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("answers_per_s"),
            "{bad}: {}",
            run.stderr
        );
    }
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "fra-a", "1000000000"])
            .code,
        0
    );
    for bad in ["0", "1.0001", "-0.5", "NaN"] {
        let run = etcd.dwctl(&["origin", "capacity", &format!("--headroom={bad}")]);
        assert_eq!(run.code, 4, "{bad}: {}", run.stderr);
    }
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "1"]).code,
        0
    );
    let run = etcd.dwctl(&["origin", "capacity", "a/b", "5"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    let run = etcd.dwctl(&[
        "origin",
        "capacity",
        "fra-a",
        "5",
        "--reason",
        &"x".repeat(1025),
    ]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert_eq!(
        etcd.dwctl(&[
            "origin",
            "capacity",
            "fra-a",
            "5",
            "--reason",
            &"x".repeat(1024)
        ])
        .code,
        0
    );
    // Neither an origin nor a headroom: a usage error.
    assert_eq!(etcd.dwctl(&["origin", "capacity"]).code, 2);
    // A malformed record written behind dwctl's back is named, not used.
    etcd.put(&capacity_key("ams-a"), r#"{"answers_per_s":-3}"#)
        .await;
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(
        text.contains("ams-a") && text.contains("MALFORMED CAPACITY RECORD"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_keeps_capacities_beside_the_regions_and_prune_clears_only_named_sections() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "old-a", "50"]).code, 0);
    let file = etcd.data_dir.join("routing.json");
    std::fs::write(
        &file,
        format!(r#"{{"regions":{{"DE":{DE}}},"capacities":{{"fra-a":1200,"fra-b":800}},"capacity_headroom":0.75}}"#),
    )
    .unwrap();
    let path = file.to_str().unwrap();
    let run = etcd.dwctl(&["apply", path, "--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("+ capacity/fra-a 1200 answers/s"),
        "{}",
        run.stdout
    );
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());
    let run = etcd.dwctl(&["apply", path]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        etcd.get_json(&capacity_key("fra-b")).await.unwrap()["answers_per_s"],
        800
    );
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.75
    );
    // Without --prune a capacity the file does not name is kept.
    assert!(etcd.get(&capacity_key("old-a")).await.is_some());
    // A file without capacities leaves them all alone, also with --prune.
    let regions_only = etcd.data_dir.join("regions.json");
    std::fs::write(&regions_only, format!(r#"{{"regions":{{"DE":{DE}}}}}"#)).unwrap();
    let run = etcd.dwctl(&["apply", regions_only.to_str().unwrap(), "--prune"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("old-a")).await.is_some());
    assert!(etcd.get(&headroom_key()).await.is_some());
    // With a capacities section, --prune clears the capacities it does not name.
    let run = etcd.dwctl(&["apply", path, "--prune"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("- capacity/old-a"), "{}", run.stdout);
    assert!(etcd.get(&capacity_key("old-a")).await.is_none());
    assert!(etcd.get(&capacity_key("fra-a")).await.is_some());
    // A bad capacity in a file names its field; nothing is written.
    std::fs::write(&file, r#"{"capacities":{"fra-a":0}}"#).unwrap();
    let run = etcd.dwctl(&["apply", path]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("capacities.fra-a"), "{}", run.stderr);
    // Capacities are not staged.
    std::fs::write(&file, r#"{"capacities":{"fra-a":10}}"#).unwrap();
    let run = etcd.dwctl(&["stage", "create", path, "--cohort", "5%"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capacities_have_history_and_roll_back_like_any_key() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "1000"]).code, 0);
    let first = etcd.get(&capacity_key("fra-a")).await.unwrap().1;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "400"]).code, 0);
    let (code, history, _) = etcd.dwctl_json(&["history", "capacity/fra-a"]);
    assert_eq!(code, 0);
    assert_eq!(history["key"], capacity_key("fra-a"));
    assert_eq!(history["history"].as_array().unwrap().len(), 2);

    let revision = first.to_string();
    let run = etcd.dwctl(&[
        "rollback",
        "capacity/fra-a",
        "--to-revision",
        &revision,
        "--dry-run",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ capacity/fra-a 400 answers/s -> 1000 answers/s"),
        "{}",
        run.stdout
    );
    assert_eq!(
        etcd.get_json(&capacity_key("fra-a")).await.unwrap()["answers_per_s"],
        400
    );
    let run = etcd.dwctl(&["rollback", "capacity/fra-a", "--to-revision", &revision]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stored = etcd.get_json(&capacity_key("fra-a")).await.unwrap();
    assert_eq!(stored["answers_per_s"], 1000);
    assert_eq!(stored["reason"], format!("rollback to revision {first}"));

    // Before the capacity existed: the rollback clears it.
    let run = etcd.dwctl(&["rollback", "capacity/fra-a", "--to-revision", "1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());

    // The headroom too, by its absolute key.
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "0.5"])
            .code,
        0
    );
    let at = etcd.get(&headroom_key()).await.unwrap().1.to_string();
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "0.6"])
            .code,
        0
    );
    let run = etcd.dwctl(&["rollback", &headroom_key(), "--to-revision", &at]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        etcd.get_json(&headroom_key()).await.unwrap()["headroom"],
        0.5
    );
}

/// A role made before capacities existed cannot read them: routing changes go ahead as
/// before (a drain commits), `origin list` says why no capacity is shown, and writing a
/// capacity fails naming `dwctl auth --apply`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_the_capacity_grant_still_drains() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "10"]).code, 0);
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("legacy").await.unwrap();
    for (key, access) in [
        ("/dw/routing/", etcd_client::PermissionType::Readwrite),
        (
            "/dw/control/drains/",
            etcd_client::PermissionType::Readwrite,
        ),
        ("/dw/control/registered/", etcd_client::PermissionType::Read),
    ] {
        admin
            .role_grant_permission(
                "legacy",
                etcd_client::Permission::new(access, key).with_prefix(),
            )
            .await
            .unwrap();
    }
    admin.user_add("legacy", "legacy-pw", None).await.unwrap();
    admin.user_grant_role("legacy", "legacy").await.unwrap();
    admin.auth_enable().await.unwrap();
    let password = etcd.data_dir.join("legacy.password");
    std::fs::write(&password, "legacy-pw").unwrap();
    let password_flag = format!("--password-file={}", password.display());
    let as_legacy = |args: &[&str]| {
        let mut all = vec!["--user=legacy", password_flag.as_str()];
        all.extend_from_slice(args);
        etcd.dwctl(&all)
    };
    let run = as_legacy(&["drain", "fra-a", "--reason", "INC-1"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = as_legacy(&["origin", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("dwctl auth --apply"), "{}", run.stdout);
    let run = as_legacy(&["origin", "capacity", "fra-a", "20"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("dwctl auth --apply"), "{}", run.stderr);
}

/// fra-a and fra-b share DE's sticky traffic half and half; fra-b takes 1,000 answers/s.
const TRAFFIC: &str = r#"{"geos":{"DE":{"sticky":1000},"FR":50},"unplaced":{"other":10}}"#;
const DE_AB: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

async fn guarded_cluster() -> (Etcd, String) {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE_AB)]).await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-b", "1000"]).code, 0);
    let traffic = etcd.data_dir.join("traffic.json");
    std::fs::write(&traffic, TRAFFIC).unwrap();
    let flag = format!("--traffic={}", traffic.display());
    (etcd, flag)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_that_would_overload_is_refused_with_exit_9_and_writes_nothing() {
    let (etcd, traffic) = guarded_cluster().await;
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["drain", "fra-a", &traffic]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("fra-b: predicted 1000/s (now 500/s), capacity 1000/s, guard 800/s"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("about 60% of fra-a's load"),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, before, "nothing written");
    // The dry run refuses it too, and JSON says what kind of error.
    let (code, json, _) = etcd.dwctl_json(&["drain", "fra-a", "--dry-run", &traffic]);
    assert_eq!(code, 9);
    assert_eq!(json["error"]["kind"], "overload");
    // The same for a region set, a policy-free apply and a rollback that move the load.
    let run = etcd.dwctl(&[
        "region",
        "set",
        "DE",
        "--shard",
        "eu-1",
        "--origin",
        "fra-b=100",
        &traffic,
    ]);
    assert_eq!(run.code, 9, "{}", run.stderr);
    let file = etcd.data_dir.join("b-only.json");
    std::fs::write(
        &file,
        r#"{"regions":{"DE":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100}}}}"#,
    )
    .unwrap();
    let run = etcd.dwctl(&["apply", file.to_str().unwrap(), &traffic]);
    assert_eq!(run.code, 9, "{}", run.stderr);
    assert_eq!(etcd.revision().await, before, "nothing written");

    // A bigger headroom does not help here (1000 > 1.0 × 1000 is false: it fits at 100 %).
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "--headroom", "1"]).code,
        0
    );
    let run = etcd.dwctl(&["drain", "fra-a", "--dry-run", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_overload_commits_and_is_audited_and_dry_runs_show_the_load() {
    let (etcd, traffic) = guarded_cluster().await;
    let (code, preview, stderr) =
        etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--allow-overload", &traffic]);
    assert_eq!(code, 0, "{stderr}");
    let prediction = &preview["prediction"];
    assert_eq!(prediction["made"], true);
    let fra_b = prediction["origins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["origin"] == "fra-b")
        .unwrap();
    // The legacy pick's exact share of 50:50 is within a hash step of one half.
    assert!(
        (fra_b["before"].as_f64().unwrap() - 500.0).abs() < 0.01,
        "{fra_b}"
    );
    assert!(
        (fra_b["after"].as_f64().unwrap() - 1000.0).abs() < 1e-6,
        "{fra_b}"
    );
    assert_eq!(fra_b["above_guard"], true);
    assert_eq!(prediction["moves"][0]["geo"], "DE");
    let text = etcd
        .dwctl(&["drain", "fra-a", "--dry-run", "--allow-overload", &traffic])
        .stdout;
    assert!(
        text.contains("fra-b        500/s -> 1000/s  (50% -> 100% of 1000/s)  ABOVE THE GUARD"),
        "{text}"
    );
    assert!(text.contains("geo DE: sticky"), "{text}");
    assert!(
        etcd.dump(&format!("{CONTROL}audit/")).await.is_empty(),
        "a dry run audits nothing"
    );

    let run = etcd.dwctl(&["drain", "fra-a", "--allow-overload", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("--allow-overload"), "{}", run.stdout);
    let audits = etcd.dump(&format!("{CONTROL}audit/")).await;
    assert_eq!(audits.len(), 1, "{audits:?}");
    let record: Value = serde_json::from_str(&audits[0].1).unwrap();
    assert_eq!(record["action"], "allow-overload");
    assert_eq!(record["overloads"][0]["origin"], "fra-b");
    assert!((record["overloads"][0]["predicted"].as_f64().unwrap() - 1000.0).abs() < 1e-6);
    // Restore takes the load off fra-b: no overload, no audit.
    let run = etcd.dwctl(&["restore", "fra-a", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("fra-b        1000/s -> 500/s"),
        "{}",
        run.stdout
    );
    assert_eq!(etcd.dump(&format!("{CONTROL}audit/")).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_traffic_or_with_prometheus_down_the_change_goes_ahead_and_says_why() {
    let (etcd, _) = guarded_cluster().await;
    let (code, json, stderr) = etcd.dwctl_json(&["drain", "fra-a", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["prediction"]["made"], false);
    assert!(
        json["prediction"]["why"]
            .as_str()
            .unwrap()
            .contains("no traffic source")
    );
    // A Prometheus nobody listens on: said, and the drain commits.
    let run = etcd.dwctl(&[
        "drain",
        "fra-a",
        "--prometheus",
        "http://127.0.0.1:9",
        "--prometheus-timeout",
        "2s",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("no load prediction: Prometheus http://127.0.0.1:9"),
        "{}",
        run.stdout
    );
    // A traffic file that does not parse is an error: the operator asked for it.
    let bad = etcd.data_dir.join("bad.json");
    std::fs::write(&bad, "{").unwrap();
    let run = etcd.dwctl(&["restore", "fra-a", &format!("--traffic={}", bad.display())]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    // Nor is a directory, a FIFO or a device read as a traffic file.
    let run = etcd.dwctl(&["restore", "fra-a", "--traffic=/dev/null"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(run.stderr.contains("not a regular file"), "{}", run.stderr);
    // Origins without a capacity are named, not judged.
    let traffic = etcd.data_dir.join("traffic.json");
    let run = etcd.dwctl(&[
        "restore",
        "fra-a",
        &format!("--traffic={}", traffic.display()),
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("no capacity, not judged by the guard: fra-a"),
        "{}",
        run.stdout
    );
}

/// `rebalance` drains an origin whose lease ended whatever the prediction says, and
/// records in the drain record the overload the drain causes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_automatic_drain_proceeds_and_records_its_predicted_overload() {
    use crate::common::daemon::Daemon;
    use crate::common::eventually;
    use std::time::Duration;
    let (etcd, traffic) = guarded_cluster().await;
    let rebalance = Daemon::start(
        &etcd,
        "rebalance",
        &["rebalance", "--grace", "200ms", &traffic],
    );
    eventually(Duration::from_secs(10), "rebalance lists", || async {
        rebalance.log().contains(" live, ").then_some(())
    })
    .await;
    let register = Daemon::start(
        &etcd,
        "register",
        &["origin", "register", "fra-a", "--ttl", "2"],
    );
    eventually(Duration::from_secs(10), "rebalance sees fra-a", || async {
        rebalance.log().contains("fra-a registered").then_some(())
    })
    .await;
    register.sigkill().await;
    let record = eventually(Duration::from_secs(10), "fra-a is drained", || async {
        etcd.get_json(&format!("{CONTROL}drains/fra-a")).await
    })
    .await;
    assert_eq!(record["source"], "rebalance");
    assert_eq!(record["predicted"]["made"], true, "{record}");
    assert_eq!(
        record["predicted"]["overloads"][0]["origin"], "fra-b",
        "{record}"
    );
    assert_eq!(
        record["predicted"]["overloads"][0]["capacity"], 1000.0,
        "{record}"
    );
    assert_eq!(record["schema"], 2);
}

/// `stage promote` writes the staged values as current routing: guarded like any change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promote_that_would_overload_is_refused_and_allow_overload_promotes() {
    let (etcd, traffic) = guarded_cluster().await;
    let file = etcd.data_dir.join("b-only.json");
    std::fs::write(
        &file,
        r#"{"regions":{"DE":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100}}}}"#,
    )
    .unwrap();
    let run = etcd.dwctl(&[
        "stage",
        "create",
        file.to_str().unwrap(),
        "--cohort",
        "5%",
        "--id",
        "b-only",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let run = etcd.dwctl(&["stage", "promote", "b-only", &traffic]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("fra-b: predicted 1000/s"),
        "{}",
        run.stderr
    );
    assert!(
        etcd.get("/dw/routing/stage/b-only").await.is_some(),
        "the stage stays open"
    );
    let run = etcd.dwctl(&["stage", "promote", "b-only", "--allow-overload", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("ABOVE THE GUARD"), "{}", run.stdout);
    assert_eq!(etcd.dump(&format!("{CONTROL}audit/")).await.len(), 1);
}

/// `stage create` and `stage widen` predict the load of the stage's cohort (fleet totals
/// here: the cohort's share of the fleet, its percentage) and are guarded like any change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_predicts_its_cohorts_load_and_a_widen_that_would_overload_is_refused() {
    let (etcd, traffic) = guarded_cluster().await;
    let file = etcd.data_dir.join("b-only.json");
    std::fs::write(
        &file,
        r#"{"regions":{"DE":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100}}}}"#,
    )
    .unwrap();
    let file = file.to_str().unwrap();
    let create = ["stage", "create", file, "--cohort", "20%", "--id", "b-only"];
    // The dry run shows the table: a fifth of the fleet sends DE wholly to fra-b.
    let before = etcd.revision().await;
    let mut argv = create.to_vec();
    argv.extend(["--dry-run", &traffic]);
    let run = etcd.dwctl(&argv);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("predicted load (traffic file"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("fra-b        500/s -> 600/s  (50% -> 60% of 1000/s)"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains(
            "stage b-only: assumed the cohort's nodes see the fleet's mix (the traffic has no \
             per-node rates): the cohort is 0% -> 20% of the fleet (its percentage)"
        ),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("geo DE: sticky"), "{}", run.stdout);
    assert_eq!(etcd.revision().await, before, "a dry run writes nothing");
    let (code, json, _) = etcd.dwctl_json(&argv);
    assert_eq!(code, 0);
    assert_eq!(json["prediction"]["staged"]["share_after"], 0.2, "{json}");
    assert_eq!(json["prediction"]["staged"]["assumed_fleet_mix"], true);

    let mut argv = create.to_vec();
    argv.push(&traffic);
    let run = etcd.dwctl(&argv);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("stage b-only created"),
        "{}",
        run.stdout
    );

    // Widening to 80 % puts 900/s on fra-b, above its guard of 800: refused, nothing
    // written, the cohort as it was.
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["stage", "widen", "b-only", "--cohort", "80%", &traffic]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("fra-b: predicted 900/s (now 600/s), capacity 1000/s, guard 800/s"),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, before, "nothing written");
    let stage = etcd.get_json("/dw/routing/stage/b-only").await.unwrap();
    assert_eq!(stage["cohort"]["points"], 2000, "{stage}");

    // 50 % fits (750/s); without a traffic source the widen goes ahead and says so.
    let run = etcd.dwctl(&["stage", "widen", "b-only", "--cohort", "50%", &traffic]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("600/s -> 750/s"), "{}", run.stdout);
    let run = etcd.dwctl(&["stage", "widen", "b-only", "--cohort", "90%"]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("no load prediction: no traffic source"),
        "{}",
        run.stdout
    );
}

/// A Prometheus that answers every query with an empty vector (no answers in the window),
/// on a loopback port; it serves until the test process ends.
fn empty_prometheus() -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(64) {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Headers, then the form body by its Content-Length.
            while let Ok(read) = stream.read(&mut buffer) {
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_lowercase();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text
                        .lines()
                        .find_map(|line| line.strip_prefix("content-length:"))
                        .and_then(|value| value.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let body = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Issue 40's rule on the guard (issue 39): where capacities are set, a source that
/// answered with traffic that cannot be used (no answers in the window) is never waved
/// through: exit 9, nothing written; `--allow-overload` commits it, audited. Where no
/// capacity is set, nothing is judged and nothing is said about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_traffic_is_refused_where_capacities_are_set_and_silent_where_none_is() {
    let (etcd, _) = guarded_cluster().await;
    let prometheus = empty_prometheus();
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["drain", "fra-a", "--prometheus", &prometheus]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("answered data that cannot be used")
            && run.stderr.contains("has no dw_router_answers_total"),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, before, "nothing written");

    let run = etcd.dwctl(&[
        "drain",
        "fra-a",
        "--prometheus",
        &prometheus,
        "--allow-overload",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("--allow-overload: committed unchecked"),
        "{}",
        run.stdout
    );
    let audits = etcd.dump(&format!("{CONTROL}audit/")).await;
    assert_eq!(audits.len(), 1, "{audits:?}");
    let record: Value = serde_json::from_str(&audits[0].1).unwrap();
    assert_eq!(record["action"], "allow-overload");
    assert!(
        record["unusable_traffic"]
            .as_str()
            .unwrap()
            .contains("has no dw_router_answers_total"),
        "{record}"
    );

    // No capacity set: the same source, and no source at all, judge and say nothing.
    assert_eq!(
        etcd.dwctl(&["origin", "capacity", "fra-b", "--clear"]).code,
        0
    );
    let run = etcd.dwctl(&["restore", "fra-a", "--prometheus", &prometheus]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("prediction"), "{}", run.stdout);
    let (code, json, stderr) = etcd.dwctl_json(&["drain", "fra-a", "--dry-run"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(json.get("prediction").is_none(), "{json}");
    let run = etcd.dwctl(&["drain", "fra-a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(!run.stdout.contains("no load prediction"), "{}", run.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn home_geos_are_kept_in_the_capacity_record_audited_and_listed() {
    let etcd = Etcd::start().await;
    // No capacity: refused, nothing written.
    let run = etcd.dwctl(&["origin", "home", "fra-a", "DE,AT"]);
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains("fra-a has no capacity"),
        "{}",
        run.stderr
    );
    assert!(etcd.get(&capacity_key("fra-a")).await.is_none());
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "1000"]).code, 0);

    // A dry run says what would change and writes nothing.
    let run = etcd.dwctl(&["origin", "home", "fra-a", "DE,AT", "--dry-run"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("~ capacity/fra-a 1000 answers/s -> 1000 answers/s, home none -> AT,DE"),
        "{}",
        run.stdout
    );
    assert!(
        !etcd
            .get_json(&capacity_key("fra-a"))
            .await
            .unwrap()
            .as_object()
            .unwrap()
            .contains_key("home")
    );

    let run = etcd.dwctl(&["origin", "home", "fra-a", "DE,AT", "--reason", "CHG-12"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stored = etcd.get_json(&capacity_key("fra-a")).await.unwrap();
    assert_eq!(stored["home"], serde_json::json!(["AT", "DE"]), "{stored}");
    assert_eq!(
        (stored["answers_per_s"].clone(), stored["reason"].clone()),
        (1000.into(), "CHG-12".into())
    );
    // A new capacity keeps them.
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-a", "1200"]).code, 0);
    let stored = etcd.get_json(&capacity_key("fra-a")).await.unwrap();
    assert_eq!(
        (stored["answers_per_s"].clone(), stored["home"].clone()),
        (1200.into(), serde_json::json!(["AT", "DE"]))
    );

    // Listed, as text and JSON.
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(
        text.contains("capacity 1200 answers/s  home AT,DE"),
        "{text}"
    );
    let (code, listed, _) = etcd.dwctl_json(&["origin", "list"]);
    assert_eq!(code, 0);
    assert_eq!(
        listed["origins"][0]["home"],
        serde_json::json!(["AT", "DE"]),
        "{listed}"
    );

    // History shows who set them, when and why (the record is its own audit).
    let (code, history, _) = etcd.dwctl_json(&["history", "capacity/fra-a"]);
    assert_eq!(code, 0);
    let text = history.to_string();
    assert!(
        text.contains("CHG-12") && text.contains("home") && text.contains("AT"),
        "{history}"
    );

    // The edge of the count: 64 geos pass, 65 are refused before anything is written.
    let geos = |count: usize| {
        (0..count)
            .map(|i| format!("G{i:02}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    assert_eq!(etcd.dwctl(&["origin", "home", "fra-a", &geos(64)]).code, 0);
    let run = etcd.dwctl(&["origin", "home", "fra-a", &geos(65)]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(run.stderr.contains("at most 64"), "{}", run.stderr);
    for bad in ["DE,,AT", "continent/XX", ""] {
        let run = etcd.dwctl(&["origin", "home", "fra-a", "--", bad]);
        assert_ne!(run.code, 0, "{bad:?}");
    }
    assert_eq!(
        etcd.get_json(&capacity_key("fra-a")).await.unwrap()["home"]
            .as_array()
            .unwrap()
            .len(),
        64
    );

    // --clear removes them and keeps the capacity; a second clear is a note.
    let run = etcd.dwctl(&["origin", "home", "fra-a", "--clear"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let stored = etcd.get_json(&capacity_key("fra-a")).await.unwrap();
    assert!(
        stored.get("home").is_none() && stored["answers_per_s"] == 1200,
        "{stored}"
    );
    let run = etcd.dwctl(&["origin", "home", "fra-a", "--clear"]);
    assert!(
        run.stdout.contains("fra-a has no home geos to clear"),
        "{}",
        run.stdout
    );
}
