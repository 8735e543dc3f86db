//! `apply` and `policy set` against a real etcd: a policy whose `default` or `failover`
//! names a geo without a region key is written (exit 0) with a warning note naming each
//! such geo, and none when every geo it names has a key (docs/dwctl.md, "apply").

use crate::common::{DE, Etcd, seed};
use serde_json::{Value, json};

fn warnings(notes: &Value) -> Vec<String> {
    notes
        .as_array()
        .expect("notes is an array")
        .iter()
        .filter_map(Value::as_str)
        .filter(|note| note.starts_with("warning: the policy names geos"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_naming_geos_without_keys_is_written_with_a_warning() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE)]).await;

    // policy set: default DE has a key, failover GB has none.
    let (code, set, stderr) =
        etcd.dwctl_json(&["policy", "set", r#"{"default":"DE","failover":["GB"]}"#]);
    assert_eq!(code, 0, "{stderr}");
    let found = warnings(&set["notes"]);
    assert_eq!(found.len(), 1, "{set}");
    assert!(found[0].contains("failover GB;"), "{}", found[0]);
    assert!(!found[0].contains("default DE"), "{}", found[0]);
    let text = etcd.dwctl(&["policy", "set", r#"{"default":"US","failover":["GB"]}"#]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("note: warning: the policy names geos with no region key: default US, failover GB; none of them has one"),
        "{}",
        text.stdout
    );

    // apply: a file that creates what its policy names has no warning ...
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("routing.json");
    let region = serde_json::from_str::<Value>(DE).unwrap();
    std::fs::write(
        &path,
        json!({"policy": {"default": "DE", "failover": ["GB"]}, "regions": {"GB": region}})
            .to_string(),
    )
    .unwrap();
    let (code, applied, stderr) = etcd.dwctl_json(&["apply", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        warnings(&applied["notes"]),
        Vec::<String>::new(),
        "{applied}"
    );

    // ... and one that prunes a geo its policy names warns, and writes.
    std::fs::write(
        &path,
        json!({"policy": {"default": "DE", "failover": ["GB"]}, "regions": {"DE": serde_json::from_str::<Value>(DE).unwrap()}}).to_string(),
    )
    .unwrap();
    let pruned = etcd.dwctl(&["apply", path.to_str().unwrap(), "--prune"]);
    assert_eq!(pruned.code, 0, "{}", pruned.stderr);
    assert!(pruned.stdout.contains("- region/GB"), "{}", pruned.stdout);
    assert!(
        pruned
            .stdout
            .contains("note: warning: the policy names geos with no region key: failover GB;"),
        "{}",
        pruned.stdout
    );
}
