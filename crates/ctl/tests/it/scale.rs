//! dwctl at the sizes docs/agent.md supports (issue 21, item 1): 100,000 regions and
//! 10,000 node reports of about 1 KB each, both far past tonic's default 4 MiB response
//! limit. Every command is read in pages at one revision and still works; each command's
//! time is printed (the figures in BENCHMARKS.md come from bench/60-dwctl-scale.sh).

use std::time::Instant;

use crate::common::{Etcd, drain_key, region_key};
use etcd_client::{Client, Txn, TxnOp};
use serde_json::{Value, json};

const REGIONS: usize = 100_000;
const NODES: usize = 10_000;
/// Regions that list the origin the test drains (one transaction covers them: etcd's
/// default --max-txn-ops is 128).
const DRAINED: usize = 50;

/// Puts `items` in transactions of 128 operations, on `lease` when given (node reports
/// live on a lease, as an agent's do: status counts a report on none as untrusted).
async fn put_all(
    client: &mut Client,
    items: impl Iterator<Item = (String, String)>,
    lease: Option<i64>,
) {
    let items: Vec<(String, String)> = items.collect();
    for chunk in items.chunks(128) {
        let ops = chunk
            .iter()
            .map(|(key, value)| {
                let options = lease.map(|id| etcd_client::PutOptions::new().with_lease(id));
                TxnOp::put(key.as_str(), value.as_str(), options)
            })
            .collect::<Vec<_>>();
        client
            .txn(Txn::new().and_then(ops))
            .await
            .expect("seed txn");
    }
}

fn geo(index: usize) -> String {
    format!("G{index:06}")
}

fn region(index: usize) -> String {
    let origin = if index < DRAINED { "fra-a" } else { "x-1" };
    json!({"shard": "eu-1", "origins": [origin, "x-2"], "weight": {origin: 50, "x-2": 50}})
        .to_string()
}

/// A report like an agent's with 20 rejected keys listed (about 1 KB). Hand-written, in
/// the layout before schema 1 (no lease, rejected keys as plain text): the fleet-size
/// limits are about bytes and counts, and such reports must still be read.
fn report(index: usize, revision: i64) -> String {
    let rejected: Vec<String> = (0..20)
        .map(|k| format!("region/BAD{k:03}-{index}"))
        .collect();
    json!({"revision": revision, "state": "ok", "labels": {"dc": "fra"}, "rejected": rejected,
           "published_at_ms": 1, "reported_at_ms": 1, "version": "0.1.0"})
    .to_string()
}

fn timed(etcd: &Etcd, args: &[&str]) -> (crate::common::Run, f64) {
    let started = Instant::now();
    let run = etcd.dwctl(args);
    let seconds = started.elapsed().as_secs_f64();
    // One line per command, for bench/60-dwctl-scale.sh.
    eprintln!(
        "dwctl-scale\t{}\t{}\t{seconds:.2}",
        args.join(" "),
        run.code
    );
    (run, seconds)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_works_at_100k_regions_and_10k_nodes() {
    let etcd = Etcd::start().await;
    let mut client = etcd.client().await;
    let started = Instant::now();
    put_all(
        &mut client,
        (0..REGIONS).map(|i| (region_key(&geo(i)), region(i))),
        None,
    )
    .await;
    // Far ahead of every revision the test writes, so that --wait is reached at once.
    let ahead = 1_000_000_000;
    let lease = client.lease_grant(600, None).await.expect("lease").id();
    put_all(
        &mut client,
        (0..NODES).map(|i| (format!("/dw/nodes/edge-{i:05}"), report(i, ahead))),
        Some(lease),
    )
    .await;
    eprintln!(
        "dwctl-scale\tseed {REGIONS} regions and {NODES} node reports (etcd client, 128 puts per txn)\t0\t{:.2}",
        started.elapsed().as_secs_f64()
    );

    let (list, _) = timed(&etcd, &["--output", "json", "region", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let listed: Value = serde_json::from_str(list.stdout.trim()).unwrap();
    assert_eq!(listed["regions"].as_array().map(Vec::len), Some(REGIONS));

    let (get, _) = timed(&etcd, &["region", "get", &geo(REGIONS - 1)]);
    assert_eq!(get.code, 0, "{}", get.stderr);
    let value = region(REGIONS);
    let (set, _) = timed(&etcd, &["region", "set", &geo(7), &value]);
    assert_eq!(set.code, 0, "{}", set.stderr);

    let (dry, _) = timed(&etcd, &["--output", "json", "drain", "fra-a", "--dry-run"]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    let planned: Value = serde_json::from_str(dry.stdout.trim()).unwrap();
    // Region 7 was set to a value without fra-a above.
    assert_eq!(
        planned["regions"].as_object().map(|m| m.len()),
        Some(DRAINED - 1)
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("desired.json");
    std::fs::write(
        &file,
        json!({"regions": {geo(1): serde_json::from_str::<Value>(&region(REGIONS)).unwrap()}})
            .to_string(),
    )
    .unwrap();
    let (apply, _) = timed(&etcd, &["apply", file.to_str().unwrap(), "--dry-run"]);
    assert_eq!(apply.code, 0, "{}", apply.stderr);

    let (status, _) = timed(&etcd, &["--output", "json", "status"]);
    assert_eq!(status.code, 0, "{}", status.stderr);
    let fleet: Value = serde_json::from_str(status.stdout.trim()).unwrap();
    assert_eq!(fleet["live"], NODES);

    // The drain guards every region it read (the prefix guard at the pinned revision):
    // a concurrent change to a region it left alone would make it retry.
    let (drain, _) = timed(&etcd, &["drain", "fra-a", "--wait=20s"]);
    assert_eq!(drain.code, 0, "{}\n{}", drain.stdout, drain.stderr);
    assert!(
        drain
            .stdout
            .contains(&format!("{NODES}/{NODES} live nodes")),
        "{}",
        drain.stdout
    );
    let record = etcd.get_json(&drain_key("fra-a")).await.expect("a record");
    assert_eq!(
        record["regions"].as_object().map(|m| m.len()),
        Some(DRAINED - 1)
    );
    let (restore, _) = timed(&etcd, &["restore", "fra-a"]);
    assert_eq!(restore.code, 0, "{}", restore.stderr);
}

/// A page that is still too large for the client is read again with fewer keys, at the
/// same revision, until it fits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pages_too_large_for_the_client_are_split() {
    let etcd = Etcd::start().await;
    let mut client = etcd.client().await;
    let value = "v".repeat(10 * 1024);
    put_all(
        &mut client,
        (0..100).map(|i| (format!("/p/{i:03}"), value.clone())),
        None,
    )
    .await;
    let first = etcd.revision().await;
    // Written after the revision the read pins: not seen.
    client.put("/p/999", "late", None).await.unwrap();
    let mut kv = client.kv_client().max_decoding_message_size(64 * 1024);
    let pages = dw_etcd::read_prefix_pages(&mut kv, b"/p/", Some(first), 1000)
        .await
        .expect("paged read");
    assert_eq!(pages.kvs.len(), 100);
    assert_eq!(pages.revision, first);
    assert!(pages.requests > 2, "{} requests", pages.requests);
    let mut small = client.kv_client().max_decoding_message_size(4 * 1024);
    let error = dw_etcd::read_prefix_pages(&mut small, b"/p/", None, 1000)
        .await
        .expect_err("one value is larger than the limit");
    assert!(dw_etcd::is_too_large(&error), "{error}");
}
