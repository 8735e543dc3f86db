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
