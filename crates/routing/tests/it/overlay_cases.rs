//! dw_routing::stage::overlay on the shared cases of `overlay-cases.json`, which
//! php/Stages.php (the chaos checker's overlay) is held to as well, by
//! tests/differential/twin-selftest.php: the two cannot drift apart unnoticed.

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::Snapshot;
use dw_routing::stage::{Node, overlay};
use serde_json::Value;

const CASES: &str = include_str!("../overlay-cases.json");

fn strings(value: &Value) -> BTreeMap<String, String> {
    value
        .as_object()
        .expect("an object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().expect("a string").to_owned()))
        .collect()
}

#[test]
fn the_overlay_matches_every_shared_case() {
    let document: Value = serde_json::from_str(CASES).expect("overlay-cases.json is JSON");
    let cases = document["cases"].as_array().expect("cases");
    assert!(cases.len() >= 40, "{} cases", cases.len());
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let mut current = Snapshot::new(50, case["prefix"].as_str().expect("prefix"));
        current.kvs = strings(&case["kvs"]);
        let revisions: BTreeMap<String, u64> = case["revisions"]
            .as_object()
            .expect("revisions")
            .iter()
            .map(|(k, v)| (k.clone(), v.as_u64().expect("a revision")))
            .collect();
        let labels = case["node"].get("labels").map(strings).unwrap_or_default();
        let node = case["node"]["id"].as_str().map(|id| Node {
            id,
            labels: &labels,
        });
        let got = overlay(&current, &revisions, node.as_ref());
        let want = &case["want"];
        assert_eq!(got.snapshot.kvs, strings(&want["kvs"]), "{name}: kvs");
        let stages: Vec<(String, u64)> = got
            .snapshot
            .stages
            .iter()
            .map(|s| (s.id.clone(), s.revision))
            .collect();
        let want_stages: Vec<(String, u64)> = want["stages"]
            .as_array()
            .expect("stages")
            .iter()
            .map(|s| {
                (
                    s["id"].as_str().expect("id").to_owned(),
                    s["revision"].as_u64().expect("revision"),
                )
            })
            .collect();
        assert_eq!(stages, want_stages, "{name}: stages");
        let problems: BTreeSet<String> = got.problems.iter().map(|(k, _)| k.clone()).collect();
        let want_problems: BTreeSet<String> = want["problems"]
            .as_array()
            .expect("problems")
            .iter()
            .map(|k| k.as_str().expect("a key").to_owned())
            .collect();
        assert_eq!(problems, want_problems, "{name}: problems");
        assert_eq!(got.snapshot.revision, 50, "{name}: revision");
    }
}
