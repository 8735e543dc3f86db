//! Continent buckets and `dwctl route` against a real etcd: buckets are written, applied,
//! drained and restored like any region; other `continent/...` geos and bad
//! `continent_of` overrides are refused (exit 4); `route` explains the chain from etcd,
//! from a node's revision and from a snapshot file, and answers as dw-routing's table does.

use crate::common::{CONTROL, DE, Etcd, PREFIX, drain_key, listed_weights, region_key, seed};
use dw_routing::{Snapshot, Table};
use serde_json::Value;

const EU: &str = r#"{"shard":"eu-1","origins":["fra-a","ams-a"],"weight":{"fra-a":60,"ams-a":40}}"#;
const US: &str = r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":1}}"#;

fn weights(pairs: &[(&str, u64)]) -> Vec<(String, u64)> {
    pairs
        .iter()
        .map(|(name, weight)| (name.to_string(), *weight))
        .collect()
}

/// Every routing key of `etcd` as a snapshot at `revision`, as an agent would publish it.
async fn snapshot_of(etcd: &Etcd, revision: i64) -> Snapshot {
    let mut snapshot = Snapshot::new(revision as u64, PREFIX);
    for (key, value) in etcd.dump(PREFIX).await {
        snapshot.kvs.insert(key, value);
    }
    snapshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_are_regions_and_other_continent_geos_are_refused() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("continent/EU", EU), ("US", US)]).await;
    assert!(etcd.get(&region_key("continent/EU")).await.is_some());

    for geo in [
        "continent/ZZ",
        "continent/eu",
        "continent/",
        "continent/EUR",
    ] {
        let run = etcd.dwctl(&["region", "set", geo, EU]);
        assert_eq!(run.code, 4, "{geo}: {}", run.stderr);
        assert!(
            run.stderr.contains("AF AN AS EU NA OC SA"),
            "{}",
            run.stderr
        );
    }
    // One written behind dwctl's back can still be deleted.
    etcd.put(&region_key("continent/ZZ"), EU).await;
    let run = etcd.dwctl(&["region", "delete", "continent/ZZ"]);
    assert_eq!(run.code, 0, "{}", run.stderr);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("routing.json");
    std::fs::write(
        &file,
        format!(r#"{{"regions":{{"continent/AS":{US},"continent/XX":{US}}}}}"#),
    )
    .unwrap();
    let run = etcd.dwctl(&["apply", file.to_str().unwrap()]);
    assert_eq!(run.code, 4, "{}", run.stderr);
    assert!(
        run.stderr.contains("regions.continent/XX"),
        "{}",
        run.stderr
    );
    assert!(
        etcd.get(&region_key("continent/AS")).await.is_none(),
        "nothing written"
    );
    std::fs::write(
        &file,
        format!(r#"{{"regions":{{"continent/AS":{US},"continent/EU":{EU},"US":{US}}}}}"#),
    )
    .unwrap();
    let run = etcd.dwctl(&["apply", file.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert!(etcd.get(&region_key("continent/AS")).await.is_some());

    for (policy, code) in [
        (
            r#"{"default":"US","failover":["continent/EU"],"continent_of":{"TR":"EU"}}"#,
            0,
        ),
        (r#"{"continent_of":{"TR":"Europe"}}"#, 4),
        (r#"{"continent_of":{"tr":"EU"}}"#, 4),
        (r#"{"continent_of":["EU"]}"#, 4),
        (r#"{"failover":["continent/ZZ"]}"#, 4),
    ] {
        let run = etcd.dwctl(&["policy", "set", policy]);
        assert_eq!(run.code, code, "{policy}: {}", run.stderr);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_of_an_origin_only_a_bucket_uses() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("continent/EU", EU), ("DE", DE), ("US", US)]).await;
    // ams-a is in DE too; lon-a only in the bucket.
    let bucket = r#"{"shard":"eu-1","origins":["lon-a","ams-a"],"weight":{"lon-a":70,"ams-a":30}}"#;
    seed(&etcd, &[("continent/EU", bucket)]).await;

    let (code, drained, stderr) = etcd.dwctl_json(&["drain", "lon-a", "--reason", "INC-7"]);
    assert_eq!(code, 0, "{stderr}");
    let region = etcd.get_json(&region_key("continent/EU")).await.unwrap();
    assert_eq!(listed_weights(&region), weights(&[("ams-a", 100)]));
    let record = etcd
        .get_json(&drain_key("lon-a"))
        .await
        .expect("a drain record");
    assert!(record.to_string().contains("continent/EU"), "{record}");
    assert!(drained.to_string().contains("continent/EU"), "{drained}");
    assert_eq!(
        listed_weights(&etcd.get_json(&region_key("DE")).await.unwrap()),
        weights(&[("fra-a", 50), ("fra-b", 30), ("ams-a", 20)]),
        "DE does not list lon-a"
    );

    let (code, _, stderr) = etcd.dwctl_json(&["restore", "lon-a"]);
    assert_eq!(code, 0, "{stderr}");
    let region = etcd.get_json(&region_key("continent/EU")).await.unwrap();
    assert_eq!(
        listed_weights(&region),
        weights(&[("lon-a", 70), ("ams-a", 30)])
    );
    assert!(etcd.get(&drain_key("lon-a")).await.is_none());
    assert!(CONTROL.starts_with("/dw/"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_explains_the_chain_as_the_table_answers() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("continent/EU", EU), ("US", US)]).await;
    etcd.put(&region_key("DE-BY"), r#"{"shard":""}"#).await;
    let run = etcd.dwctl(&[
        "policy",
        "set",
        r#"{"default":"US","continent_of":{"TR":"EU"}}"#,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let revision = etcd.revision().await;
    let table = Table::from_snapshot(&snapshot_of(&etcd, revision).await);

    for (geo, sticky) in [
        ("PT", None),
        ("DE-BY", Some("visitor-1")),
        ("TR", None),
        ("XX", None),
        ("T1", Some("k")),
        ("continent/EU", None),
        ("US-CA", None),
        ("", None),
    ] {
        let mut args = vec!["route", geo];
        if let Some(sticky) = sticky {
            args.extend(["--sticky", sticky]);
        }
        let (code, got, stderr) = etcd.dwctl_json(&args);
        assert_eq!(code, 0, "{geo}: {stderr}");
        let mut expected = table
            .explain(geo.as_bytes(), sticky.map(str::as_bytes))
            .to_json();
        expected["source"] = serde_json::json!({"kind": "etcd", "revision": revision});
        assert_eq!(got, expected, "{geo}");
    }
    let (_, pt, _) = etcd.dwctl_json(&["route", "PT"]);
    assert_eq!(pt["answered_by"], "/dw/routing/region/continent/EU");
    assert_eq!(pt["hash_key"], "PT");
    let (_, by, _) = etcd.dwctl_json(&["route", "DE-BY"]);
    assert_eq!(by["steps"][0]["outcome"], "invalid");
    assert!(by["steps"][0]["reason"].as_str().unwrap().contains("shard"));

    let text = etcd.dwctl(&["route", "PT"]);
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.starts_with("PT -> shard eu-1, origin "),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout
            .contains("continent EU (from table; table countries-list"),
        "{}",
        text.stdout
    );
    assert!(text.stdout.contains("2. continent"), "{}", text.stdout);

    // A node behind: explained from etcd at the revision it reports. (Hand-written in the
    // layout before schema 1: `route --node` reads any report, believed or not.)
    etcd.put(
        "/dw/nodes/web-1",
        &format!(r#"{{"revision":{revision},"state":"ok"}}"#),
    )
    .await;
    seed(&etcd, &[("PT", US)]).await;
    let (_, now, _) = etcd.dwctl_json(&["route", "PT"]);
    assert_eq!(now["answered_by"], "/dw/routing/region/PT");
    let (code, then, stderr) = etcd.dwctl_json(&["route", "PT", "--node", "web-1"]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(then["answered_by"], "/dw/routing/region/continent/EU");
    assert_eq!(then["source"]["node"], "web-1");
    assert_eq!(then["source"]["revision"], revision);
    let run = etcd.dwctl(&["route", "PT", "--node", "web-9"]);
    assert_eq!(run.code, 1, "{}", run.stderr);

    // From a snapshot file: the same answer as from etcd.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("routing.json");
    let current = etcd.revision().await;
    std::fs::write(&file, snapshot_of(&etcd, current).await.to_json()).unwrap();
    let (code, from_file, stderr) =
        etcd.dwctl_json(&["route", "PT", "--snapshot", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    let strip = |mut value: Value| {
        value.as_object_mut().unwrap().remove("source");
        value
    };
    assert_eq!(strip(from_file), strip(now));

    // Fail-open is labelled.
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, r#"{"format":1,"revision":3,"kvs":{}}"#).unwrap();
    let text = etcd.dwctl(&["route", "DE", "--snapshot", empty.to_str().unwrap()]);
    assert!(
        text.stdout.starts_with("DE -> FAIL-OPEN"),
        "{}",
        text.stdout
    );
    let run = etcd.dwctl(&["route", "DE", "--snapshot", "/nonexistent/routing.json"]);
    assert_eq!(run.code, 1);
}

/// `route` reads the routing prefix in pages at one revision (docs/ARCHITECTURE.md: no
/// single read response holds a whole large prefix): two keys a page take several pages,
/// and give exactly the keys one read of the whole prefix gives, now or at a past revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_reads_the_routing_prefix_in_pages() {
    let etcd = Etcd::start().await;
    seed(
        &etcd,
        &[
            ("continent/EU", EU),
            ("US", US),
            ("PT", US),
            ("DE", DE),
            ("FR", EU),
            ("IT", EU),
        ],
    )
    .await;
    let run = etcd.dwctl(&["policy", "set", r#"{"default":"US"}"#]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let revision = etcd.revision().await;
    let whole = snapshot_of(&etcd, revision).await;
    assert_eq!(whole.kvs.len(), 7);

    let mut client = etcd.client().await;
    let read = dwctl::read_routing(&mut client, PREFIX, None, 2)
        .await
        .expect("a paged read");
    assert_eq!(read.pages, 4, "7 keys, 2 a page");
    assert_eq!(read.snapshot.revision, revision as u64);
    assert_eq!(read.snapshot.kvs, whole.kvs);
    let one_page = dwctl::read_routing(&mut client, PREFIX, None, 1000)
        .await
        .expect("a read in one page");
    assert_eq!(one_page.pages, 1);
    assert_eq!(one_page.snapshot.kvs, whole.kvs);

    // At a past revision every page is read at it, whatever was written since.
    seed(&etcd, &[("ES", EU), ("PT", EU)]).await;
    let then = dwctl::read_routing(&mut client, PREFIX, Some(revision), 2)
        .await
        .expect("a paged read at a past revision");
    assert_eq!(then.snapshot.revision, revision as u64);
    assert_eq!(then.snapshot.kvs, whole.kvs);
    let now = dwctl::read_routing(&mut client, PREFIX, None, 2)
        .await
        .expect("a paged read");
    assert_eq!(now.snapshot.kvs.len(), 8);
    assert_eq!(now.pages, 4);
    assert!(now.snapshot.kvs[&region_key("PT")].starts_with(r#"{"shard":"eu-1""#));

    // The command's answer is the table of those keys.
    let (code, got, stderr) = etcd.dwctl_json(&["route", "PT"]);
    assert_eq!(code, 0, "{stderr}");
    let mut expected = Table::from_snapshot(&now.snapshot)
        .explain(b"PT", None)
        .to_json();
    expected["source"] = serde_json::json!({"kind": "etcd", "revision": now.snapshot.revision});
    assert_eq!(got, expected);
}

/// `route --node` explains what that node serves: etcd at its revision with the node's
/// stages in place (by node id and by label), and current routing for a node in no cohort.
#[tokio::test]
async fn route_for_a_node_applies_its_stages() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE), ("US", US)]).await;
    let stage = serde_json::json!({"schema": 1, "id": "de-to-us",
        "cohort": {"nodes": ["web-1"], "labels": {"site": "fra"}},
        "kvs": {"region/DE": US}, "base": {}});
    etcd.put(&format!("{PREFIX}stage/de-to-us"), &stage.to_string())
        .await;
    let revision = etcd.revision().await;
    for (node, labels) in [
        ("web-1", "{}"),
        ("web-2", r#"{"site":"fra"}"#),
        ("web-3", r#"{"site":"ams"}"#),
    ] {
        etcd.put(
            &format!("/dw/nodes/{node}"),
            &format!(r#"{{"revision":{revision},"state":"ok","labels":{labels}}}"#),
        )
        .await;
    }
    for (node, staged) in [("web-1", true), ("web-2", true), ("web-3", false)] {
        let (code, got, stderr) = etcd.dwctl_json(&["route", "DE", "--node", node]);
        assert_eq!(code, 0, "{node}: {stderr}");
        let shard = if staged { "us-1" } else { "eu-1" };
        assert_eq!(got["shard"], shard, "{node}: {got}");
        let stages = got["source"]["stages"].as_array().unwrap();
        assert_eq!(stages.len(), usize::from(staged), "{node}: {got}");
        if staged {
            assert_eq!(stages[0]["id"], "de-to-us");
            let text = etcd.dwctl(&["route", "DE", "--node", node]);
            assert!(
                text.stdout
                    .contains("with the node's stages applied: de-to-us"),
                "{}",
                text.stdout
            );
        }
    }
    // Current routing (no --node): no stage applies.
    let (_, now, _) = etcd.dwctl_json(&["route", "DE"]);
    assert_eq!(now["shard"], "eu-1");
}
