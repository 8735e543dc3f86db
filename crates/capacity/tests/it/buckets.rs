//! Bucketed traffic (issue 41) in the prediction: placed by the answering region's
//! assignment, each origin its buckets / N; shed and spill move buckets; a drain moves only
//! the drained origin's buckets; with buckets off the bucket is ignored (as plain).

use std::collections::BTreeMap;

use dw_capacity::{
    GeoRate, ShedRequest, SpillRequest, Traffic, Unplaced, compare, predict, shed, spill,
};
use dw_routing::buckets::{BucketCount, apportion};
use dw_routing::{Snapshot, SnapshotWriter, Table};

fn table(policy: &str, regions: &[(&str, &str)]) -> Table {
    let mut snapshot = Snapshot::new(5, "/dw/routing/");
    if !policy.is_empty() {
        snapshot
            .kvs
            .insert("/dw/routing/policy/global".into(), policy.to_string());
    }
    for (geo, value) in regions {
        snapshot
            .kvs
            .insert(format!("/dw/routing/region/{geo}"), value.to_string());
    }
    Table::parse(&SnapshotWriter::new().to_json(&snapshot)).unwrap()
}

/// Geos with (plain, bucketed) answers per second.
fn bucketed(geos: &[(&str, f64, f64)]) -> Traffic {
    Traffic::from_geos(
        geos.iter().map(|(geo, plain, bucket)| {
            (
                geo.to_string(),
                GeoRate {
                    plain: *plain,
                    sticky: 0.0,
                    bucket: *bucket,
                },
            )
        }),
        Unplaced::default(),
    )
    .unwrap()
}

const DE: &str = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn bucketed_traffic_lands_by_the_assignments_exact_shares() {
    // 3/1 at N = 8: 6 and 2 buckets; the stored assignment is the one the routers use.
    let regions = [(
        "DE",
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":3,"fra-b":1},"buckets":"0:3,1:2,0:3"}"#,
    )];
    let load = predict(
        &table(r#"{"buckets":8}"#, &regions),
        &bucketed(&[("DE", 0.0, 80.0)]),
    );
    assert!(near(load.of("fra-a"), 60.0) && near(load.of("fra-b"), 20.0));
    assert!(near(load.geos["DE"].bucket["fra-b"], 20.0));
    assert!(load.geos["DE"].plain.is_empty());
    // Counts off the weights (a weight written by hand): the routers reassign them, so
    // does the prediction (the apportionment of 1/1 is 4/4).
    let regions = [(
        "DE",
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":1,"fra-b":1},"buckets":"0:6,1:2"}"#,
    )];
    let load = predict(
        &table(r#"{"buckets":8}"#, &regions),
        &bucketed(&[("DE", 0.0, 80.0)]),
    );
    assert!(near(load.of("fra-a"), 40.0) && near(load.of("fra-b"), 40.0));
}

#[test]
fn with_buckets_off_a_bucket_is_ignored_as_the_routers_ignore_it() {
    let table = table("", &[("DE", DE)]);
    let plain = predict(&table, &bucketed(&[("DE", 80.0, 0.0)]));
    let bucket = predict(&table, &bucketed(&[("DE", 0.0, 80.0)]));
    // The whole geo on the plain pick's origin, recorded as bucketed traffic.
    let origin = plain.geos["DE"].plain.keys().next().unwrap().clone();
    assert!(near(bucket.of(&origin), 80.0));
    assert_eq!(
        bucket.geos["DE"].bucket.keys().collect::<Vec<_>>(),
        [&origin]
    );
    assert!(bucket.geos["DE"].plain.is_empty());
}

#[test]
fn turning_buckets_on_moves_the_share_the_assignment_gives_the_others() {
    // Today (off) the country's visitors are all on one origin; turned on, the region's
    // assignment decides: 1 - 1/2 of them move for 50/50.
    let traffic = bucketed(&[("DE", 0.0, 100.0)]);
    let before = predict(&table("", &[("DE", DE)]), &traffic);
    let after = predict(&table(r#"{"buckets":16}"#, &[("DE", DE)]), &traffic);
    let comparison = compare(&before, &after);
    assert_eq!(comparison.moves.len(), 1);
    assert!(near(comparison.moves[0].moved_rate(), 50.0));
    assert!(near(after.of("fra-a"), 50.0) && near(after.of("fra-b"), 50.0));
}

#[test]
fn shedding_40_percent_of_bucketed_load_moves_40_percent_of_the_buckets() {
    // N = 128, fra-a holds 64 buckets at 1/s each. 40 % is 25.6 buckets: the closest to
    // the target, to the bucket, is 26 (40.625 %).
    let table = table(r#"{"buckets":128}"#, &[("DE", DE)]);
    let traffic = bucketed(&[("DE", 0.0, 128.0)]);
    let plan = shed(
        &table,
        &traffic,
        &ShedRequest {
            origin: "fra-a".into(),
            percent: 40.0,
            regions: vec![],
        },
    )
    .unwrap();
    let de = plan.edits.iter().find(|edit| edit.geo == "DE").unwrap();
    let weights: Vec<u32> = de.weight.iter().map(|(_, weight)| *weight).collect();
    let counts = apportion(&weights, BucketCount::new(128).unwrap()).unwrap();
    assert_eq!(counts, [38, 90], "{:?}", de.weight);
    assert!(near(plan.achieved_percent, 26.0 / 64.0 * 100.0));
    assert!(near(plan.after.of("fra-a"), 38.0));
    assert!(near(plan.comparison.moves[0].moved_rate(), 26.0));
}

#[test]
fn a_drain_moves_only_the_drained_origins_buckets() {
    let regions = [(
        "DE",
        r#"{"shard":"eu-1","origins":["fra-a","fra-b","fra-c"],"weight":{"fra-a":50,"fra-b":30,"fra-c":20}}"#,
    )];
    let table = table(r#"{"buckets":100}"#, &regions);
    let traffic = bucketed(&[("DE", 0.0, 100.0)]);
    let plan = shed(
        &table,
        &traffic,
        &ShedRequest {
            origin: "fra-c".into(),
            percent: 100.0,
            regions: vec![],
        },
    )
    .unwrap();
    let changes = &plan.comparison.moves[0].bucket;
    let fell: Vec<&str> = changes
        .iter()
        .filter(|change| change.after < change.before)
        .map(|change| change.origin.as_str())
        .collect();
    assert_eq!(fell, ["fra-c"]);
    assert!(near(plan.comparison.moves[0].moved_rate(), 20.0));
    assert_eq!(plan.after.of("fra-c"), 0.0);
}

#[test]
fn a_spill_places_bucketed_load_on_the_origins_it_adds() {
    let regions = [
        ("DE", DE),
        (
            "continent/EU",
            r#"{"shard":"eu-1","origins":["ams-a"],"weight":{"ams-a":1}}"#,
        ),
    ];
    let table = table(r#"{"buckets":1024}"#, &regions);
    let traffic = bucketed(&[("DE", 0.0, 1500.0)]);
    let drain = shed(
        &table,
        &traffic,
        &ShedRequest {
            origin: "fra-a".into(),
            percent: 100.0,
            regions: vec![],
        },
    )
    .unwrap();
    let capacities = BTreeMap::from([("fra-b".to_owned(), 1000.0), ("ams-a".to_owned(), 1000.0)]);
    let plan = spill(
        &table,
        &traffic,
        &drain.edits,
        &SpillRequest {
            origin: "fra-a".into(),
            capacities,
            headroom: 0.8,
            declared: BTreeMap::new(),
        },
    )
    .unwrap();
    assert_eq!(plan.added[0].origin, "ams-a");
    assert!(plan.overloads.is_empty(), "{:?}", plan.overloads);
    // Bucketed load splits by buckets: fra-b within its limit, ams-a the rest.
    assert!(plan.after.of("fra-b") <= 800.0);
    assert!(plan.after.of("ams-a") > 0.0);
    assert!(near(
        plan.after.of("fra-b") + plan.after.of("ams-a"),
        1500.0
    ));
}

#[test]
fn a_shed_of_bucketed_load_lands_within_a_bucket_of_its_target_at_1024() {
    // fra-a holds 512 of 1,024 buckets at 1/s each: every percent of its load is 5.12
    // buckets, and the search reaches the closest count within one bucket (weights are
    // per mille, so a step of the share is 1.024 buckets).
    let table = table(r#"{"buckets":1024}"#, &[("DE", DE)]);
    let traffic = bucketed(&[("DE", 0.0, 1024.0)]);
    for percent in [
        3.0, 10.0, 17.0, 24.0, 31.0, 38.0, 45.0, 52.0, 59.0, 66.0, 73.0, 80.0, 87.0, 94.0,
    ] {
        let plan = shed(
            &table,
            &traffic,
            &ShedRequest {
                origin: "fra-a".into(),
                percent,
                regions: vec![],
            },
        )
        .unwrap();
        let moved = 512.0 - plan.after.of("fra-a");
        let target = 512.0 * percent / 100.0;
        assert!(
            (moved - target).abs() <= 1.0,
            "{percent}%: {moved} buckets moved, the target is {target}"
        );
        assert_eq!(moved.fract(), 0.0, "whole buckets: {moved}");
    }
}
