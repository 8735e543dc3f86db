//! The long-running commands as real processes against a real etcd: `origin register`
//! and `rebalance` (leases, SIGKILL, re-registration, SIGTERM, an etcd restart), and
//! `health` (a local HTTP server that starts failing, recovers, and a fleet-wide outage
//! that must not drain more than the allowed fraction).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::daemon::Daemon;
use crate::common::probe::health_server;
use crate::common::{CONTROL, Etcd, PREFIX, drain_key, eventually, listed_weights, region_key};
use serde_json::Value;

async fn drain_record(etcd: &Etcd, origin: &str) -> Option<Value> {
    etcd.get_json(&drain_key(origin)).await
}

async fn lists(etcd: &Etcd, geo: &str, origin: &str) -> bool {
    etcd.get_json(&region_key(geo)).await.is_some_and(|region| {
        listed_weights(&region)
            .iter()
            .any(|(name, _)| name == origin)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_drains_expired_leases_and_restores_on_reregistration() {
    let mut etcd = Etcd::start().await;
    let regions = [
        (
            "DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu-2","origins":["a","c"],"weight":{"a":30,"c":70}}"#,
        ),
        (
            "US",
            r#"{"shard":"us-1","origins":["x","y"],"weight":{"x":50,"y":50}}"#,
        ),
    ];
    for (geo, value) in regions {
        assert_eq!(etcd.dwctl(&["region", "set", geo, value]).code, 0);
    }
    let us_before = etcd.get(&region_key("US")).await.unwrap();
    let rebalance = Daemon::start(&etcd, "rebalance", &["rebalance", "--grace", "200ms"]);
    // Registering only after rebalance has listed makes it see `a` arrive on its watch
    // (step 1); an origin already live at listing time is step 3's case.
    eventually(Duration::from_secs(10), "rebalance lists", || async {
        rebalance.log().contains(" live, ").then_some(())
    })
    .await;
    let ttl = 2;
    let register = |etcd: &Etcd, name: &str| {
        Daemon::start(
            etcd,
            name,
            &[
                "origin",
                "register",
                "a",
                "--ttl",
                &ttl.to_string(),
                "--meta",
                r#"{"addr":"10.0.0.1:443"}"#,
            ],
        )
    };

    // 1. Registered, then SIGKILLed: drained within ttl + 2 s, reason lease-expired.
    let first = register(&etcd, "register-1");
    eventually(Duration::from_secs(10), "a registers", || async {
        etcd.get(&format!("{PREFIX}origin/a")).await.map(|_| ())
    })
    .await;
    assert!(
        etcd.get(&format!("{CONTROL}registered/a")).await.is_some(),
        "the registration marker is written"
    );
    // rebalance must have seen it live before the kill, or it could not tell an expiry.
    eventually(Duration::from_secs(10), "rebalance sees a", || async {
        rebalance.log().contains("a registered").then_some(())
    })
    .await;
    first.sigkill().await;
    let killed = Instant::now();
    let record = eventually(
        Duration::from_secs(ttl + 2),
        "a is drained within ttl + 2 s",
        || async { drain_record(&etcd, "a").await },
    )
    .await;
    assert!(killed.elapsed() <= Duration::from_secs(ttl + 2));
    assert_eq!(record["reason"], "lease-expired");
    assert_eq!(record["source"], "rebalance");
    assert!(!lists(&etcd, "DE", "a").await && !lists(&etcd, "FR", "a").await);

    // 2. Registers again: the drain is restored.
    let second = register(&etcd, "register-2");
    eventually(Duration::from_secs(10), "a is restored", || async {
        (drain_record(&etcd, "a").await.is_none() && lists(&etcd, "DE", "a").await).then_some(())
    })
    .await;
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("FR")).await.unwrap()),
        [("a".to_string(), 30), ("c".to_string(), 70)]
    );

    let (code, listed, _) = etcd.dwctl_json(&["origin", "list"]);
    assert_eq!(code, 0);
    let row = &listed["origins"][0];
    assert_eq!(
        (row["origin"].as_str(), row["live"].as_bool()),
        (Some("a"), Some(true)),
        "{listed}"
    );
    assert!(
        row["ttl"]
            .as_i64()
            .is_some_and(|remaining| remaining > 0 && remaining <= ttl as i64),
        "{listed}"
    );
    assert_eq!(row["meta"]["addr"], "10.0.0.1:443");
    assert_eq!(row["drained"], Value::Null);

    // 3. etcd restarts under both daemons; they reconnect, and a crash is still caught.
    etcd.restart().await;
    eventually(
        Duration::from_secs(20),
        "the origin registers again after the restart",
        || async { (second.log().matches("registered").count() >= 2).then_some(()) },
    )
    .await;
    eventually(
        Duration::from_secs(20),
        "rebalance re-lists after the restart",
        || async { (rebalance.log().matches("listed").count() >= 2).then_some(()) },
    )
    .await;
    second.sigkill().await;
    eventually(
        Duration::from_secs(20),
        "a is drained after the restart",
        || async { drain_record(&etcd, "a").await },
    )
    .await;

    // 4. A clean stop (SIGTERM) revokes the lease at once: the key is gone, rebalance drains.
    let third = register(&etcd, "register-3");
    eventually(Duration::from_secs(10), "a is restored again", || async {
        drain_record(&etcd, "a").await.is_none().then_some(())
    })
    .await;
    assert_eq!(third.terminate().await, 0, "register exits 0 on SIGTERM");
    assert!(
        etcd.get(&format!("{PREFIX}origin/a")).await.is_none(),
        "the lease was revoked"
    );
    eventually(
        Duration::from_secs(10),
        "a is drained after the clean stop",
        || async { drain_record(&etcd, "a").await },
    )
    .await;

    // Origins that never registered are never touched.
    assert_eq!(etcd.get(&region_key("US")).await.unwrap(), us_before);
    assert!(lists(&etcd, "FR", "c").await);
    let records: Vec<String> = etcd
        .dump(&format!("{CONTROL}drains/"))
        .await
        .into_iter()
        .map(|(key, _)| key)
        .collect();
    assert_eq!(records, [drain_key("a")]);

    let (_, listed, _) = etcd.dwctl_json(&["origin", "list"]);
    let row = &listed["origins"][0];
    assert_eq!(
        (row["live"].as_bool(), row["registered"].as_bool()),
        (Some(false), Some(true)),
        "{listed}"
    );
    assert_eq!(row["drained"]["source"], "rebalance");
    assert!(etcd.dwctl(&["origin", "list"]).stdout.contains("DOWN"));

    let log = rebalance.log();
    assert_eq!(
        rebalance.terminate().await,
        0,
        "rebalance exits 0 on SIGTERM; log:\n{log}"
    );

    assert_eq!(etcd.dwctl(&["origin", "forget", "a"]).code, 0);
    assert!(etcd.get(&format!("{CONTROL}registered/a")).await.is_none());
    assert_eq!(etcd.dwctl(&["origin", "forget", "a"]).code, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_drains_failing_origins_restores_them_and_never_drains_too_many() {
    let etcd = Etcd::start().await;
    let regions = [
        (
            "DE",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":30,"c":20}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu-2","origins":["a","b"],"weight":{"a":40,"b":60}}"#,
        ),
    ];
    for (geo, value) in regions {
        assert_eq!(etcd.dwctl(&["region", "set", geo, value]).code, 0);
    }
    let de_before = etcd.get_json(&region_key("DE")).await.unwrap();
    let mut switches = Vec::new();
    let mut probes = Vec::new();
    for origin in ["a", "b", "c"] {
        let healthy = Arc::new(AtomicBool::new(true));
        probes.push(format!("{origin}={}", health_server(healthy.clone()).await));
        switches.push(healthy);
    }
    let mut args = vec![
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
        "0.5",
    ];
    for probe in &probes {
        args.extend(["--probe", probe.as_str()]);
    }
    let health = Daemon::start(&etcd, "health", &args);

    // a starts failing: drained.
    switches[0].store(false, Ordering::SeqCst);
    let record = eventually(Duration::from_secs(15), "a is drained", || async {
        drain_record(&etcd, "a").await
    })
    .await;
    assert_eq!(record["source"], "health");
    assert!(
        record["reason"].as_str().unwrap().contains("503"),
        "{record}"
    );
    assert!(!lists(&etcd, "DE", "a").await && !lists(&etcd, "FR", "a").await);

    // a recovers: restored with its exact weights.
    switches[0].store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(15), "a is restored", || async {
        drain_record(&etcd, "a").await.is_none().then_some(())
    })
    .await;
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        listed_weights(&de_before)
    );

    // Every probe fails: at most floor(0.5 * 3) = 1 origin is drained, however long it lasts.
    for switch in &switches {
        switch.store(false, Ordering::SeqCst);
    }
    eventually(Duration::from_secs(15), "one origin is drained", || async {
        let records = etcd.dump(&format!("{CONTROL}drains/")).await;
        (!records.is_empty()).then_some(())
    })
    .await;
    for _ in 0..15 {
        let records = etcd.dump(&format!("{CONTROL}drains/")).await;
        assert_eq!(
            records.len(),
            1,
            "more than the allowed fraction drained: {records:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        health.log().contains("drain-refused"),
        "the refusal is reported:\n{}",
        health.log()
    );
    for region in ["DE", "FR"] {
        assert!(etcd.get_json(&region_key(region)).await.is_some());
    }

    // All recover: everything restored.
    for switch in &switches {
        switch.store(true, Ordering::SeqCst);
    }
    eventually(
        Duration::from_secs(15),
        "every drain is restored",
        || async {
            etcd.dump(&format!("{CONTROL}drains/"))
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        listed_weights(&de_before)
    );
    let log = health.log();
    assert_eq!(
        health.terminate().await,
        0,
        "health exits 0 on SIGTERM; log:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_registers_again_after_losing_its_lease() {
    let etcd = Etcd::start().await;
    let register = Daemon::start(
        &etcd,
        "register",
        &["origin", "register", "b", "--ttl", "2"],
    );
    let key = format!("{PREFIX}origin/b");
    let first = eventually(Duration::from_secs(10), "b registers", || {
        lease_of(&etcd, &key)
    })
    .await;
    // Frozen past its ttl (as a long GC pause or a suspended VM would), the lease expires.
    register.signal("-STOP");
    eventually(Duration::from_secs(10), "the key expires", || async {
        etcd.get(&key).await.is_none().then_some(())
    })
    .await;
    register.signal("-CONT");
    let second = eventually(Duration::from_secs(10), "b registers again", || {
        lease_of(&etcd, &key)
    })
    .await;
    assert_ne!(first, second, "a new lease");
    assert!(register.log().contains("lease-lost"), "{}", register.log());
    assert_eq!(register.terminate().await, 0);
}

/// The lease a key is attached to, if the key exists.
async fn lease_of(etcd: &Etcd, key: &str) -> Option<i64> {
    let response = etcd.client().await.get(key, None).await.ok()?;
    response.kvs().first().map(|kv| kv.lease())
}

/// Continent buckets are regions to the daemons too: an origin that only a bucket uses is
/// drained from it by `health` when its probe fails and by `rebalance` when its lease
/// expires, with the same records, and restored with its weights.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_lease_drains_cover_bucket_keys() {
    let etcd = Etcd::start().await;
    let regions = [
        (
            "continent/EU",
            r#"{"shard":"eu-1","origins":["fra-a","ams-a"],"weight":{"fra-a":60,"ams-a":40}}"#,
        ),
        (
            "US",
            r#"{"shard":"us-1","origins":["iad-a","iad-b"],"weight":{"iad-a":50,"iad-b":50}}"#,
        ),
    ];
    for (geo, value) in regions {
        assert_eq!(etcd.dwctl(&["region", "set", geo, value]).code, 0);
    }
    let bucket_before = etcd.get_json(&region_key("continent/EU")).await.unwrap();

    // Health: fra-a (only the bucket uses it) fails its probe and is drained from the bucket.
    let fra_healthy = Arc::new(AtomicBool::new(true));
    let fra_probe = format!("fra-a={}", health_server(fra_healthy.clone()).await);
    let iad_probe = format!(
        "iad-a={}",
        health_server(Arc::new(AtomicBool::new(true))).await
    );
    let health = Daemon::start(
        &etcd,
        "health-bucket",
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
            "--probe",
            &fra_probe,
            "--probe",
            &iad_probe,
        ],
    );
    fra_healthy.store(false, Ordering::SeqCst);
    let record = eventually(Duration::from_secs(15), "fra-a is drained", || async {
        drain_record(&etcd, "fra-a").await
    })
    .await;
    assert_eq!(record["source"], "health");
    assert!(
        record.to_string().contains("continent/EU"),
        "the record names the bucket: {record}"
    );
    assert!(!lists(&etcd, "continent/EU", "fra-a").await);
    assert!(lists(&etcd, "continent/EU", "ams-a").await);
    fra_healthy.store(true, Ordering::SeqCst);
    eventually(Duration::from_secs(15), "fra-a is restored", || async {
        drain_record(&etcd, "fra-a").await.is_none().then_some(())
    })
    .await;
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("continent/EU")).await.unwrap()),
        listed_weights(&bucket_before)
    );
    assert_eq!(health.terminate().await, 0);

    // Leases: ams-a registers, its registration dies, rebalance drains it from the bucket.
    let rebalance = Daemon::start(&etcd, "rebalance-bucket", &["rebalance"]);
    eventually(Duration::from_secs(10), "rebalance lists", || async {
        rebalance.log().contains(" live, ").then_some(())
    })
    .await;
    let register = || {
        Daemon::start(
            &etcd,
            "register-ams",
            &["origin", "register", "ams-a", "--ttl", "2"],
        )
    };
    let first = register();
    eventually(Duration::from_secs(10), "rebalance sees ams-a", || async {
        rebalance.log().contains("ams-a registered").then_some(())
    })
    .await;
    first.sigkill().await;
    let record = eventually(Duration::from_secs(10), "ams-a is drained", || async {
        drain_record(&etcd, "ams-a").await
    })
    .await;
    assert_eq!(record["reason"], "lease-expired");
    assert!(record.to_string().contains("continent/EU"), "{record}");
    assert!(!lists(&etcd, "continent/EU", "ams-a").await);
    let _second = register();
    eventually(Duration::from_secs(10), "ams-a is restored", || async {
        (drain_record(&etcd, "ams-a").await.is_none()
            && lists(&etcd, "continent/EU", "ams-a").await)
            .then_some(())
    })
    .await;
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("continent/EU")).await.unwrap()),
        listed_weights(&bucket_before)
    );
    // The bucket's history holds every step: set, drained and restored twice.
    let history = etcd.dwctl(&["history", "region/continent/EU"]);
    assert_eq!(history.code, 0, "{}", history.stderr);
    assert!(
        history.stdout.matches("eu-1").count() >= 5,
        "history shows the bucket's five values:\n{}",
        history.stdout
    );
}

/// `origin forget` goes through the write path (issue 39): `--dry-run` writes nothing; the
/// forget deletes the registration record guarded on its revision and writes an audit
/// record with who and why in the same transaction; `dwctl history` shows both; an origin
/// never registered is not found (exit 1), nothing written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_forget_is_previewed_audited_and_in_history() {
    let etcd = Etcd::start().await;
    let registration = format!("{CONTROL}registered/fra-old");
    let mut client = etcd.client().await;
    client
        .put(registration.as_str(), r#"{"lease":1234}"#, None)
        .await
        .unwrap();
    let audits = || async { etcd.dump(&format!("{CONTROL}audit/")).await };

    let before = etcd.revision().await;
    let run = etcd.dwctl(&[
        "origin",
        "forget",
        "fra-old",
        "--reason",
        "CHG-77",
        "--dry-run",
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("dry run, nothing written"),
        "{}",
        run.stdout
    );
    assert_eq!(etcd.revision().await, before, "a dry run writes nothing");
    assert!(etcd.get(&registration).await.is_some());

    let (code, json, stderr) =
        etcd.dwctl_json(&["origin", "forget", "fra-old", "--reason", "CHG-77"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["forgotten"], true, "{json}");
    assert!(etcd.get(&registration).await.is_none());
    let audits = audits().await;
    assert_eq!(audits.len(), 1, "{audits:?}");
    assert_eq!(audits[0].0, json["audit"].as_str().unwrap());
    let record: Value = serde_json::from_str(&audits[0].1).unwrap();
    assert_eq!(record["action"], "origin-forget");
    assert_eq!(record["origin"], "fra-old");
    assert_eq!(record["reason"], "CHG-77");
    assert_eq!(record["registration"], r#"{"lease":1234}"#);
    // Both writes landed at one revision, and history shows them.
    let revision = json["revision"].as_i64().unwrap();
    let history = etcd.dwctl(&["history", &registration]);
    assert!(
        history.stdout.contains(&format!("{revision:>8}  delete")),
        "{}",
        history.stdout
    );
    let history = etcd.dwctl(&["history", &audits[0].0]);
    assert!(
        history.stdout.contains(&format!("{revision:>8}  put"))
            && history.stdout.contains("CHG-77"),
        "{}",
        history.stdout
    );

    // Not registered (any more): not found, nothing written.
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["origin", "forget", "fra-old"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("no registered origin"),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, before);
}

/// The sources of a drain record's parts, in order (a one-part record: its `source`).
fn part_sources(record: &Value) -> Vec<String> {
    match record["parts"].as_array() {
        Some(parts) => parts
            .iter()
            .map(|part| part["source"].as_str().unwrap_or_default().to_owned())
            .collect(),
        None => vec![record["source"].as_str().unwrap_or_default().to_owned()],
    }
}

/// Issue 42, the join path with the real daemon: a person drains a in DE; `dwctl health`
/// then drains a (its part joins in DE without writing it, and drains FR); the probes
/// pass again and health's restore removes only its own part: the person's drain stays
/// exactly; the person's `dwctl restore` brings the configured weights back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_joins_a_persons_drain_and_its_restore_leaves_the_persons_part() {
    let etcd = Etcd::start().await;
    let regions = [
        (
            "DE",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":30,"c":20}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu-2","origins":["a","b"],"weight":{"a":40,"b":60}}"#,
        ),
    ];
    for (geo, value) in regions {
        assert_eq!(etcd.dwctl(&["region", "set", geo, value]).code, 0);
    }
    let weights = |geo: &'static str| {
        let etcd = &etcd;
        async move { listed_weights(&etcd.get_json(&region_key(geo)).await.unwrap()) }
    };
    let (de_configured, fr_configured) = (weights("DE").await, weights("FR").await);

    let run = etcd.dwctl(&["drain", "a", "--region", "DE", "--reason", "INC-42"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let de_person = weights("DE").await;
    assert!(!de_person.iter().any(|(name, _)| name == "a"));
    let (_, de_revision) = etcd.get(&region_key("DE")).await.unwrap();

    let mut switches = Vec::new();
    let mut args = vec![
        "health".to_owned(),
        "--interval".into(),
        "0.2".into(),
        "--probe-timeout".into(),
        "1".into(),
        "--fail-after".into(),
        "2".into(),
        "--recover-after".into(),
        "2".into(),
        "--max-drained-fraction".into(),
        "0.5".into(),
    ];
    for origin in ["a", "b", "c"] {
        let healthy = Arc::new(AtomicBool::new(true));
        let url = health_server(healthy.clone()).await;
        args.extend(["--probe".to_owned(), format!("{origin}={url}")]);
        switches.push(healthy);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let health = Daemon::start(&etcd, "health-join", &args);

    // a fails its probes: health's part joins the person's.
    switches[0].store(false, Ordering::SeqCst);
    let record = eventually(
        Duration::from_secs(15),
        "health joins a's drain",
        || async {
            drain_record(&etcd, "a")
                .await
                .filter(|record| part_sources(record) == ["cli", "health"])
        },
    )
    .await;
    assert!(!lists(&etcd, "FR", "a").await, "{record}");
    let (_, joined_revision) = etcd.get(&region_key("DE")).await.unwrap();
    assert_eq!(joined_revision, de_revision, "the join wrote DE: {record}");
    assert_eq!(weights("DE").await, de_person);

    // The probes pass again: health restores its part only.
    switches[0].store(true, Ordering::SeqCst);
    let record = eventually(
        Duration::from_secs(15),
        "health's part is restored",
        || async {
            drain_record(&etcd, "a")
                .await
                .filter(|record| part_sources(record) == ["cli"])
        },
    )
    .await;
    assert_eq!(record["reason"], "INC-42", "{record}");
    assert_eq!(weights("DE").await, de_person, "the person's drain stays");
    assert_eq!(weights("FR").await, fr_configured);
    let log = health.log();
    assert_eq!(health.terminate().await, 0, "log:\n{log}");

    let run = etcd.dwctl(&["restore", "a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(drain_record(&etcd, "a").await.is_none());
    assert_eq!(weights("DE").await, de_configured);
    assert_eq!(weights("FR").await, fr_configured);
}
