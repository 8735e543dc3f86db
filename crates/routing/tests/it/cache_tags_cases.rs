//! Table::cache_tags on the shared cases of `cache-tags-cases.json`, which the userland
//! twin's cacheTags() is held to as well (tests/differential/twin-selftest.php): the two
//! cannot drift apart unnoticed.

use dw_routing::Table;
use serde_json::{Map, Value, json};

const CASES: &str = include_str!("../cache-tags-cases.json");
const PREFIX: &str = "/dw/routing/";

#[test]
fn the_tags_match_every_shared_case() {
    let document: Value = serde_json::from_str(CASES).expect("cache-tags-cases.json is JSON");
    let mut count = 0;
    for snapshot in document["snapshots"].as_array().expect("snapshots") {
        let name = snapshot["name"].as_str().expect("name");
        let kvs: Map<String, Value> = snapshot["kvs"]
            .as_object()
            .expect("kvs")
            .iter()
            .map(|(key, value)| (format!("{PREFIX}{key}"), value.clone()))
            .collect();
        let bytes = json!({"format": 1, "revision": 7, "prefix": PREFIX, "kvs": kvs}).to_string();
        let table = Table::parse(bytes.as_bytes()).expect("a valid snapshot");
        for case in snapshot["cases"].as_array().expect("cases") {
            let geo = case["geo"].as_str().expect("geo");
            let sticky = case
                .get("sticky")
                .map(|key| key.as_str().expect("a sticky key"));
            let bucket = case
                .get("bucket")
                .map(|bucket| bucket.as_u64().expect("a bucket"));
            let expected: Vec<&str> = case["tags"]
                .as_array()
                .expect("tags")
                .iter()
                .map(|tag| tag.as_str().expect("a tag"))
                .collect();
            assert_eq!(
                table.cache_tags_bucketed(geo.as_bytes(), sticky.map(str::as_bytes), bucket),
                expected,
                "{name}: {geo:?} {sticky:?} {bucket:?}"
            );
            count += 1;
        }
    }
    assert!(count >= 30, "{count} cases");
}
