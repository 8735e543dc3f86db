//! Visitor buckets (issue 41) against a real etcd: with `policy/global`'s `buckets` set,
//! dwctl commits each region's assignment with the change (a drain and its restore round
//! trip on a default assignment, a change of N rescales every region), and writes none with
//! buckets off.

use crate::common::{Etcd, region_key, seed};

const HALVES: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

async fn buckets_of(etcd: &Etcd, geo: &str) -> Option<String> {
    let value = etcd.get_json(&region_key(geo)).await.expect("region");
    value["buckets"].as_str().map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_change_commits_the_assignment_and_none_with_buckets_off() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", HALVES)]).await;
    // Off: a drain writes no assignment.
    let run = etcd.dwctl(&["drain", "fra-a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(buckets_of(&etcd, "DE").await, None);
    let run = etcd.dwctl(&["restore", "fra-a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(buckets_of(&etcd, "DE").await, None);

    // Turned on: no region is rewritten (the default is what the routers take).
    let run = etcd.dwctl(&["policy", "set", r#"{"buckets":4}"#]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(buckets_of(&etcd, "DE").await, None);
    // A drain moves fra-a's 2 buckets to fra-b; its restore gives them back.
    let run = etcd.dwctl(&["drain", "fra-a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(buckets_of(&etcd, "DE").await.as_deref(), Some("0:4"));
    let run = etcd.dwctl(&["restore", "fra-a"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(buckets_of(&etcd, "DE").await.as_deref(), Some("0:2,1:2"));

    // A change of N rescales every region in the same transaction: buckets 0-3 keep
    // their origins.
    let run = etcd.dwctl(&["policy", "set", r#"{"buckets":8}"#]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(
        buckets_of(&etcd, "DE").await.as_deref(),
        Some("0:2,1:4,0:2")
    );
    // A value given with another assignment is given dwctl's.
    let run = etcd.dwctl(&[
        "region",
        "set",
        "DE",
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50},"buckets":"1:8"}"#,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(
        run.stdout.contains("dwctl owns") || run.stderr.contains("dwctl owns"),
        "{}{}",
        run.stdout,
        run.stderr
    );
    assert_eq!(
        buckets_of(&etcd, "DE").await.as_deref(),
        Some("0:2,1:4,0:2")
    );
}

/// A staged change of N: `stage create` with a policy file stages every region rescaled
/// for the staged N (the cohort routes by what the promote will commit), and the promote
/// writes exactly those assignments with the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_staged_change_of_n_stages_every_region_and_its_promote_writes_them() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", HALVES)]).await;
    let run = etcd.dwctl(&["policy", "set", r#"{"buckets":4}"#]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let file = etcd.data_dir.join("policy.json");
    std::fs::write(&file, r#"{"policy":{"buckets":8}}"#).unwrap();
    let file = file.to_string_lossy().into_owned();
    let run = etcd.dwctl(&[
        "stage", "create", &file, "--cohort", "10%", "--id", "n8", "--reason", "N to 8",
    ]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let stage = etcd
        .get_json("/dw/routing/stage/n8")
        .await
        .expect("stage written");
    let staged: serde_json::Value =
        serde_json::from_str(stage["kvs"]["region/DE"].as_str().expect("DE staged")).unwrap();
    assert_eq!(staged["buckets"], "0:2,1:4,0:2");
    // Current routing is untouched until the promote.
    assert_eq!(buckets_of(&etcd, "DE").await, None);
    // Another change of N meanwhile is refused: the stage's values are for N = 4.
    let run = etcd.dwctl(&["policy", "set", r#"{"buckets":16}"#]);
    assert_ne!(run.code, 0, "{}", run.stdout);
    assert!(run.stderr.contains("stage n8"), "{}", run.stderr);

    let run = etcd.dwctl(&["stage", "promote", "n8"]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert_eq!(
        buckets_of(&etcd, "DE").await.as_deref(),
        Some("0:2,1:4,0:2")
    );
    let policy = etcd
        .get_json("/dw/routing/policy/global")
        .await
        .expect("policy");
    assert_eq!(policy["buckets"], 8);
}
