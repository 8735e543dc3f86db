//! `dwctl traffic`'s report from fixed readings: shares, the "why no answers" causes, the
//! etcd state per origin, capacities, and the JSON it serialises to.

use serde_json::Value;

use super::*;
use crate::drain_record::DrainRecord;
use crate::model::Entry;

/// The report of fixed readings, as `--output json` holds it.
fn report(readings: &Readings, state: &State, listing: &OriginListing, only: &[String]) -> Value {
    serde_json::to_value(super::report(readings, state, listing, only)).expect("a JSON report")
}

fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
    Sample {
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        value,
    }
}

fn region(json: &str) -> Entry {
    Entry {
        raw: json.as_bytes().to_vec(),
        mod_revision: 2,
    }
}

fn state() -> State {
    let mut state = State {
        revision: 42,
        ..State::default()
    };
    state.regions.insert(
        "DE".into(),
        region(r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":100,"fra-b":0}}"#),
    );
    state.regions.insert(
        "KE".into(),
        region(r#"{"shard":"af-1","origins":["nbo-a"],"weight":{"nbo-a":100}}"#),
    );
    state.regions.insert(
        "PT".into(),
        region(r#"{"shard":"eu-1","origins":["lis-a", "fra-a"],"weight":{"lis-a":50,"fra-a":50}}"#),
    );
    state
}

fn readings() -> Readings {
    Readings {
        total: vec![sample(&[], 200.0)],
        overflow: vec![sample(&[], 0.0)],
        origins: vec![
            sample(&[("origin", "fra-a")], 150.0),
            sample(&[("origin", "evil\u{1b}[2J")], 50.0),
        ],
        geos: vec![
            sample(&[("origin", "fra-a"), ("geo", "DE")], 140.0),
            sample(&[("origin", "fra-a"), ("geo", "PT")], 10.0),
        ],
        keys: vec![sample(&[("origin", "fra-a"), ("key", "DE")], 140.0)],
        steps: vec![sample(&[("origin", "fra-a"), ("step", "country")], 150.0)],
        nodes: vec![],
        regions: vec![
            sample(&[("key", "DE")], 140.0),
            sample(&[("key", "PT")], 10.0),
        ],
    }
}

fn origin<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["origins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["origin"] == id)
        .unwrap_or_else(|| panic!("no {id} in {report:#}"))
}

#[test]
fn shares_and_top_lists_per_origin() {
    let report = report(&readings(), &state(), &OriginListing::default(), &[]);
    assert_eq!(report["per_second"], 200.0);
    let fra = origin(&report, "fra-a");
    assert_eq!(fra["per_second"], 150.0);
    assert_eq!(fra["share"], 0.75);
    assert_eq!(fra["geos"][0]["geo"], "DE");
    assert_eq!(fra["geos"][1]["geo"], "PT");
    assert_eq!(fra["etcd"]["regions"]["DE"], 100);
    assert_eq!(fra["etcd"]["regions"]["PT"], 50);
    assert!(fra["why"].is_null());
    // Busiest first.
    assert_eq!(report["origins"][0]["origin"], "fra-a");
}

#[test]
fn says_why_an_origin_gets_no_answers() {
    let mut listing = OriginListing::default();
    listing.registered.insert("gone-a".into());
    listing.drains.insert(
        "lis-a".into(),
        DrainRecord {
            schema: crate::drain_record::DRAIN_RECORD_SCHEMA,
            origin: "lis-a".into(),
            reason: "INC-1".into(),
            source: "cli".into(),
            by: "op@host".into(),
            at: "2026-12-04T05:00:00Z".into(),
            regions: BTreeMap::new(),
            stages: BTreeMap::new(),
            predicted: None,
            shed: None,
            parts: Vec::new(),
        },
    );
    let report = report(&readings(), &state(), &listing, &[]);
    // Weight 0 in its only region.
    let fra_b = origin(&report, "fra-b");
    assert_eq!(fra_b["etcd"]["weight_zero"][0], "DE");
    assert!(
        fra_b["why"][0]
            .as_str()
            .unwrap()
            .contains("weight 0 in every region")
    );
    // Weighted, but its region answered no one.
    let nbo = origin(&report, "nbo-a");
    assert!(
        nbo["why"][0].as_str().unwrap().contains("answered no one"),
        "{nbo:#}"
    );
    // Drained (and still listed in PT here, whose answers went to fra-a).
    let lis = origin(&report, "lis-a");
    assert_eq!(lis["etcd"]["drained"]["reason"], "INC-1");
    assert!(
        lis["why"][0].as_str().unwrap().starts_with("drained"),
        "{lis:#}"
    );
    assert!(
        lis["why"][1]
            .as_str()
            .unwrap()
            .contains("none of it with this origin"),
        "{lis:#}"
    );
    // In no region, lease gone.
    let gone = origin(&report, "gone-a");
    assert_eq!(gone["etcd"]["registered"], "down");
    assert!(gone["why"][0].as_str().unwrap().contains("in no region"));
    assert!(gone["why"][1].as_str().unwrap().contains("lease is gone"));
    // Asked for by name, unknown everywhere.
    let report2 = self::report(
        &readings(),
        &state(),
        &OriginListing::default(),
        &["nowhere".into()],
    );
    assert_eq!(report2["origins"].as_array().unwrap().len(), 1);
    assert!(
        origin(&report2, "nowhere")["why"][0]
            .as_str()
            .unwrap()
            .contains("in no region")
    );
}

#[test]
fn no_series_at_all_says_so() {
    let empty = Readings::default();
    let report = report(&empty, &state(), &OriginListing::default(), &[]);
    assert!(report["per_second"].is_null());
    let fra = origin(&report, "fra-a");
    assert!(fra["share"].is_null());
    assert!(fra["why"][0].as_str().unwrap().contains("scraping"));
}

#[test]
fn region_keys_match_however_the_counters_write_them() {
    let by_key: BTreeMap<&str, f64> = [("DE", 1.0), ("region/AT", 2.0), ("a%20b", 4.0)].into();
    assert_eq!(region_answers(&by_key, "DE"), 1.0);
    assert_eq!(region_answers(&by_key, "AT"), 2.0);
    assert_eq!(region_answers(&by_key, "a b"), 4.0);
    assert_eq!(region_answers(&by_key, "FR"), 0.0);
}

#[test]
fn capacity_and_share_used_per_origin() {
    let mut listing = OriginListing::default();
    listing.capacities.insert("fra-a".into(), 200.0);
    listing.capacities.insert("nbo-a".into(), 1000.0);
    listing.headroom = 0.7;
    let report = report(&readings(), &state(), &listing, &[]);
    // fra-a answers 150/s of 200: 75 % used, above a 70 % guard.
    let fra = origin(&report, "fra-a");
    assert_eq!(fra["capacity"]["answers_per_s"], 200);
    assert_eq!(fra["capacity"]["used"], 0.75);
    assert_eq!(fra["capacity"]["over_guard"], true);
    assert_eq!(origin(&report, "nbo-a")["capacity"]["over_guard"], false);
    assert!(origin(&report, "lis-a")["capacity"].is_null());
}
#[test]
fn the_json_keeps_its_field_order_and_numbers() {
    let mut listing = OriginListing::default();
    listing.capacities.insert("fra-a".into(), 200.0);
    let report = report(&readings(), &state(), &listing, &[]);
    let keys = |value: &Value| {
        value
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(
        keys(&report),
        [
            "per_second",
            "overflow_per_second",
            "revision",
            "unreadable_regions",
            "capacity_headroom",
            "capacities_unreadable",
            "origins"
        ]
    );
    let fra = origin(&report, "fra-a");
    assert_eq!(
        keys(fra),
        [
            "capacity",
            "origin",
            "per_second",
            "share",
            "geos",
            "keys",
            "steps",
            "nodes",
            "etcd",
            "why"
        ]
    );
    assert_eq!(
        keys(&fra["etcd"]),
        [
            "regions",
            "weight_zero",
            "registered",
            "drained",
            "malformed_drain",
            "stages",
            "weighted_regions_per_second"
        ]
    );
    assert_eq!(
        keys(&fra["capacity"]),
        ["answers_per_s", "used", "over_guard"]
    );
    assert_eq!(keys(&fra["geos"][0]), ["geo", "per_second"]);
    // Whole numbers of the capacity and the headroom are integers, rates stay floats.
    assert_eq!(fra["capacity"]["answers_per_s"].to_string(), "200");
    assert_eq!(report["capacity_headroom"].to_string(), "0.8");
    assert_eq!(fra["per_second"].to_string(), "150.0");
}

/// Issue 40 (first install): sin-a has weight 50 in JP, but JP's answers without a sticky
/// key all go to the origin JP's hash picks. "why no answers" names that cause, not stale
/// nodes.
#[test]
fn names_the_geo_whose_hash_picks_another_origin() {
    let mut state = state();
    state.regions.insert(
        "JP".into(),
        region(r#"{"shard":"ap-1","origins":["sjc-a","sin-a"],"weight":{"sjc-a":50,"sin-a":50}}"#),
    );
    let table = crate::prediction::table(&state, dw_routing::DEFAULT_PREFIX, None);
    let picked = table.resolve(b"JP", None).unwrap().origin.to_owned();
    let idle = if picked == "sjc-a" { "sin-a" } else { "sjc-a" };
    let mut readings = readings();
    readings.origins.push(sample(&[("origin", &picked)], 30.0));
    readings.regions.push(sample(&[("key", "JP")], 30.0));
    let first = report(&readings, &state, &OriginListing::default(), &[]);
    let why = origin(&first, idle)["why"][0].as_str().unwrap().to_owned();
    assert!(
        why.contains(&format!(
            "none of it with this origin: the whole geo JP hashes to {picked}"
        )),
        "{why}"
    );
    assert!(!why.contains("are the nodes current"), "{why}");
    // The picked one answers: no why.
    assert!(origin(&first, &picked)["why"].is_null());
    // Where a geo of the region does hash to the origin, the old question stands.
    let mut stale = readings.clone();
    stale
        .origins
        .retain(|sample| sample.label("origin") != picked);
    let second = report(&stale, &state, &OriginListing::default(), &[]);
    let why = origin(&second, &picked)["why"][0]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(why.contains("are the nodes current"), "{why}");
}

/// Issue 41: with visitor buckets, an origin whose weight is apportioned no bucket gets
/// no bucketed answer either; "why no answers" names the assignment. One with a bucket
/// is not explained away by the hash.
#[test]
fn names_the_assignment_that_gives_an_origin_no_bucket() {
    let mut state = state();
    state.policy = Some(crate::model::Entry {
        raw: br#"{"buckets":2}"#.to_vec(),
        mod_revision: 3,
    });
    state.regions.insert(
        "JP".into(),
        region(r#"{"shard":"ap-1","origins":["sjc-a","sin-a"],"weight":{"sjc-a":1000,"sin-a":1}}"#),
    );
    let table = crate::prediction::table(&state, dw_routing::DEFAULT_PREFIX, None);
    let picked = table.resolve(b"JP", None).unwrap().origin.to_owned();
    assert_eq!(picked, "sjc-a", "the hash of a 1000/1 region");
    let mut uneven = readings();
    uneven.origins.push(sample(&[("origin", "sjc-a")], 30.0));
    uneven.regions.push(sample(&[("key", "JP")], 30.0));
    let first = report(&uneven, &state, &OriginListing::default(), &[]);
    let why: Vec<String> = origin(&first, "sin-a")["why"]
        .as_array()
        .unwrap()
        .iter()
        .map(|line| line.as_str().unwrap().to_owned())
        .collect();
    assert!(
        why[0].contains("the whole geo JP hashes to sjc-a"),
        "{why:?}"
    );
    assert!(
        why[1].contains("give it no bucket")
            && why[1].contains("region JP gives it 0 of 2 buckets"),
        "{why:?}"
    );
    // 50/50 at N = 2: one bucket each, so the assignment is no reason.
    let mut even = state.clone();
    even.regions.insert(
        "JP".into(),
        region(r#"{"shard":"ap-1","origins":["sjc-a","sin-a"],"weight":{"sjc-a":50,"sin-a":50}}"#),
    );
    let table = crate::prediction::table(&even, dw_routing::DEFAULT_PREFIX, None);
    let picked = table.resolve(b"JP", None).unwrap().origin.to_owned();
    let idle = if picked == "sjc-a" { "sin-a" } else { "sjc-a" };
    let mut halves = readings();
    halves.origins.push(sample(&[("origin", &picked)], 30.0));
    halves.regions.push(sample(&[("key", "JP")], 30.0));
    let second = report(&halves, &even, &OriginListing::default(), &[]);
    let why = origin(&second, idle)["why"].to_string();
    assert!(why.contains("hashes to"), "{why}");
    assert!(!why.contains("no bucket"), "{why}");
}
