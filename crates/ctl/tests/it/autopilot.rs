//! `dwctl autopilot` as real processes against a real etcd, its rates from a traffic file
//! or from a fake Prometheus (`common::prometheus`, answering the autopilot's own PromQL):
//! a relief written with source `autopilot` and its figures, a dry run that writes
//! nothing, one leader and a standby that takes over within the lease TTL, a hold on
//! another source's record, fail static on a missing source and on a Prometheus that does
//! not answer (with the metric the alert reads), a node with forged counts left out, and
//! an origin's home geos (`dwctl origin home`) kept while a non-home region is relieved,
//! a person's drain over the autopilot's shed, each restore undoing only its own part, a
//! region an open stage holds skipped and reported, and the status the leader publishes,
//! as `dwctl origin list` and `dwctl traffic` (its rates from the fake Prometheus) show it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use crate::common::daemon::Daemon;
use crate::common::prometheus::{FakeNode, fake_prometheus};
use crate::common::{CONTROL, Etcd, drain_key, eventually, listed_weights, region_key, seed};

const DE: &str = r#"{"shard":"eu","origins":["a","b"],"weight":{"a":50,"b":50}}"#;
const EU: &str = r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":2,"b":1,"c":1}}"#;
const FR: &str = r#"{"shard":"eu","origins":["a","c"],"weight":{"a":50,"c":50}}"#;

/// a: 500 (DE) + 500 (AT through the EU bucket) = 1,000/s against a target of 800.
const BUSY: &str = r#"{"geos":{"DE":{"sticky":1000},"AT":{"sticky":1000}}}"#;
/// a: 250 + 250 = 500/s: under target.
const CALM: &str = r#"{"geos":{"DE":{"sticky":500},"AT":{"sticky":500}}}"#;

async fn fleet(traffic: &str) -> (Etcd, String) {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("continent/EU", EU), ("FR", FR)]).await;
    for (origin, capacity) in [("a", "1000"), ("b", "2000"), ("c", "2000")] {
        assert_eq!(
            etcd.dwctl(&["origin", "capacity", origin, capacity]).code,
            0
        );
    }
    let path = etcd.data_dir.join("traffic.json");
    std::fs::write(&path, traffic).expect("traffic file");
    let path = path.display().to_string();
    (etcd, path)
}

fn autopilot(etcd: &Etcd, name: &str, traffic: &str, extra: &[&str]) -> Daemon {
    let mut args = vec![
        "autopilot",
        "--traffic",
        traffic,
        "--interval",
        "0.5",
        "--lease-ttl",
        "2",
    ];
    args.extend_from_slice(extra);
    Daemon::start(etcd, name, &args)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origin_over_target_is_relieved_with_an_audited_autopilot_record() {
    let (etcd, traffic) = fleet(BUSY).await;
    let daemon = autopilot(&etcd, "autopilot", &traffic, &[]);
    let record = eventually(Duration::from_secs(20), "a relieved", || async {
        etcd.get_json(&drain_key("a")).await
    })
    .await;
    assert_eq!(record["source"], "autopilot", "{record}");
    let step = &record["shed"]["steps"][0];
    assert_eq!(step["source"], "autopilot");
    let reason = step["reason"].as_str().unwrap();
    assert!(
        reason.contains("a measured 1000.0/s, target 800.0/s"),
        "{reason}"
    );
    assert!(reason.contains("predicted"), "{reason}");
    // The least harmed first: the EU bucket's share moved, DE (a country's key) kept.
    let eu = etcd.get_json(&region_key("continent/EU")).await.unwrap();
    let a_share = listed_weights(&eu)
        .iter()
        .find(|(name, _)| name == "a")
        .map_or(0, |(_, weight)| *weight);
    assert!(a_share < 500, "a's share of the bucket fell: {eu}");
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        [("a".to_owned(), 50), ("b".to_owned(), 50)]
    );
    // The write is fenced on the leader key, which this instance holds.
    assert!(
        etcd.get(&format!("{CONTROL}autopilot/leader"))
            .await
            .is_some()
    );
    assert!(daemon.log().contains("acted: revision"), "{}", daemon.log());
    // What `dwctl history` of the record and `dwctl origin list` show: the action, who
    // made it and its figures.
    let run = etcd.dwctl(&["history", &drain_key("a")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout
            .contains("autopilot relieve: a measured 1000.0/s"),
        "{}",
        run.stdout
    );
    let run = etcd.dwctl(&["origin", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("by autopilot: autopilot relieve"),
        "{}",
        run.stdout
    );
    assert_eq!(daemon.terminate().await, 0);
    assert!(
        etcd.get(&format!("{CONTROL}autopilot/leader"))
            .await
            .is_none(),
        "resigning revokes the lease"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_logs_its_decision_and_writes_nothing() {
    let (etcd, traffic) = fleet(BUSY).await;
    let before = etcd.revision().await;
    let daemon = autopilot(&etcd, "dry", &traffic, &["--dry-run"]);
    eventually(Duration::from_secs(20), "a decision logged", || async {
        daemon
            .log()
            .contains("would-act: dry run: autopilot relieve")
            .then_some(())
    })
    .await;
    assert!(
        daemon.log().contains("a measured 1000.0/s"),
        "{}",
        daemon.log()
    );
    assert_eq!(
        etcd.revision().await,
        before,
        "nothing written, not even a leader key"
    );
    assert!(
        etcd.dump(CONTROL)
            .await
            .iter()
            .all(|(key, _)| !key.contains("autopilot"))
    );
    assert_eq!(daemon.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_leads_and_a_standby_takes_over_within_the_ttl() {
    let (etcd, traffic) = fleet(CALM).await;
    let first = autopilot(&etcd, "first", &traffic, &[]);
    eventually(Duration::from_secs(20), "first leads", || async {
        first.log().contains("leading:").then_some(())
    })
    .await;
    let second = autopilot(&etcd, "second", &traffic, &[]);
    // Several evaluations later, the second still stands by.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!second.log().contains("leading:"), "{}", second.log());
    let (holder, _) = etcd
        .get(&format!("{CONTROL}autopilot/leader"))
        .await
        .unwrap();
    first.sigkill().await;
    let killed = Instant::now();
    eventually(Duration::from_secs(10), "second takes over", || async {
        second.log().contains("leading:").then_some(())
    })
    .await;
    // The TTL (2 s) and one evaluation (0.5 s), with a margin for a loaded machine.
    assert!(
        killed.elapsed() <= Duration::from_secs(5),
        "{:?}",
        killed.elapsed()
    );
    let (now, _) = etcd
        .get(&format!("{CONTROL}autopilot/leader"))
        .await
        .unwrap();
    assert_ne!(holder, now, "another instance holds the key");
    // Nothing was over target: neither wrote a record.
    assert!(etcd.get(&drain_key("a")).await.is_none());
    assert_eq!(second.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sources_record_holds_and_a_missing_source_moves_nothing() {
    let (etcd, traffic) = fleet(BUSY).await;
    // A person drained a from FR: a record of source cli.
    let run = etcd.dwctl(&["drain", "a", "--region", "FR", "--reason", "maintenance"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let eu_before = etcd.get(&region_key("continent/EU")).await.unwrap();
    let daemon = autopilot(&etcd, "held", &traffic, &[]);
    eventually(Duration::from_secs(20), "a held", || async {
        daemon
            .log()
            .contains("a (a record of source cli is on it)")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        etcd.get(&region_key("continent/EU")).await.unwrap(),
        eu_before
    );
    assert_eq!(daemon.terminate().await, 0);

    // Fail static: no traffic file, nothing moves, the hold is logged.
    let run = etcd.dwctl(&["restore", "a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let missing = etcd.data_dir.join("gone.json").display().to_string();
    let before = etcd.get(&region_key("continent/EU")).await.unwrap();
    let blind = autopilot(&etcd, "blind", &missing, &[]);
    eventually(Duration::from_secs(20), "held for the source", || async {
        blind
            .log()
            .contains("the rate source is unusable")
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(etcd.get(&region_key("continent/EU")).await.unwrap(), before);
    assert!(etcd.get(&drain_key("a")).await.is_none());
    assert_eq!(blind.terminate().await, 0);
}

/// One GET of the autopilot's metrics port: the body.
fn scrape(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

/// The address the daemon says it serves its metrics on.
fn metrics_addr(log: &str) -> Option<String> {
    let start = log.find("autopilot metrics at http://")? + "autopilot metrics at http://".len();
    let rest = &log[start..];
    Some(rest[..rest.find("/metrics")?].to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_that_does_not_answer_holds_and_says_so_on_metrics() {
    let (etcd, _) = fleet(BUSY).await;
    let before = etcd.get(&region_key("continent/EU")).await.unwrap();
    // A closed port: Prometheus is down.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let daemon = Daemon::start(
        &etcd,
        "blind",
        &[
            "autopilot",
            "--prometheus",
            &dead,
            "--interval",
            "0.5",
            "--lease-ttl",
            "2",
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    eventually(Duration::from_secs(20), "held for the source", || async {
        daemon
            .log()
            .contains("the rate source is unusable")
            .then_some(())
    })
    .await;
    let addr = metrics_addr(&daemon.log()).expect("the metrics address logged");
    let body = eventually(
        Duration::from_secs(10),
        "metrics say blind and leading",
        || async {
            let body = scrape(&addr);
            (body.contains("dwctl_autopilot_source_usable 0")
                && body.contains("dwctl_autopilot_leader 1")
                && body.contains("dwctl_autopilot_holds_total{reason=\"source_unusable\"}"))
            .then_some(body)
        },
    )
    .await;
    assert!(body.contains("dwctl_autopilot_dry_run 0"), "{body}");
    // Every kind of decision has its series from the start, at 0 (the dashboard's
    // annotation sees a first action as a change).
    for kind in [
        "relieve",
        "relieve_at_ceiling",
        "give_back_step",
        "give_back_all",
    ] {
        assert!(
            body.contains(&format!(
                "dwctl_autopilot_decisions_total{{kind=\"{kind}\"}} 0\n"
            )),
            "{kind}: {body}"
        );
    }
    assert!(
        !body.contains("dwctl_autopilot_origin_load{"),
        "no load without a source"
    );
    assert_eq!(etcd.get(&region_key("continent/EU")).await.unwrap(), before);
    assert!(etcd.get(&drain_key("a")).await.is_none());
    assert_eq!(daemon.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_with_forged_counts_is_left_out_and_nothing_acts_on_them() {
    let (etcd, _) = fleet(CALM).await;
    // edge-1 answers 300/s of DE and of AT: a carries 300/s, under its target of 800.
    // edge-2 claims 1,500/s of DE (a would carry 1,050/s), above a per-node ceiling of
    // 1,000/s that edge-1 stays under.
    let honest = FakeNode {
        node: "edge-1",
        rows: vec![("DE", true, "300"), ("AT", true, "300")],
        peak: Some("600"),
        at_start: true,
    };
    let forged = FakeNode {
        node: "edge-2",
        rows: vec![("DE", true, "1500")],
        peak: Some("1500"),
        at_start: true,
    };
    let prometheus = fake_prometheus(vec![honest, forged]).await;
    let args = |ceiling: &'static str| {
        vec![
            "autopilot".to_owned(),
            "--prometheus".into(),
            prometheus.clone(),
            "--interval".into(),
            "0.5".into(),
            "--lease-ttl".into(),
            "2".into(),
            "--node-ceiling".into(),
            ceiling.into(),
        ]
    };
    let leaving_out = args("1000");
    let daemon = Daemon::start(
        &etcd,
        "ceiling",
        &leaving_out.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    eventually(Duration::from_secs(20), "leading", || async {
        daemon.log().contains("leading:").then_some(())
    })
    .await;
    // Eight evaluations: --for 2 would have acted on edge-2's counts long ago.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(
        etcd.get(&drain_key("a")).await.is_none(),
        "{}",
        daemon.log()
    );
    assert!(!daemon.log().contains("acted:"), "{}", daemon.log());
    assert_eq!(daemon.terminate().await, 0);

    // The same counts believed (a ceiling above them): a relief. So the test above could
    // have failed.
    let believing = args("1000000");
    let control = Daemon::start(
        &etcd,
        "trusting",
        &believing.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let record = eventually(
        Duration::from_secs(20),
        "a relieved on the forged counts",
        || async { etcd.get_json(&drain_key("a")).await },
    )
    .await;
    assert_eq!(record["source"], "autopilot");
    assert_eq!(control.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dw_autopilot_role_is_enough_to_lead_and_act() {
    let (etcd, traffic) = fleet(BUSY).await;
    let passwords = etcd.data_dir.join("passwords");
    std::fs::create_dir(&passwords).unwrap();
    let dir = format!("--password-dir={}", passwords.display());
    let made = etcd.dwctl(&["auth", "--apply", &dir]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let password = format!(
        "--password-file={}",
        passwords.join("dw-autopilot.password").display()
    );
    let daemon = Daemon::start(
        &etcd,
        "as-role",
        &[
            "--user=dw-autopilot",
            &password,
            "autopilot",
            "--traffic",
            &traffic,
            "--interval",
            "0.5",
            "--lease-ttl",
            "2",
        ],
    );
    eventually(
        Duration::from_secs(30),
        "a relieved as dw-autopilot",
        || async { daemon.log().contains("acted: revision").then_some(()) },
    )
    .await;
    assert_eq!(daemon.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_load_falls_the_configured_weights_come_back() {
    let (etcd, traffic) = fleet(BUSY).await;
    let eu_before = etcd.get_json(&region_key("continent/EU")).await.unwrap();
    let daemon = autopilot(
        &etcd,
        "give-back",
        &traffic,
        // The cap at the whole fleet: with 10 % (the default), the relief's 200/s would
        // spend the minute's budget of the calmer fleet, and the give back would wait.
        &[
            "--restore-after",
            "2",
            "--min-interval",
            "1",
            "--max-moved-per-minute",
            "1",
        ],
    );
    eventually(Duration::from_secs(20), "a relieved", || async {
        etcd.get_json(&drain_key("a")).await
    })
    .await;
    // The load falls (the file is read at every evaluation): under 70 % of target.
    std::fs::write(&traffic, CALM).unwrap();
    let fell = Instant::now();
    eventually(Duration::from_secs(20), "a's shed given back", || async {
        etcd.get_json(&drain_key("a")).await.is_none().then_some(())
    })
    .await;
    // --restore-after 2 s, then one evaluation: well within the bound waited.
    assert!(fell.elapsed() < Duration::from_secs(20));
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("continent/EU")).await.unwrap()),
        listed_weights(&eu_before),
        "the configured weights are back"
    );
    assert!(
        daemon.log().contains("autopilot give back all"),
        "{}",
        daemon.log()
    );
    assert_eq!(daemon.terminate().await, 0);
}

/// a: 500 (DE) + 500 (FR) = 1,000/s against a target of 800, both through own keys.
const TWO_KEYS: &str = r#"{"geos":{"DE":{"sticky":1000},"FR":{"sticky":1000}}}"#;

/// The weights of `geo` as stored.
async fn weights_of(etcd: &Etcd, geo: &str) -> Vec<(String, u64)> {
    listed_weights(&etcd.get_json(&region_key(geo)).await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_relief_takes_a_non_home_region_and_leaves_the_home_one() {
    // DE and FR are each a's own key, of the same tier: whichever is home stays, the other
    // is relieved. Both ways round, so that the test does not lean on the law's order
    // within a tier.
    for (home, other) in [("DE", "FR"), ("FR", "DE")] {
        let etcd = Etcd::start().await;
        seed(&etcd, &[("DE", DE), ("FR", FR)]).await;
        for (origin, capacity) in [("a", "1000"), ("b", "2000"), ("c", "2000")] {
            assert_eq!(
                etcd.dwctl(&["origin", "capacity", origin, capacity]).code,
                0
            );
        }
        let run = etcd.dwctl(&["origin", "home", "a", home]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let path = etcd.data_dir.join("traffic.json");
        std::fs::write(&path, TWO_KEYS).expect("traffic file");
        let before = (
            weights_of(&etcd, home).await,
            weights_of(&etcd, other).await,
        );
        let daemon = autopilot(&etcd, "autopilot", &path.display().to_string(), &[]);
        let record = eventually(Duration::from_secs(20), "a relieved", || async {
            etcd.get_json(&drain_key("a")).await
        })
        .await;
        assert_eq!(record["source"], "autopilot", "{record}");
        assert_eq!(
            weights_of(&etcd, home).await,
            before.0,
            "home {home} kept: {record}"
        );
        assert_ne!(
            weights_of(&etcd, other).await,
            before.1,
            "{other} relieved: {record}"
        );
        assert!(daemon.log().contains("acted: revision"), "{}", daemon.log());
        assert_eq!(daemon.terminate().await, 0);
    }
}

/// Every region's listed weights.
async fn all_weights(etcd: &Etcd) -> Vec<Vec<(String, u64)>> {
    let mut all = Vec::new();
    for geo in ["DE", "continent/EU", "FR"] {
        all.push(listed_weights(
            &etcd.get_json(&region_key(geo)).await.unwrap(),
        ));
    }
    all
}

fn weight_of(weights: &[(String, u64)], origin: &str) -> Option<u64> {
    weights
        .iter()
        .find(|(name, _)| name == origin)
        .map(|(_, weight)| *weight)
}

/// Issue 42's proof, "an operator drains during an autopilot shed: each restore undoes only
/// its own records": the autopilot sheds a, a person drains it; then (first round) the
/// person's `dwctl restore` leaves the autopilot's shed and the autopilot's give back
/// brings the configured weights back; (second round) the autopilot's give back leaves the
/// person's drain and the person's restore brings the configured weights back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_and_the_autopilot_each_restore_only_their_own_part() {
    let (etcd, traffic) = fleet(BUSY).await;
    let configured = all_weights(&etcd).await;
    let quick = ["--min-interval", "1", "--restore-after", "1"];
    for person_first in [true, false] {
        std::fs::write(&traffic, BUSY).unwrap();
        let daemon = autopilot(&etcd, "shed", &traffic, &quick);
        let record = eventually(Duration::from_secs(20), "a relieved", || async {
            etcd.get_json(&drain_key("a")).await
        })
        .await;
        assert_eq!(daemon.terminate().await, 0);
        assert_eq!(record["source"], "autopilot", "{record}");
        let shed = all_weights(&etcd).await;
        let shed_a = weight_of(&shed[1], "a").expect("a still in the bucket");

        // The person drains a everywhere: a record of two parts.
        let run = etcd.dwctl(&["drain", "a", "--reason", "INC-42"]);
        assert_eq!(run.code, 0, "{}", run.stderr);
        let both = etcd.get_json(&drain_key("a")).await.unwrap();
        assert_eq!(both["schema"], 4, "{both}");
        let sources: Vec<&str> = both["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|part| part["source"].as_str().unwrap())
            .collect();
        assert_eq!(sources, ["autopilot", "cli"], "{both}");
        let drained = all_weights(&etcd).await;
        assert!(
            drained
                .iter()
                .all(|region| weight_of(region, "a").is_none())
        );
        let list = etcd.dwctl(&["origin", "list"]);
        assert!(list.stdout.contains("autopilot: shed"), "{}", list.stdout);
        assert!(list.stdout.contains("cli: drained in"), "{}", list.stdout);

        if person_first {
            // The person's restore: the autopilot's shed is left, exactly its share of a.
            let run = etcd.dwctl(&["restore", "a"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            let left = etcd.get_json(&drain_key("a")).await.unwrap();
            assert_eq!(left["source"], "autopilot", "{left}");
            assert!(left.get("parts").is_none(), "one part: {left}");
            let now = all_weights(&etcd).await;
            assert_eq!(weight_of(&now[1], "a"), Some(shed_a), "{now:?} vs {shed:?}");
            assert_eq!(now[0], configured[0]);
            assert_eq!(now[2], configured[2]);
        }
        // Quiet now: the autopilot gives its part back.
        std::fs::write(&traffic, CALM).unwrap();
        let daemon = autopilot(&etcd, "give-back", &traffic, &quick);
        if person_first {
            eventually(Duration::from_secs(30), "the shed given back", || async {
                etcd.get(&drain_key("a")).await.is_none().then_some(())
            })
            .await;
            assert_eq!(daemon.terminate().await, 0);
        } else {
            let deadline = Instant::now() + Duration::from_secs(30);
            let left = loop {
                let record = etcd.get_json(&drain_key("a")).await.unwrap();
                if record.get("parts").is_none() {
                    break record;
                }
                assert!(
                    Instant::now() < deadline,
                    "its part not given back: {record}\n{}",
                    daemon.log()
                );
                tokio::time::sleep(Duration::from_millis(200)).await;
            };
            assert_eq!(daemon.terminate().await, 0);
            assert_eq!(left["source"], "cli", "{left}");
            // The person's drain stays, exactly as a drain of the configured weights.
            let now = all_weights(&etcd).await;
            let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
                pairs
                    .iter()
                    .map(|(name, w)| ((*name).to_owned(), *w))
                    .collect()
            };
            assert_eq!(now[0], named(&[("b", 100)]));
            assert_eq!(now[1], named(&[("b", 50), ("c", 50)]));
            assert_eq!(now[2], named(&[("c", 100)]));
            let run = etcd.dwctl(&["restore", "a"]);
            assert_eq!(run.code, 0, "{}", run.stderr);
            assert!(etcd.get(&drain_key("a")).await.is_none());
        }
        assert_eq!(all_weights(&etcd).await, configured);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_an_open_stage_holds_is_skipped_and_the_skip_reported() {
    let (etcd, traffic) = fleet(BUSY).await;
    // A stage holds continent/EU, the region the relief takes first (the least harmed:
    // the first test shows the EU bucket's share moving when nothing is staged).
    let staged = etcd.data_dir.join("eu.json");
    std::fs::write(
        &staged,
        r#"{"regions":{"continent/EU":{"shard":"eu","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}}}"#,
    )
    .unwrap();
    let run = etcd.dwctl(&[
        "stage",
        "create",
        staged.to_str().unwrap(),
        "--cohort",
        "20%",
        "--id",
        "eu-change",
        "--traffic",
        &traffic,
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let eu_before = etcd.get(&region_key("continent/EU")).await.unwrap();
    let de_before = weights_of(&etcd, "DE").await;
    let daemon = autopilot(&etcd, "autopilot", &traffic, &[]);
    let record = eventually(Duration::from_secs(20), "a relieved", || async {
        etcd.get_json(&drain_key("a")).await
    })
    .await;
    // The staged region is unchanged (value and revision), the relief went to DE.
    assert_eq!(
        etcd.get(&region_key("continent/EU")).await.unwrap(),
        eu_before,
        "{record}"
    );
    assert_ne!(weights_of(&etcd, "DE").await, de_before, "{record}");
    let regions: Vec<&String> = record["regions"].as_object().unwrap().keys().collect();
    assert_eq!(regions, ["DE"], "{record}");
    // Reported: in the reason the history shows, and in the log.
    let reason = record["shed"]["steps"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("staged regions skipped: continent/EU"),
        "{reason}"
    );
    let run = etcd.dwctl(&["history", &drain_key("a")]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("staged regions skipped: continent/EU"),
        "{}",
        run.stdout
    );
    let log = daemon.log();
    assert!(
        log.contains("staged regions skipped") && log.contains("continent/EU"),
        "{log}"
    );
    // The stage itself still stages what it staged.
    let stage = etcd
        .get_json(&format!("{}stage/eu-change", crate::common::PREFIX))
        .await
        .unwrap();
    assert!(
        stage["kvs"]["region/continent/EU"]
            .as_str()
            .unwrap()
            .contains(r#""a":1"#),
        "{stage}"
    );
    assert_eq!(daemon.terminate().await, 0);
}

/// The status key's value and its mod revision.
async fn status_of(etcd: &Etcd) -> Option<(serde_json::Value, i64)> {
    let (raw, revision) = etcd.get(&format!("{CONTROL}autopilot/status")).await?;
    Some((serde_json::from_str(&raw).expect("status JSON"), revision))
}

/// `origin`'s section of `dwctl traffic`'s text: its first line and the indented lines under
/// it.
fn traffic_section<'a>(text: &'a str, origin: &str) -> Vec<&'a str> {
    text.lines()
        .skip_while(|line| !line.starts_with(&format!("{origin}  ")))
        .take_while(|line| !line.is_empty())
        .collect()
}

const NO_LEADER: &str =
    "autopilot: no instance leads (no autopilot/leader key): no origin is relieved automatically";

/// `dwctl traffic` (its answer rates from the fake Prometheus) beside the autopilot's
/// keys: with no leader key, the "no instance leads" line and no origin line; while an
/// instance leads and holds `a` (a person's drain record is on it), the published status
/// (its leader, and under `a` the hold, its reason and since when, as the status says);
/// with a leader key and no status key, "no status published yet"; once the instance
/// stops (its lease revoked, both keys gone), "no instance leads" again.
/// (The fake's counters carry no origin label: `traffic` lists their answers under an
/// unnamed origin and a, b and c with none; the autopilot's rates come from the traffic
/// file. What is checked here is the autopilot's lines.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traffic_shows_the_published_hold_under_its_origin_and_when_no_instance_leads() {
    let (etcd, traffic) = fleet(BUSY).await;
    let prometheus = fake_prometheus(vec![
        FakeNode::steady("n1", "500"),
        FakeNode::steady("n2", "500"),
    ])
    .await;
    let report = || {
        let run = etcd.dwctl(&["traffic", "--prometheus", &prometheus]);
        assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
        run.stdout
    };
    let text = report();
    assert!(text.lines().any(|line| line == NO_LEADER), "{text}");
    assert!(
        !text.lines().any(|line| line.starts_with("  autopilot: ")),
        "no origin line without a status: {text}"
    );
    let (code, json, _) = etcd.dwctl_json(&["traffic", "--prometheus", &prometheus]);
    assert_eq!(code, 0);
    assert_eq!(json["autopilot"]["state"], "no_leader", "{json}");

    // A person drained a from FR: the autopilot holds a (over target, another source's
    // record on it) and publishes the hold.
    let run = etcd.dwctl(&["drain", "a", "--region", "FR", "--reason", "maintenance"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let daemon = autopilot(&etcd, "held", &traffic, &[]);
    let (status, _) = eventually(Duration::from_secs(20), "a's hold published", || async {
        status_of(&etcd)
            .await
            .filter(|(status, _)| status["origins"]["a"]["holding"].is_object())
    })
    .await;
    let a = &status["origins"]["a"];
    assert_eq!(a["hold_reason"], "other_source", "{status}");
    let why = a["holding"]["why"].as_str().unwrap();
    assert_eq!(why, "a record of source cli is on it", "{status}");
    let text = report();
    let leader = status["leader"].as_str().unwrap();
    let since = status["leading_since"].as_str().unwrap();
    assert!(
        text.lines()
            .any(|line| line.starts_with(&format!("autopilot: {leader} leads since {since}"))),
        "{text}"
    );
    // Under a, and only there: the hold as published.
    let held = format!(
        "  autopilot: holding ({why}) since {}",
        a["holding"]["since"].as_str().unwrap()
    );
    let section = traffic_section(&text, "a");
    assert!(
        section.iter().any(|line| line.starts_with(&held)),
        "{held:?} under a: {section:#?}\n{text}"
    );
    for other in ["b", "c"] {
        let section = traffic_section(&text, other);
        assert!(!section.is_empty(), "{other} listed: {text}");
        assert!(
            !section.iter().any(|line| line.starts_with("  autopilot: ")),
            "nothing held on {other}: {section:#?}"
        );
    }
    let (code, json, _) = etcd.dwctl_json(&["traffic", "--prometheus", &prometheus]);
    assert_eq!(code, 0);
    assert_eq!(json["autopilot"]["state"], "leading", "{json}");
    assert_eq!(
        json["autopilot"]["status"]["origins"]["a"]["holding"], a["holding"],
        "{json}"
    );
    assert_eq!(daemon.terminate().await, 0);

    // Resigning took both keys: nothing leads.
    assert!(status_of(&etcd).await.is_none());
    let text = report();
    assert!(text.lines().any(|line| line == NO_LEADER), "{text}");
    assert!(
        !text.lines().any(|line| line.starts_with("  autopilot: ")),
        "{text}"
    );

    // A leader key without its status (an instance that has not evaluated yet).
    etcd.put(&format!("{CONTROL}autopilot/leader"), "starting")
        .await;
    let text = report();
    assert!(
        text.lines()
            .any(|line| line == "autopilot: starting leads; no status published yet"),
        "{text}"
    );
    assert!(
        !text.lines().any(|line| line.starts_with("  autopilot: ")),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_the_autopilot_holds_is_published_changes_and_vanishes_with_its_lease() {
    let (etcd, traffic) = fleet(BUSY).await;
    // Nothing leads yet: the commands say so.
    let run = etcd.dwctl(&["origin", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("autopilot: no instance leads"),
        "{}",
        run.stdout
    );
    let daemon = autopilot(&etcd, "autopilot", &traffic, &["--min-interval", "60"]);
    // It relieves a (over target for --for evaluations), and the status says it holds a
    // shed of its own there, and when it may act next.
    let (status, revision) = eventually(Duration::from_secs(20), "a relieving", || async {
        status_of(&etcd)
            .await
            .filter(|(status, _)| status["origins"]["a"]["relieving_since"].is_string())
    })
    .await;
    let (leader, _) = etcd
        .get(&format!("{CONTROL}autopilot/leader"))
        .await
        .unwrap();
    assert_eq!(status["leader"], leader.as_str(), "{status}");
    assert!(
        status["origins"]["a"]["next_action_at"].is_string(),
        "{status}"
    );
    // (Whether a status was published before the relief depends on the law: a measured
    // at its capacity is relieved at the first evaluation. Its change is shown below.)
    let mut client = etcd.client().await;
    // Written only when it changes: once the relief has settled (a's next streak and its
    // `min_interval` hold, a few evaluations), six evaluations leave the same revision.
    let _ = revision;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (status, revision) = status_of(&etcd).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (again, same) = status_of(&etcd).await.unwrap();
    assert_eq!((again, same), (status.clone(), revision));
    // What the commands show.
    let run = etcd.dwctl(&["origin", "list"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let a = run
        .stdout
        .lines()
        .find(|line| line.starts_with("a "))
        .unwrap();
    assert!(a.contains("  autopilot: relieving since "), "{a}");
    assert!(a.contains("; next action allowed at "), "{a}");
    assert!(
        run.stdout
            .contains(&format!("autopilot: {leader} leads since ")),
        "{}",
        run.stdout
    );
    let (code, json, _) = etcd.dwctl_json(&["origin", "list"]);
    assert_eq!(code, 0);
    assert_eq!(json["autopilot"]["state"], "leading", "{json}");
    assert_eq!(json["autopilot"]["status"], status, "{json}");

    // It changes when what it holds changes: a's load falls under target, so a is no
    // longer over target; the same key, a new version.
    let version_of = |kvs: &[etcd_client::KeyValue]| kvs.first().map(|kv| kv.version());
    let before = version_of(
        client
            .get(format!("{CONTROL}autopilot/status"), None)
            .await
            .unwrap()
            .kvs(),
    );
    std::fs::write(&traffic, CALM).unwrap();
    let (calm, _) = eventually(
        Duration::from_secs(20),
        "a no longer over target",
        || async {
            status_of(&etcd)
                .await
                .filter(|(status, _)| status["origins"]["a"]["over_target_since"].is_null())
        },
    )
    .await;
    assert_ne!(calm, status, "the status changed");
    let after = version_of(
        client
            .get(format!("{CONTROL}autopilot/status"), None)
            .await
            .unwrap()
            .kvs(),
    );
    assert!(after > before, "{before:?} -> {after:?}");

    // Revoking the leader's lease takes the status with it.
    let lease = client
        .get(format!("{CONTROL}autopilot/status"), None)
        .await
        .unwrap()
        .kvs()[0]
        .lease();
    assert_ne!(lease, 0, "the status lives on a lease");
    client.lease_revoke(lease).await.unwrap();
    assert!(status_of(&etcd).await.is_none(), "gone with the lease");
    assert!(
        etcd.get(&format!("{CONTROL}autopilot/leader"))
            .await
            .is_none()
    );
    // The instance leads again on a new lease, with an empty memory: a new status.
    let (back, _) = eventually(Duration::from_secs(20), "a status again", || async {
        status_of(&etcd).await
    })
    .await;
    assert_ne!(back["leading_since"].as_str(), None);
    assert!(daemon.log().contains("lease-lost"), "{}", daemon.log());
    assert_eq!(daemon.terminate().await, 0);
    assert!(status_of(&etcd).await.is_none(), "resigning removes it");
    let run = etcd.dwctl(&["origin", "list"]);
    assert!(
        run.stdout.contains("autopilot: no instance leads"),
        "{}",
        run.stdout
    );
}

#[test]
fn a_setting_out_of_its_bounds_is_a_usage_error() {
    // Usage errors are found before any connection: nothing listens on port 9.
    for (args, want) in [
        (vec!["--trend-horizon", "601"], "--trend-horizon 601s"),
        (vec!["--band", "0.6"], "--band 0.6"),
        (vec!["--for", "0"], "--for 0"),
    ] {
        let run = crate::common::run({
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dwctl"));
            command
                .env("DWCTL_ENDPOINTS", "http://127.0.0.1:9")
                .args(["autopilot", "--traffic", "/nonexistent"])
                .args(&args);
            command
        });
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
    // At the bound itself (600) the check passes: the law's table test
    // (`autopilot::tests::the_defaults_pass_and_each_bound_is_checked_at_its_edge`); here
    // the daemon would then run.
}
