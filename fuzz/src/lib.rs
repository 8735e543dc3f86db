//! dw-routing-fuzz: what the fuzz targets do, as a library so that it also runs (on the
//! seed inputs) under `cargo test`, without libFuzzer or nightly.
//!
//! [`exercise`] treats its input as a snapshot file and as a single region or policy value,
//! and checks the invariants every reader relies on: nothing panics, every valid region
//! answers for its own geo with one of its own origins, a route's indexes name the route,
//! a parsed snapshot survives a serialisation round trip, and the reload reading
//! (`Table::parse_after`, first and again after itself) builds the table the exact one does.

use dw_routing::{Policy, Region, Snapshot, SnapshotWriter, Table};

/// Runs every check on one input. Panics (which the fuzzer reports) on a broken invariant.
pub fn exercise(data: &[u8]) {
    let _ = Region::parse(data);
    let _ = Policy::parse(data);

    let Ok(snapshot) = Snapshot::parse(data) else {
        assert!(
            Table::parse(data).is_err(),
            "Table::parse accepted what Snapshot::parse refused"
        );
        assert!(
            Table::parse_after(data, &Table::empty()).is_err(),
            "Table::parse_after accepted what Snapshot::parse refused"
        );
        return;
    };
    assert_eq!(
        Snapshot::parse(&snapshot.to_json()).ok().as_ref(),
        Some(&snapshot),
        "round trip"
    );
    // The agent's writer reuses what it wrote before: after another state (one key
    // fewer), it must still write this one as a fresh writer does.
    let mut writer = SnapshotWriter::new();
    let mut before = snapshot.clone();
    before.kvs.pop_first();
    writer.to_json(&before);
    assert_eq!(
        writer.to_json(&snapshot),
        snapshot.to_json(),
        "a reused writer writes what a fresh one writes"
    );

    let table = Table::from_snapshot(&snapshot);
    assert_eq!(table.revision(), snapshot.revision);
    let first = Table::parse_after(data, &Table::empty()).expect("parse_after reads it too");
    assert_same_table(&first, &table);
    let again = Table::parse_after(data, &first).expect("and again after itself");
    assert_same_table(&again, &table);

    let head = &data[..data.len().min(2)];
    for country in [&b"US"[..], b"DE", b"", b"\0", head, data] {
        for sticky in [None, Some(data), Some(head)] {
            if let Some(route) = table.resolve(country, sticky) {
                assert_eq!(table.region_shard(route.region_index), route.shard);
                assert_eq!(
                    table.region_origin(route.region_index, route.origin_index),
                    route.origin
                );
            }
        }
    }
    // Visitor buckets: a bucket picks within the region the chain gives, by its assignment,
    // else answers as without one; the explanation agrees.
    let bucket = data.iter().fold(0u64, |b, &byte| {
        b.wrapping_mul(31).wrapping_add(u64::from(byte))
    });
    for country in [&b"US"[..], b"DE", head, data] {
        for bucket in [0, 1, bucket % 1030, bucket] {
            let plain = table.resolve(country, None);
            let bucketed = table.resolve_bucketed(country, None, Some(bucket));
            assert_eq!(
                bucketed.map(|r| r.region_index),
                plain.map(|r| r.region_index)
            );
            if !table.bucket_applies(country, bucket) {
                assert_eq!(bucketed, plain);
            }
            let explained = table.explain_bucketed(country, None, Some(bucket)).route;
            assert_eq!(
                explained.map(|r| r.origin),
                bucketed.map(|r| r.origin.to_owned())
            );
        }
    }
    for (geo, region) in table.regions() {
        let route = table.resolve(geo.as_bytes(), Some(data));
        let route = route.unwrap_or_else(|| panic!("region {geo:?} does not answer for itself"));
        assert_eq!(route.shard, region.shard());
        assert!(region.origins().iter().any(|origin| origin == route.origin));
        assert!(region.weight(route.origin) > 0 || route.origin == region.origins()[0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed corpus: every file under `seeds/`.
    #[test]
    fn the_seeds_pass() {
        let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds");
        let mut count = 0;
        for entry in std::fs::read_dir(&seeds).expect("fuzz/seeds exists") {
            let path = entry.expect("readable directory").path();
            exercise(&std::fs::read(&path).expect("readable seed"));
            count += 1;
        }
        assert!(count >= 3, "only {count} seeds");
    }
}

fn assert_same_table(a: &Table, b: &Table) {
    assert_eq!(a.revision(), b.revision());
    assert_eq!(a.prefix(), b.prefix());
    assert_eq!(a.policy(), b.policy());
    assert_eq!(a.invalid_keys(), b.invalid_keys());
    assert!(a.regions().eq(b.regions()), "the same regions");
}
