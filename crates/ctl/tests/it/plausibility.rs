//! Issue 40: the load prediction reads each node's rates and believes only the plausible
//! ones. A node whose counter jumped is left out and named, and the rest predicts (a rate
//! that is NaN, infinite or negative refuses the change instead); the prediction says so, a refusal names the nodes
//! the load is predicted from, a window still filling is noted, and a Prometheus URL is
//! never printed with its password or token. Against a fake Prometheus
//! (common::prometheus) and a real etcd.

use crate::common::prometheus::{FakeNode, fake_prometheus};
use crate::common::{Etcd, seed};

const DE_AB: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

/// fra-a and fra-b share DE's sticky answers; fra-b's capacity is 1000/s (guard 800/s).
async fn guarded_cluster() -> Etcd {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE_AB)]).await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-b", "1000"]).code, 0);
    etcd
}

/// Two honest nodes of 500/s of DE each, and `evil` whose counter jumped by 1e18 within
/// the 5m window (1e18 / 300 s).
fn jumped_fleet() -> Vec<FakeNode> {
    vec![
        FakeNode::steady("n1", "500"),
        FakeNode::steady("n2", "500"),
        FakeNode {
            node: "evil",
            rows: vec![("DE", true, "3333333333333333")],
            peak: Some("16666666666666666"),
            at_start: true,
        },
    ]
}

/// Issue 40 #3: on main the jump made the whole traffic "unusable", the guard recorded
/// "no load prediction" and this overloading drain passed. Now `evil` is left out and
/// named, n1 and n2 predict, and the drain is refused naming the nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jumping_node_is_left_out_and_named_and_the_rest_refuses_the_drain() {
    let etcd = guarded_cluster().await;
    let prometheus = fake_prometheus(jumped_fleet()).await;
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["drain", "fra-a", "--prometheus", &prometheus]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("fra-b: predicted 1000/s (now 500/s), capacity 1000/s, guard 800/s"),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains(
            "the load is predicted from the answers of 2 node(s): n1 500/s, n2 500/s; \
             left out as implausible: evil"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(etcd.revision().await, before, "nothing written");

    // The prediction says which node it left out and why.
    let (code, json, stderr) = etcd.dwctl_json(&[
        "drain",
        "fra-a",
        "--dry-run",
        "--allow-overload",
        "--prometheus",
        &prometheus,
    ]);
    assert_eq!(code, 0, "{stderr}");
    let prediction = &json["prediction"];
    assert_eq!(prediction["made"], true, "{prediction}");
    assert_eq!(prediction["left_out"][0]["node"], "evil", "{prediction}");
    assert!(
        prediction["left_out"][0]["why"]
            .as_str()
            .unwrap()
            .contains("above the per-node ceiling of 50000"),
        "{prediction}"
    );
    assert_eq!(prediction["nodes"].as_array().unwrap().len(), 2);
    let text = etcd
        .dwctl(&[
            "drain",
            "fra-a",
            "--dry-run",
            "--allow-overload",
            "--prometheus",
            &prometheus,
        ])
        .stdout;
    assert!(
        text.contains("left out as implausible, not in this prediction: node \"evil\""),
        "{text}"
    );

    // --node-ceiling is checked before anything is asked.
    for bad in ["0", "-5", "NaN", "2e12"] {
        let run = etcd.dwctl(&[
            "drain",
            "fra-a",
            "--node-ceiling",
            bad,
            "--prometheus",
            &prometheus,
        ]);
        assert_eq!(run.code, 2, "{bad}: {}", run.stderr);
    }
}

/// Issue 40 #7c: a NaN, infinite or negative rate was read silently as 0. It is data that
/// cannot be used: the change is refused where capacities are set (exit 9), naming the
/// node and the rate, never predicted from the other nodes as if it were 0;
/// `--allow-overload` commits it, audited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nan_infinite_and_negative_rates_refuse_the_change_naming_their_node() {
    let etcd = guarded_cluster().await;
    for bad in ["NaN", "+Inf", "-1"] {
        let prometheus = fake_prometheus(vec![
            FakeNode::steady("n1", "500"),
            FakeNode {
                node: "n2",
                rows: vec![("DE", true, "500"), ("FR", false, bad)],
                peak: Some("500"),
                at_start: true,
            },
        ])
        .await;
        let run = etcd.dwctl(&["drain", "fra-a", "--dry-run", "--prometheus", &prometheus]);
        assert_eq!(run.code, 9, "{bad}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("cannot be used") && run.stderr.contains("n2"),
            "{bad}: {}",
            run.stderr
        );
        assert!(
            run.stderr.contains("not a finite number >= 0"),
            "{bad}: {}",
            run.stderr
        );
        let run = etcd.dwctl(&[
            "drain",
            "fra-a",
            "--dry-run",
            "--allow-overload",
            "--prometheus",
            &prometheus,
        ]);
        assert_eq!(run.code, 0, "{bad}: {}\n{}", run.stdout, run.stderr);
    }
}

/// With no plausible node left the source answered with data the predictor cannot use:
/// the refusal's reason (capacities are set) names every node left out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_plausible_node_left_the_source_is_unusable_and_says_why() {
    let etcd = guarded_cluster().await;
    let prometheus = fake_prometheus(vec![FakeNode {
        node: "evil",
        rows: vec![("DE", true, "3333333333333333")],
        peak: None,
        at_start: true,
    }])
    .await;
    let (code, json, stderr) =
        etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--prometheus", &prometheus]);
    assert_eq!(code, 9, "{json}\n{stderr}");
    assert_eq!(json["error"]["kind"], "overload", "{json}");
    let why = json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("answered traffic that cannot be used")
            && why.contains("every node is left out: \"evil\": 3.33e15 answers/s"),
        "{json}\n{stderr}"
    );
}

/// Issue 40 (#3's rule): a configured source that answered with data the predictor
/// rejects never passes a change silently: refused, exit 9, `--allow-overload` overrides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_plausible_node_left_the_change_is_refused() {
    let etcd = guarded_cluster().await;
    let prometheus = fake_prometheus(vec![FakeNode {
        node: "evil",
        rows: vec![("DE", true, "3333333333333333")],
        peak: None,
        at_start: true,
    }])
    .await;
    let before = etcd.revision().await;
    let run = etcd.dwctl(&["drain", "fra-a", "--prometheus", &prometheus]);
    assert_eq!(run.code, 9, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stderr.contains("\"evil\""), "{}", run.stderr);
    assert_eq!(etcd.revision().await, before, "nothing written");
    let run = etcd.dwctl(&[
        "drain",
        "fra-a",
        "--allow-overload",
        "--prometheus",
        &prometheus,
    ]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
}

/// First install: the prediction read low while its window was still filling, with no
/// note. Now a node whose counters began within the window is named, and a fleet of them
/// is said to be.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_still_filling_is_noted() {
    let etcd = guarded_cluster().await;
    let mut fleet = vec![FakeNode::steady("n1", "100"), FakeNode::steady("n2", "100")];
    fleet[1].at_start = false;
    let prometheus = fake_prometheus(fleet.clone()).await;
    let run = etcd.dwctl(&["drain", "fra-a", "--dry-run", "--prometheus", &prometheus]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains(
            "note: the 5m window is still filling: Prometheus has the counters of \"n2\" \
             only for part of it"
        ),
        "{}",
        run.stdout
    );
    fleet[0].at_start = false;
    let prometheus = fake_prometheus(fleet.clone()).await;
    let (_, json, _) =
        etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--prometheus", &prometheus]);
    let notes = json["prediction"]["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{json}");
    assert!(
        notes[0]
            .as_str()
            .unwrap()
            .contains("has every node's counters only for part"),
        "{json}"
    );
    // A full window: no note.
    fleet[0].at_start = true;
    fleet[1].at_start = true;
    let prometheus = fake_prometheus(fleet).await;
    let (_, json, _) =
        etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--prometheus", &prometheus]);
    assert_eq!(json["prediction"]["notes"], serde_json::json!([]), "{json}");
}

/// Issue 40 #7d: a malformed Prometheus URL was printed whole, password or token
/// included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prometheus_url_is_never_printed_with_its_secrets() {
    let etcd = guarded_cluster().await;
    for url in [
        "http//admin:hunter2@prom:9090",
        "http://admin:hunter2@[::1",
        "htp://prom:9090/?token=hunter2",
        "http://prom:9090/?access_token=hunter2",
    ] {
        let run = etcd.dwctl(&["traffic", "--prometheus", url]);
        assert_eq!(run.code, 2, "{url}: {}", run.stderr);
        assert!(
            !run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"),
            "{url}: {}{}",
            run.stdout,
            run.stderr
        );
        let run = etcd.dwctl(&["drain", "fra-a", "--dry-run", "--prometheus", url]);
        assert!(
            !run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"),
            "{url}: {}{}",
            run.stdout,
            run.stderr
        );
    }
}
