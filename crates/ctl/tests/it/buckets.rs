//! Visitor buckets (issue 41) against a real etcd: with `policy/global`'s `buckets` set,
//! dwctl commits each region's assignment with the change (a drain and its restore round
//! trip on a default assignment, a change of N rescales every region), and writes none with
//! buckets off; a change of N staged and promoted by hand, or by a `dwctl rollout` with the
//! nodes reporting, writes what a direct `policy set` writes.

use crate::common::fleet::{Fleet, applying, nodes};
use crate::common::rollout::{events, named, record, rollout_json, stage_of, steps};
use crate::common::{DE, Etcd, PREFIX, listed_weights, region_key, seed};
use dw_routing::buckets::{Assignment, BucketCount, apportion, effective_assignment};
use serde_json::Value;

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

/// Three regions with buckets at 16: DE and FR given assignments by a drain of fra-b and
/// its restore, PL (which fra-b is not in) left on the default.
async fn sixteen_buckets(etcd: &Etcd) {
    seed(
        etcd,
        &[
            ("DE", DE),
            (
                "FR",
                r#"{"shard":"eu-2","origins":["par-a","fra-b"],"weight":{"par-a":70,"fra-b":30}}"#,
            ),
            (
                "PL",
                r#"{"shard":"eu-3","origins":["waw-a","ams-a"],"weight":{"waw-a":60,"ams-a":40}}"#,
            ),
        ],
    )
    .await;
    for argv in [
        &["policy", "set", r#"{"buckets":16}"#][..],
        &["drain", "fra-b"],
        &["restore", "fra-b"],
    ] {
        let run = etcd.dwctl(argv);
        assert_eq!(run.code, 0, "{argv:?}: {}", run.stderr);
    }
}

/// `text` parsed, without its `updated` time (the same change made a second apart differs
/// only there).
fn untimed(text: &str) -> Value {
    let mut value: Value = serde_json::from_str(text).unwrap();
    value.as_object_mut().unwrap().remove("updated");
    value
}

/// The region values under `etcd`'s prefix, [`untimed`].
async fn region_values(etcd: &Etcd) -> Vec<(String, Value)> {
    etcd.dump(&format!("{PREFIX}region/"))
        .await
        .into_iter()
        .map(|(key, text)| (key, untimed(&text)))
        .collect()
}

/// Each bucket's origin (by name) in `region` at `n`: the assignment the routers use.
fn owner_names(region: &Value, n: u16) -> Vec<String> {
    let (origins, weights): (Vec<String>, Vec<u32>) = listed_weights(region)
        .into_iter()
        .map(|(origin, weight)| (origin, u32::try_from(weight).unwrap()))
        .unzip();
    let stored = region["buckets"].as_str().map(Ok);
    let (assignment, _) =
        effective_assignment(stored, &weights, BucketCount::new(n.into()).unwrap()).unwrap();
    assignment
        .owners()
        .iter()
        .map(|&index| origins[usize::from(index)].clone())
        .collect()
}

/// Issue 41's "a staged rollout of the policy works": `dwctl rollout` of a policy file
/// that changes N from 16 to 64 runs its two steps with the nodes reporting the stage
/// applied, and its promote leaves every region value with the assignment for 64 and the
/// policy at 64: exactly the values a direct `policy set` writes on a copy of the same
/// etcd. Each region's counts are the apportionment of its weights at 64, and of the
/// buckets below 16 only as many change origin as the origins' counts fall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollout_of_a_change_of_n_promotes_what_policy_set_writes() {
    let etcd = Etcd::start().await;
    let copy = Etcd::start().await;
    sixteen_buckets(&etcd).await;
    sixteen_buckets(&copy).await;
    let before = region_values(&etcd).await;
    assert_eq!(before, region_values(&copy).await, "the copy starts equal");
    assert_eq!(before.len(), 3);
    let stored = |geo: &str| {
        let (_, value) = before
            .iter()
            .find(|(key, _)| *key == region_key(geo))
            .unwrap();
        value["buckets"].clone()
    };
    assert!(stored("DE").is_string() && stored("FR").is_string());
    assert!(stored("PL").is_null(), "PL is on the default at 16");

    let run = copy.dwctl(&["policy", "set", r#"{"buckets":64}"#]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let file = etcd.data_dir.join("policy.json");
    std::fs::write(&file, r#"{"policy":{"buckets":64}}"#).unwrap();
    let file = file.to_string_lossy().into_owned();
    let ids = nodes(10);
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let run = rollout_json(
        &etcd,
        &file,
        "n64",
        "50%,100%",
        "1s",
        &["--reason", "N to 64"],
    );
    fleet.stop().await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let events = events(&run.stdout);
    assert_eq!(steps(&events), [1, 2]);
    assert_eq!(named(&events, "step-passed").len(), 2, "{}", run.stdout);
    assert_eq!(
        events.last().unwrap()["event"],
        "promoted",
        "{}",
        run.stdout
    );
    assert!(stage_of(&etcd, "n64").await.is_none());
    assert_eq!(record(&etcd, "n64").await.unwrap()["state"], "promoted");

    // The promote wrote what the direct change wrote (but the time), policy included.
    let after = region_values(&etcd).await;
    assert_eq!(after, region_values(&copy).await);
    let policy = format!("{PREFIX}policy/global");
    let promoted = untimed(&etcd.get(&policy).await.expect("policy").0);
    assert_eq!(promoted["buckets"], 64);
    assert_eq!(
        promoted,
        untimed(&copy.get(&policy).await.expect("policy").0)
    );

    for ((key, old), (_, new)) in before.iter().zip(&after) {
        let text = new["buckets"]
            .as_str()
            .unwrap_or_else(|| panic!("{key}: {new}"));
        let origins = listed_weights(new);
        let weights: Vec<u32> = origins
            .iter()
            .map(|(_, weight)| u32::try_from(*weight).unwrap())
            .collect();
        let n64 = BucketCount::new(64).unwrap();
        // Carries the assignment for 64, as stored (its counts the apportionment).
        let counts = Assignment::decode(text, n64, origins.len())
            .unwrap_or_else(|error| panic!("{key}: {text}: {error}"))
            .counts(origins.len());
        assert_eq!(counts, apportion(&weights, n64).unwrap(), "{key}: {text}");
        // A bucket below 16 keeps its origin where the new counts allow: those that
        // change origin are the origins' decreases from 16 to 64 buckets (none here, each
        // count rises).
        let (old_owners, new_owners) = (owner_names(old, 16), owner_names(new, 64));
        let moved = (0..16)
            .filter(|&bucket| old_owners[bucket] != new_owners[bucket])
            .count();
        let decreases: usize = origins
            .iter()
            .map(|(origin, _)| {
                let count = |owners: &[String]| owners.iter().filter(|o| *o == origin).count();
                count(&old_owners).saturating_sub(count(&new_owners))
            })
            .sum();
        assert_eq!(moved, decreases, "{key}: {old_owners:?} -> {new_owners:?}");
    }
}
