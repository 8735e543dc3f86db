//! `dwctl shed` against a real etcd: a shed committed and restored to the exact values, a
//! later direct write that the drain record's reconcile rule does not undo, `shed 100`
//! writing what `drain` writes, usage errors, the capacity guard (exit 9) on where the
//! shed load lands, `--spill` on drain and shed, and `health --on-fail shed:50` against a
//! failing probe target.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::probe::health_server;
use crate::common::{CONTROL, DE, Etcd, drain_key, eventually, listed_weights, region_key, seed};
use serde_json::Value;

const FR: &str = r#"{"shard":"eu-1","origins":["fra-b","fra-a"],"weight":{"fra-a":40,"fra-b":60}}"#;
const US: &str = r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":100}}"#;
/// DE and FR sticky (their shares move smoothly), US plain.
const TRAFFIC: &str = r#"{"geos":{"DE":{"sticky":1000},"FR":{"sticky":500},"US":200}}"#;

async fn weights(etcd: &Etcd, geo: &str) -> Vec<(String, u64)> {
    listed_weights(&etcd.get_json(&region_key(geo)).await.expect("region"))
}

fn traffic_flag(etcd: &Etcd, body: &str) -> String {
    let path = etcd.data_dir.join("traffic.json");
    std::fs::write(&path, body).unwrap();
    format!("--traffic={}", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shed_commits_restores_exactly_survives_later_writes_and_100_is_a_drain() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("FR", FR), ("US", US)]).await;
    let (de, fr) = (weights(&etcd, "DE").await, weights(&etcd, "FR").await);
    let traffic = traffic_flag(&etcd, TRAFFIC);

    // Usage errors (exit 2), nothing written.
    let revision = etcd.revision().await;
    for bad in ["0", "101", "forty", "-5", "NaN", "100.01"] {
        let run = etcd.dwctl(&["shed", "fra-a", bad]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
        assert!(
            run.stderr.contains("PERCENT") || run.stderr.contains("percent"),
            "{bad}: {}",
            run.stderr
        );
    }
    assert_eq!(etcd.revision().await, revision);

    // The dry run shows the load table and writes nothing.
    let run = etcd.dwctl(&["shed", "fra-a", "40", "--dry-run", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(run.stdout.contains("predicted load"), "{}", run.stdout);
    assert!(run.stdout.contains("the plan takes"), "{}", run.stdout);
    assert!(
        run.stdout.contains("+ drain record fra-a"),
        "{}",
        run.stdout
    );
    assert_eq!(etcd.revision().await, revision, "a dry run writes nothing");

    let (code, json, stderr) =
        etcd.dwctl_json(&["shed", "fra-a", "40", "--reason", "INC-9", &traffic]);
    assert_eq!(code, 0, "{stderr}");
    let moved = json["prediction"]["origins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|origin| origin["origin"] == "fra-a")
        .cloned()
        .expect("fra-a's load changes");
    let (before, after) = (
        moved["before"].as_f64().unwrap(),
        moved["after"].as_f64().unwrap(),
    );
    let took = 100.0 * (before - after) / before;
    assert!((took - 40.0).abs() < 1.0, "shed {took}% of fra-a's load");
    let record = etcd.get_json(&drain_key("fra-a")).await.expect("recorded");
    assert_eq!(record["schema"], 3, "{record}");
    assert_eq!(record["shed"]["percent"], 40.0);
    assert_eq!(record["shed"]["steps"][0]["reason"], "INC-9");
    for geo in ["DE", "FR"] {
        let now = weights(&etcd, geo).await;
        assert!(
            now.iter()
                .any(|(name, weight)| name == "fra-a" && *weight > 0),
            "{geo}: {now:?}"
        );
        assert_eq!(
            record["regions"][geo]["after"]["origins"],
            etcd.get_json(&region_key(geo)).await.unwrap()["origins"]
        );
    }
    assert_eq!(weights(&etcd, "US").await, [("iad-a".to_string(), 100)]);

    // origin list and status say shed 40%.
    let text = etcd.dwctl(&["origin", "list"]).stdout;
    assert!(text.contains("shed 40% by cli: INC-9"), "{text}");
    let (_, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(status["shed_origins"]["fra-a"], "shed 40%");

    // A later direct write to FR (fra-a listed, as the operator wants it): the reconcile
    // rule of drain records does not take FR out of the shed record, nor undo anything.
    let run = etcd.dwctl(&[
        "region", "set", "FR", "--shard", "eu-1", "--origin", "fra-b=70", "--origin", "fra-a=30",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        !run.stdout.contains("leaves fra-a's drain record"),
        "{}",
        run.stdout
    );
    let record = etcd
        .get_json(&drain_key("fra-a"))
        .await
        .expect("still recorded");
    assert!(
        record["regions"]["FR"].is_object() && record["regions"]["DE"].is_object(),
        "{record}"
    );
    assert_eq!(
        weights(&etcd, "FR").await,
        [("fra-b".to_string(), 70), ("fra-a".to_string(), 30)]
    );

    // Restore: DE exactly as before the shed; FR changed since, fra-a back at its share.
    let run = etcd.dwctl(&["restore", "fra-a", &traffic]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("region FR changed since the shed"),
        "{}",
        run.stdout
    );
    assert_eq!(weights(&etcd, "DE").await, de);
    assert_eq!(
        weights(&etcd, "FR").await,
        [("fra-b".to_string(), 60), ("fra-a".to_string(), 40)]
    );
    assert!(etcd.get(&drain_key("fra-a")).await.is_none());
    // Back as seeded, a shed restores exactly every region it wrote.
    seed(&etcd, &[("FR", FR)]).await;
    assert_eq!(etcd.dwctl(&["shed", "fra-a", "25", &traffic]).code, 0);
    assert_eq!(etcd.dwctl(&["shed", "fra-a", "25", &traffic]).code, 0);
    let record = etcd.get_json(&drain_key("fra-a")).await.unwrap();
    assert_eq!(record["shed"]["steps"].as_array().unwrap().len(), 2);
    assert_eq!(record["shed"]["percent"], 43.75);
    assert_eq!(etcd.dwctl(&["restore", "fra-a"]).code, 0);
    assert_eq!(
        (weights(&etcd, "DE").await, weights(&etcd, "FR").await),
        (de.clone(), fr.clone())
    );

    // shed 100 writes what drain writes (timestamps aside).
    let strip = |mut json: Value| {
        let mut drains = json["drains"].take();
        drains["fra-a"]["at"] = Value::Null;
        (json["regions"].take(), drains)
    };
    let (code, drain, _) = etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--reason", "x"]);
    assert_eq!(code, 0);
    let (code, shed, _) = etcd.dwctl_json(&["shed", "fra-a", "100", "--dry-run", "--reason", "x"]);
    assert_eq!(code, 0);
    assert_eq!(strip(shed), strip(drain));
    assert_eq!(etcd.dwctl(&["shed", "fra-a", "100%"]).code, 0);
    let record = etcd.get_json(&drain_key("fra-a")).await.unwrap();
    assert_eq!(record["schema"], 2);
    assert!(record.get("shed").is_none(), "{record}");
    assert!(
        !weights(&etcd, "DE")
            .await
            .iter()
            .any(|(name, _)| name == "fra-a")
    );
    assert!(
        etcd.dwctl(&["origin", "list"])
            .stdout
            .contains("drained by cli")
    );
    assert_eq!(etcd.dwctl(&["restore", "fra-a"]).code, 0);
    assert_eq!(
        (weights(&etcd, "DE").await, weights(&etcd, "FR").await),
        (de, fr)
    );
}

const DE_AB: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;
const EU: &str = r#"{"shard":"eu-1","origins":["ams-a"],"weight":{"ams-a":100}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guard_judges_where_a_shed_lands_and_spill_adds_the_next_step() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE_AB), ("continent/EU", EU)]).await;
    for (origin, capacity) in [("fra-b", "1000"), ("ams-a", "1000")] {
        assert_eq!(
            etcd.dwctl(&["origin", "capacity", origin, capacity]).code,
            0
        );
    }
    let traffic = traffic_flag(&etcd, r#"{"geos":{"DE":{"sticky":1000}}}"#);
    let de = weights(&etcd, "DE").await;
    let revision = etcd.revision().await;

    // fra-b has 500 of DE's 1000 and a guard of 800: shedding 80 % of fra-a's 500 puts
    // 900 on it. Refused, exit 9, nothing written; the part that fits is named.
    let run = etcd.dwctl(&["shed", "fra-a", "80", &traffic]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("fra-b: predicted 899/s (now 500/s)"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("the largest part that would fit"),
        "{}",
        run.stderr
    );
    let (code, json, _) = etcd.dwctl_json(&["shed", "fra-a", "80", "--dry-run", &traffic]);
    assert_eq!(
        (code, json["error"]["kind"].as_str()),
        (9, Some("overload"))
    );
    assert_eq!(etcd.revision().await, revision, "nothing written");

    // --spill without traffic: refused (exit 4), nothing written.
    let run = etcd.dwctl(&["drain", "fra-a", "--spill"]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("--spill needs the traffic"),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, revision);

    // With --spill the shed goes ahead: ams-a, continent/EU's origin serving eu-1, takes
    // what fra-b cannot, and the plan says so.
    let run = etcd.dwctl(&["shed", "fra-a", "80", "--spill", &traffic]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("--spill: region DE adds ams-a"),
        "{}",
        run.stdout
    );
    let now = weights(&etcd, "DE").await;
    assert_eq!(
        now.iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["fra-a", "fra-b", "ams-a"]
    );
    assert_eq!(etcd.dwctl(&["restore", "fra-a"]).code, 0);
    assert_eq!(
        weights(&etcd, "DE").await,
        de,
        "restore takes the spill origin out"
    );

    // A drain: refused without --spill, committed with it; restore exact.
    assert_eq!(etcd.dwctl(&["drain", "fra-a", &traffic]).code, 9);
    let run = etcd.dwctl(&["drain", "fra-a", "--spill", &traffic]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let now = weights(&etcd, "DE").await;
    assert_eq!(
        now.iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["fra-b", "ams-a"]
    );
    let record = etcd.get_json(&drain_key("fra-a")).await.unwrap();
    assert_eq!(record["schema"], 2);
    assert_eq!(record["regions"]["DE"]["after"]["origins"][1], "ams-a");
    assert_eq!(etcd.dwctl(&["restore", "fra-a"]).code, 0);
    assert_eq!(weights(&etcd, "DE").await, de);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_on_fail_shed_sheds_a_failing_origin_and_restores_it() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;
    let de = weights(&etcd, "DE").await;
    let traffic = traffic_flag(&etcd, r#"{"geos":{"DE":{"sticky":1000}}}"#);
    let healthy = Arc::new(AtomicBool::new(true));
    let probe = format!("fra-a={}", health_server(healthy.clone()).await);
    // A malformed --on-fail is a usage error.
    let run = etcd.dwctl(&["health", "--probe", &probe, "--on-fail", "shed:0"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    let health = Daemon::start(
        &etcd,
        "health",
        &[
            "health",
            "--interval",
            "0.2",
            "--probe-timeout",
            "1",
            "--fail-after",
            "2",
            "--recover-after",
            "2",
            "--max-drained-fraction",
            "1",
            "--probe",
            &probe,
            "--on-fail",
            "shed:50",
            &traffic,
        ],
    );
    healthy.store(false, Ordering::SeqCst);
    let record = eventually(Duration::from_secs(15), "fra-a is shed", || async {
        etcd.get_json(&drain_key("fra-a")).await
    })
    .await;
    assert_eq!(record["source"], "health", "{record}");
    assert_eq!(record["shed"]["percent"], 50.0, "{record}");
    let achieved = record["shed"]["steps"][0]["achieved"].as_f64().unwrap();
    assert!((achieved - 50.0).abs() < 1.0, "{achieved}");
    // Shed, not drained: fra-a still serves DE, with about half its share.
    let now = weights(&etcd, "DE").await;
    let share = |weights: &[(String, u64)]| {
        let total: u64 = weights.iter().map(|(_, weight)| weight).sum();
        weights
            .iter()
            .find(|(name, _)| name == "fra-a")
            .map_or(0.0, |(_, weight)| *weight as f64 / total as f64)
    };
    assert!((share(&now) - 0.25).abs() < 0.01, "{now:?}");
    assert!(record["predicted"]["made"] == true, "{record}");
    assert!(etcd.dump(&format!("{CONTROL}drains/")).await.len() == 1);

    healthy.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(15), "fra-a is restored", || async {
        etcd.get(&drain_key("fra-a")).await.is_none().then_some(())
    })
    .await;
    assert_eq!(weights(&etcd, "DE").await, de);
    let log = health.log();
    assert!(log.contains("shed"), "{log}");
    assert_eq!(health.terminate().await, 0, "{log}");
}
