//! Shed, drain and spill plans on small tables: what they change, what they achieve, and
//! that they compose.

use std::collections::BTreeMap;

use dw_capacity::{
    DEFAULT_HEADROOM, GeoRate, NodeTables, RegionEdit, ShedRequest, SpillRequest, Traffic,
    Unplaced, compare, drained, guard, largest_fitting_shed, largest_shed_within_guard, predict,
    predict_edited, predict_nodes, shed, shed_from, spill,
};
use dw_routing::{Snapshot, SnapshotWriter, Table};

fn table(policy: &str, regions: &[(&str, &str)]) -> Table {
    Table::parse(&snapshot(policy, regions)).unwrap()
}

fn snapshot(policy: &str, regions: &[(&str, &str)]) -> Vec<u8> {
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
    SnapshotWriter::new().to_json(&snapshot)
}

/// The table after `edits`, built from the snapshot as a node would.
fn applied(policy: &str, regions: &[(&str, &str)], edits: &[RegionEdit]) -> Table {
    let mut values: BTreeMap<String, String> = regions
        .iter()
        .map(|(geo, value)| (geo.to_string(), value.to_string()))
        .collect();
    for edit in edits {
        values.insert(edit.geo.clone(), edit.to_json());
    }
    let list: Vec<(&str, &str)> = values
        .iter()
        .map(|(geo, value)| (geo.as_str(), value.as_str()))
        .collect();
    table(policy, &list)
}

fn traffic(geos: &[(&str, f64, f64)]) -> Traffic {
    Traffic::from_geos(
        geos.iter().map(|(geo, plain, sticky)| {
            (
                geo.to_string(),
                GeoRate {
                    plain: *plain,
                    sticky: *sticky,
                    bucket: 0.0,
                },
            )
        }),
        Unplaced::default(),
    )
    .unwrap()
}

fn request(origin: &str, percent: f64) -> ShedRequest {
    ShedRequest {
        origin: origin.into(),
        percent,
        regions: vec![],
    }
}

const REGIONS: &[(&str, &str)] = &[
    (
        "DE",
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#,
    ),
    (
        "AT",
        r#"{"shard":"eu-1","origins":["fra-a","vie-a","fra-b"],"weight":{"fra-a":2,"vie-a":1,"fra-b":1}}"#,
    ),
    (
        "CH",
        r#"{"shard":"eu-1","origins":["zrh-a","fra-a"],"weight":{"zrh-a":3,"fra-a":1,"old":4}}"#,
    ),
    (
        "LU",
        r#"{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":1}}"#,
    ),
    (
        "continent/EU",
        r#"{"shard":"eu-1","origins":["ams-a","ams-b"],"weight":{"ams-a":1,"ams-b":1}}"#,
    ),
    (
        "US",
        r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":1}}"#,
    ),
];

/// 30 % then 30 % again of sticky traffic sheds 51 % of the original, within the search's
/// granularity (a region's share moves in steps of at most 1 % of the origin's part).
#[test]
fn two_sheds_of_30_percent_shed_51_percent_of_sticky_traffic() {
    for pick in ["legacy", "rendezvous"] {
        let policy = format!(r#"{{"default":"US","pick":"{pick}"}}"#);
        let table = table(&policy, REGIONS);
        let traffic = traffic(&[
            ("DE", 0.0, 5000.0),
            ("AT", 0.0, 3000.0),
            ("CH", 0.0, 2000.0),
        ]);
        let original = predict(&table, &traffic).of("fra-a");
        let first = shed(&table, &traffic, &request("fra-a", 30.0)).unwrap();
        assert!(
            (first.achieved_percent - 30.0).abs() < 1.0,
            "{pick}: first shed achieved {}",
            first.achieved_percent
        );
        assert!(
            first.blocked.is_empty(),
            "LU has no traffic: it is not blocked, just left"
        );
        // From the values the first left, before they are committed...
        let second = shed_from(&table, &traffic, &first.edits, &request("fra-a", 30.0)).unwrap();
        let total = 100.0 * (1.0 - second.after.of("fra-a") / original);
        assert!(
            (total - 51.0).abs() < 1.5,
            "{pick}: two sheds took {total} %"
        );
        // ... and from the table they make once committed: the same plan.
        let committed = applied(&policy, REGIONS, &first.edits);
        let again = shed(&committed, &traffic, &request("fra-a", 30.0)).unwrap();
        assert!((again.after.of("fra-a") - second.after.of("fra-a")).abs() < 1e-6);
        // The plan's after is what the nodes would do with its values.
        let check = predict(&applied(&policy, REGIONS, &second.edits), &traffic);
        for (origin, load) in &second.after.origins {
            assert!((check.of(origin) - load).abs() < 1e-6, "{origin}");
        }
    }
}

#[test]
fn shed_100_is_the_drain() {
    let table = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[("DE", 10.0, 100.0), ("AT", 3.0, 0.0)]);
    let plan = shed(&table, &traffic, &request("fra-a", 100.0)).unwrap();
    let mut expected = Vec::new();
    for (geo, region) in table.regions() {
        if region.origins().iter().any(|o| o == "fra-a")
            && let Some(edit) = drained(geo, region, "fra-a")
        {
            expected.push(edit);
        }
    }
    assert_eq!(
        plan.edits, expected,
        "every region listing fra-a, traffic or not"
    );
    assert_eq!(plan.edits.len(), 3);
    assert_eq!(plan.blocked, ["LU"], "fra-a is LU's only origin");
    assert_eq!(plan.after.of("fra-a"), 0.0);
    assert!((plan.achieved_percent - 100.0).abs() < 1e-9);
    // The CH value drops its unlisted weight and renormalises to 100, as dwctl drain does.
    let ch = plan.edits.iter().find(|e| e.geo == "CH").unwrap();
    assert_eq!(ch.weight, [("zrh-a".to_owned(), 100)]);
}

#[test]
fn plain_traffic_moves_whole_and_the_plan_says_where() {
    // Plain geos only, many countries answered by one bucket: each candidate value moves
    // whole geos, and the search picks the value closest to the target.
    let regions: Vec<(&str, &str)> = vec![
        (
            "continent/EU",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#,
        ),
        (
            "US",
            r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":1}}"#,
        ),
    ];
    let table = table_of(&regions);
    let countries = [
        "FR", "ES", "IT", "PT", "NL", "BE", "PL", "SE", "NO", "FI", "DK", "IE", "GR", "CZ", "HU",
        "RO", "BG", "HR", "SK", "SI", "LT", "LV", "EE", "IS",
    ];
    let geos: Vec<(&str, f64, f64)> = countries
        .iter()
        .enumerate()
        .map(|(i, c)| (*c, 1.0 + i as f64, 0.0))
        .collect();
    let traffic = traffic(&geos);
    let before = predict(&table, &traffic);
    assert!(before.of("a") > 0.0);
    let plan = shed(&table, &traffic, &request("a", 50.0)).unwrap();
    let removed = before.of("a") - plan.after.of("a");
    assert_eq!(plan.base_load, before.of("a"));
    assert!((plan.achieved_percent - 100.0 * removed / plan.base_load).abs() < 1e-9);
    assert!(
        (plan.achieved_percent - 50.0).abs() < 10.0,
        "achieved {}",
        plan.achieved_percent
    );
    // Every geo whose origin changed is in the moves, with its whole rate.
    let mut moved = 0;
    for (geo, load) in &plan.after.geos {
        if load.plain != before.geos[geo].plain {
            let entry = plan
                .comparison
                .moves
                .iter()
                .find(|m| &m.geo == geo)
                .unwrap();
            assert_eq!(
                entry.plain.iter().map(|f| f.rate).sum::<f64>(),
                load.rate.plain
            );
            moved += 1;
        }
    }
    assert_eq!(moved, plan.comparison.moves.len());
    assert_eq!(plan.comparison, compare(&plan.before, &plan.after));
    // The nodes would do the same with the plan's values.
    let check = predict(
        &applied(r#"{"default":"US"}"#, &regions, &plan.edits),
        &traffic,
    );
    assert_eq!(check.origins, plan.after.origins);
}

#[test]
fn a_changed_list_can_move_geos_between_other_origins() {
    // Under the legacy pick, taking `a` out of a bucket rehashes its countries over b
    // and c: some move between those two.
    let regions: Vec<(&str, &str)> = vec![
        (
            "continent/EU",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#,
        ),
        (
            "US",
            r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":1}}"#,
        ),
    ];
    let table = table_of(&regions);
    let countries = [
        "FR", "ES", "IT", "PT", "NL", "BE", "PL", "SE", "NO", "FI", "DK", "IE",
    ];
    let traffic = traffic(&countries.map(|c| (c, 1.0, 0.0)));
    let plan = shed(&table, &traffic, &request("a", 100.0)).unwrap();
    let between_others = plan.comparison.moves.iter().any(|m| {
        m.plain
            .iter()
            .any(|f| f.from.as_deref() != Some("a") && f.from.is_some() && f.to.is_some())
    });
    assert!(
        between_others,
        "a geo moved between b and c: {:?}",
        plan.comparison.moves
    );
}

fn table_of(regions: &[(&str, &str)]) -> Table {
    table(r#"{"default":"US"}"#, regions)
}

#[test]
fn refuses_what_it_cannot_do() {
    let table = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[("DE", 1.0, 0.0)]);
    for percent in [0.0, -5.0, 100.5, f64::NAN] {
        assert!(
            shed(&table, &traffic, &request("fra-a", percent)).is_err(),
            "{percent}"
        );
    }
    assert!(shed(&table, &traffic, &request("nowhere", 10.0)).is_err());
    assert!(shed(&table, &traffic, &request("", 10.0)).is_err());
    let only = |regions: &[&str]| ShedRequest {
        regions: regions.iter().map(|g| g.to_string()).collect(),
        ..request("fra-a", 100.0)
    };
    assert!(
        shed(&table, &traffic, &only(&["FR"])).is_err(),
        "no region FR"
    );
    assert!(
        shed(&table, &traffic, &only(&["US"])).is_err(),
        "US does not list fra-a"
    );
    let plan = shed(&table, &traffic, &only(&["DE"])).unwrap();
    assert_eq!(plan.edits.len(), 1);
    assert_eq!(plan.edits[0].geo, "DE");
    let bucket = ShedRequest {
        regions: vec!["continent/EU".into()],
        ..request("ams-a", 100.0)
    };
    assert_eq!(
        shed(&table, &traffic, &bucket).unwrap().edits[0].geo,
        "continent/EU"
    );
}

#[test]
fn a_drain_that_overloads_is_named_with_the_shed_that_would_fit() {
    let table = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[("DE", 0.0, 1000.0)]);
    let capacities = BTreeMap::from([("fra-b".to_owned(), 1000.0)]);
    let drain = shed(&table, &traffic, &request("fra-a", 100.0)).unwrap();
    let report = guard(&drain.after, &capacities, DEFAULT_HEADROOM).unwrap();
    assert_eq!(report.overloads.len(), 1);
    assert_eq!(report.overloads[0].origin, "fra-b");
    let fit = largest_fitting_shed(&drain.before, &drain.after, "fra-a", &capacities, 0.8).unwrap();
    // fra-b has 500 of 800: 300 more of fra-a's 500 fit, 60 %.
    assert!((fit.percent - 60.0).abs() < 0.5, "{fit:?}");
    let partial = shed(&table, &traffic, &request("fra-a", fit.percent.floor())).unwrap();
    assert!(guard(&partial.after, &capacities, 0.8).unwrap().passes());
    // The search's own answer: the largest whole percent whose plan passes, and one more
    // does not.
    let best =
        largest_shed_within_guard(&table, &traffic, &request("fra-a", 100.0), &capacities, 0.8)
            .unwrap()
            .unwrap();
    let percent = best.target_percent;
    assert!((59.0..=60.0).contains(&percent), "{percent}");
    assert!(guard(&best.after, &capacities, 0.8).unwrap().passes());
    let over = shed(&table, &traffic, &request("fra-a", percent + 1.0)).unwrap();
    assert!(!guard(&over.after, &capacities, 0.8).unwrap().passes());
    // Nothing fits when fra-b is full already.
    let full = BTreeMap::from([("fra-b".to_owned(), 600.0)]);
    assert!(
        largest_shed_within_guard(&table, &traffic, &request("fra-a", 100.0), &full, 0.8)
            .unwrap()
            .is_none()
    );
}

#[test]
fn spill_adds_the_next_step_s_origin_with_just_enough_weight() {
    let table = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[("DE", 0.0, 1500.0)]);
    let capacities = BTreeMap::from([
        ("fra-b".to_owned(), 1000.0),
        ("ams-a".to_owned(), 2000.0),
        ("ams-b".to_owned(), 2000.0),
        ("iad-a".to_owned(), 100000.0),
    ]);
    let drain = shed(&table, &traffic, &request("fra-a", 100.0)).unwrap();
    assert!(!guard(&drain.after, &capacities, 0.8).unwrap().passes());
    let request = SpillRequest {
        origin: "fra-a".into(),
        capacities: capacities.clone(),
        headroom: 0.8,
        declared: BTreeMap::new(),
    };
    let plan = spill(&table, &traffic, &drain.edits, &request).unwrap();
    assert!(plan.overloads.is_empty(), "{:?}", plan.overloads);
    assert_eq!(plan.added.len(), 1);
    let added = &plan.added[0];
    assert_eq!(
        (added.region.as_str(), added.origin.as_str()),
        ("DE", "ams-a")
    );
    assert_eq!(added.from, "continent/EU");
    assert!(plan.after.of("fra-b") <= 800.0);
    assert_eq!(plan.after.of("fra-a"), 0.0);
    // Just enough: one unit less leaves fra-b above its limit.
    let mut less = plan.edits.clone();
    let de = less.iter_mut().find(|e| e.geo == "DE").unwrap();
    let at = de.weight.iter().position(|(o, _)| o == "ams-a").unwrap();
    de.weight[at].1 -= 1;
    let load = predict_edited(&table, &traffic, &less).unwrap();
    assert!(load.of("fra-b") > 800.0, "{}", load.of("fra-b"));
    // The spilled plan is what the nodes would do with its values.
    let check = predict(
        &applied(r#"{"default":"US"}"#, REGIONS, &plan.edits),
        &traffic,
    );
    assert!((check.of("ams-a") - plan.after.of("ams-a")).abs() < 1e-6);
}

#[test]
fn spill_only_uses_origins_serving_the_shard_or_declared() {
    let table = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[("DE", 0.0, 1500.0)]);
    // ams-a and ams-b cannot take anything: only iad-a (shard us-1) is left, and it is not
    // a server of eu-1, so the overload stays and is reported.
    let capacities = BTreeMap::from([
        ("fra-b".to_owned(), 1000.0),
        ("ams-a".to_owned(), 0.0),
        ("ams-b".to_owned(), 0.0),
        ("iad-a".to_owned(), 100000.0),
    ]);
    let drain = shed(&table, &traffic, &request("fra-a", 100.0)).unwrap();
    let mut request = SpillRequest {
        origin: "fra-a".into(),
        capacities,
        headroom: 0.8,
        declared: BTreeMap::new(),
    };
    let plan = spill(&table, &traffic, &drain.edits, &request).unwrap();
    assert!(plan.added.is_empty());
    assert_eq!(plan.overloads[0].origin, "fra-b");
    // Declared for eu-1, iad-a may take it.
    request.declared.insert("eu-1".into(), vec!["iad-a".into()]);
    let plan = spill(&table, &traffic, &drain.edits, &request).unwrap();
    assert_eq!(plan.added[0].origin, "iad-a");
    assert_eq!(plan.added[0].from, "declared");
    assert!(plan.overloads.is_empty());
}

#[test]
fn rounding_of_per_node_parts_is_not_a_move() {
    // The same values in two tables: a third of the fleet "staged" on an identical copy.
    // Per-node parts (1/3 and 2/3 of every rate) add up with rounding, not with moves.
    let fleet = table(r#"{"default":"US"}"#, REGIONS);
    let copy = table(r#"{"default":"US"}"#, REGIONS);
    let traffic = traffic(&[
        ("DE", 0.1, 0.7),
        ("AT", 1e11 / 3.0, 0.3),
        ("CH", 0.3, 1e9 / 7.0),
    ]);
    let tables = NodeTables {
        fleet: &fleet,
        nodes: BTreeMap::from([("n1".to_owned(), &copy)]),
        fleet_size: 3,
    };
    let staged = predict_nodes(&tables, &traffic).unwrap();
    assert!(staged.assumed_fleet_mix);
    let whole = predict(&fleet, &traffic);
    let comparison = compare(&whole, &staged);
    assert!(comparison.moves.is_empty(), "{:?}", comparison.moves);
    assert_eq!(comparison.changed_origins().count(), 0);
}

/// Random tables, traffic and capacities: a drain of the busiest origin with a spill.
/// Whatever the spill adds comes from the region's next steps and serves its shard; its
/// predicted load is the one of its values; when it reports no overload, the guard passes.
#[test]
fn spill_on_random_tables_keeps_its_promises() {
    const ORIGINS: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
    const GEOS: [&str; 10] = [
        "DE",
        "FR",
        "GB",
        "US",
        "JP",
        "DE-BY",
        "US-CA",
        "continent/EU",
        "continent/NA",
        "continent/AS",
    ];
    let mut seed = 0x1234_5678_9abc_def1u64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    let (mut spilled, mut passed) = (0, 0);
    for case in 0..60 {
        let mut regions: Vec<(String, String)> = Vec::new();
        for geo in GEOS {
            let mut origins: Vec<&str> = Vec::new();
            for _ in 0..1 + next(3) {
                let origin = ORIGINS[next(6) as usize];
                if !origins.contains(&origin) {
                    origins.push(origin);
                }
            }
            let weight: Vec<String> = origins
                .iter()
                .map(|o| format!(r#""{o}":{}"#, 1 + next(9)))
                .collect();
            let quoted: Vec<String> = origins.iter().map(|o| format!(r#""{o}""#)).collect();
            regions.push((
                geo.to_owned(),
                format!(
                    r#"{{"shard":"s{}","origins":[{}],"weight":{{{}}}}}"#,
                    next(2),
                    quoted.join(","),
                    weight.join(",")
                ),
            ));
        }
        let list: Vec<(&str, &str)> = regions
            .iter()
            .map(|(g, v)| (g.as_str(), v.as_str()))
            .collect();
        let policy = r#"{"default":"US","failover":["continent/EU"]}"#;
        let table = table(policy, &list);
        let geos: Vec<(&str, f64, f64)> =
            ["DE", "FR", "GB", "US", "JP", "DE-BY", "US-CA", "IT", "CN"]
                .iter()
                .map(|geo| (*geo, next(100) as f64, next(100) as f64))
                .collect();
        let traffic = traffic(&geos);
        let before = predict(&table, &traffic);
        let (busiest, _) = before
            .origins
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap();
        let Ok(drain) = shed(&table, &traffic, &request(busiest, 100.0)) else {
            continue;
        };
        let capacities: BTreeMap<String, f64> = ORIGINS
            .iter()
            .map(|o| (o.to_string(), before.of(o) * 1.25 + next(200) as f64))
            .collect();
        let spill_request = SpillRequest {
            origin: busiest.clone(),
            capacities: capacities.clone(),
            headroom: 0.8,
            declared: BTreeMap::new(),
        };
        let plan = spill(&table, &traffic, &drain.edits, &spill_request).unwrap();
        assert_eq!(
            plan.after,
            predict_edited(&table, &traffic, &plan.edits).unwrap(),
            "case {case}"
        );
        let report = guard(&plan.after, &capacities, 0.8).unwrap();
        assert_eq!(report.overloads, plan.overloads, "case {case}");
        if plan.overloads.is_empty() {
            passed += 1;
        }
        for added in &plan.added {
            spilled += 1;
            assert_ne!(&added.origin, busiest);
            let region = table.region(added.region.as_bytes()).or_else(|| {
                let code = added.region.strip_prefix("continent/")?;
                table
                    .bucket(dw_routing::Continent::parse(code.as_bytes())?)
                    .and_then(|index| table.region_at(index))
            });
            let shard = region.unwrap().shard();
            let serves = table
                .regions()
                .any(|(_, other)| other.shard() == shard && other.weight(&added.origin) > 0);
            assert!(serves, "case {case}: {added:?} does not serve {shard}");
            assert!(capacities.contains_key(&added.origin));
            let edit = plan.edits.iter().find(|e| e.geo == added.region).unwrap();
            assert_eq!(edit.weight_of(&added.origin), added.weight);
        }
    }
    assert!(
        spilled > 5 && passed > 20,
        "spilled {spilled}, passed {passed}"
    );
}
