//! `dwctl traffic`'s report from fixed readings: shares, the "why no answers" causes, the
//! etcd state per origin, and escaping of what Prometheus and etcd hold.

use super::*;
use crate::plan::drain_record::DrainRecord;
use crate::plan::model::Entry;

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
            schema: crate::plan::drain_record::DRAIN_RECORD_SCHEMA,
            origin: "lis-a".into(),
            reason: "INC-1".into(),
            source: "cli".into(),
            by: "op@host".into(),
            at: "2026-12-04T05:00:00Z".into(),
            regions: BTreeMap::new(),
            stages: BTreeMap::new(),
            predicted: None,
            shed: None,
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
    let report2 = super::report(
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
    let mut json = report.clone();
    json["window"] = json!("5m");
    json["prometheus"] = json!("http://p:9090");
    assert!(describe(&json).starts_with("no dw_router_answers_total in Prometheus"));
}

#[test]
fn values_from_prometheus_and_etcd_are_escaped() {
    let mut state = state();
    state.regions.insert(
        "X\u{1b}]0;t\u{7}".into(),
        region(r#"{"shard":"s","origins":["o\u001b[31m"],"weight":{"o\u001b[31m":100}}"#),
    );
    let mut json = report(&readings(), &state, &OriginListing::default(), &[]);
    json["window"] = json!("5m");
    json["prometheus"] = json!("http://p:9090");
    // JSON stays exact.
    assert!(
        json["origins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["origin"] == "evil\u{1b}[2J")
    );
    let text = describe(&json);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("evil\\u{1b}[2J"), "{text}");
    assert!(text.contains("o\\u{1b}[31m"), "{text}");
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
fn the_queries_escape_the_geo_and_use_the_window() {
    use clap::Parser;
    let cli = crate::cli::Cli::parse_from([
        "dwctl",
        "traffic",
        "--geo",
        "D\"E",
        "--window",
        "2m",
        "--by-node",
        "--top",
        "3",
    ]);
    let crate::cli::Command::Traffic(args) = cli.command else {
        panic!()
    };
    let queries = queries(&args);
    assert_eq!(queries.len(), 8);
    assert_eq!(
        queries[0].1,
        "sum(rate(dw_router_answers_total{geo=\"D\\\"E\"}[120s]))"
    );
    assert!(
        queries[3]
            .1
            .starts_with("topk by (origin) (3, sum by (origin, geo)")
    );
    assert_eq!(queries[7].0, "nodes");
}

#[test]
fn text_names_at_most_shown_regions_per_origin() {
    let mut state = State::default();
    let value = r#"{"shard":"s","origins":["o"],"weight":{"o":100}}"#;
    for i in 0..SHOWN_REGIONS {
        state.regions.insert(format!("R{i}"), region(value));
    }
    let mut json = report(&Readings::default(), &state, &OriginListing::default(), &[]);
    json["window"] = json!("5m");
    let text = describe(&json);
    assert!(
        text.contains(&format!("R{} 100, registered", SHOWN_REGIONS - 1)),
        "{text}"
    );
    state.regions.insert("S".into(), region(value));
    let mut json = report(&Readings::default(), &state, &OriginListing::default(), &[]);
    json["window"] = json!("5m");
    let text = describe(&json);
    assert!(
        text.contains("and 1 more (--output json lists them)"),
        "{text}"
    );
    assert_eq!(
        json["origins"][0]["etcd"]["regions"]
            .as_object()
            .unwrap()
            .len(),
        SHOWN_REGIONS + 1
    );
}

#[test]
fn capacity_and_share_used_per_origin() {
    let mut listing = OriginListing::default();
    listing.capacities.insert("fra-a".into(), 200.0);
    listing.capacities.insert("nbo-a".into(), 1000.0);
    listing.headroom = 0.7;
    let mut report = report(&readings(), &state(), &listing, &[]);
    // fra-a answers 150/s of 200: 75 % used, above a 70 % guard.
    let fra = origin(&report, "fra-a");
    assert_eq!(fra["capacity"]["answers_per_s"], 200);
    assert_eq!(fra["capacity"]["used"], 0.75);
    assert_eq!(fra["capacity"]["over_guard"], true);
    assert_eq!(origin(&report, "nbo-a")["capacity"]["over_guard"], false);
    assert!(origin(&report, "lis-a")["capacity"].is_null());
    report["window"] = json!("5m");
    let text = describe(&report);
    assert!(
        text.contains("capacity 200/s, 75% used (the guard refuses above 70%): ABOVE THE GUARD"),
        "{text}"
    );
    assert!(text.contains("capacity 1000/s, 0% used"), "{text}");
    assert!(text.contains("capacity not set"), "{text}");
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
    let table = crate::plan::prediction::table(&state, dw_routing::DEFAULT_PREFIX, None);
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

/// Issue 40 #7c: a rate of NaN, +Inf or below 0 was read silently as 0. The report counts
/// them and says so.
#[test]
fn rates_that_are_not_numbers_are_counted_not_hidden() {
    let clean = report(&readings(), &state(), &OriginListing::default(), &[]);
    assert_eq!(clean["not_numbers"], 0);
    assert!(!describe(&clean).contains("were not numbers"));
    let mut readings = readings();
    readings
        .origins
        .push(sample(&[("origin", "nbo-a")], f64::NAN));
    readings
        .geos
        .push(sample(&[("origin", "nbo-a"), ("geo", "KE")], f64::INFINITY));
    readings
        .keys
        .push(sample(&[("origin", "nbo-a"), ("key", "KE")], -1.0));
    let report = report(&readings, &state(), &OriginListing::default(), &[]);
    assert_eq!(report["not_numbers"], 3);
    let nbo = origin(&report, "nbo-a");
    assert_eq!(nbo["per_second"], 0.0);
    assert_eq!(nbo["keys"][0]["per_second"], 0.0, "shown as 0, not -1");
    assert!(
        describe(&report)
            .contains("3 rate(s) from Prometheus were not numbers (NaN, infinite or below 0)"),
        "{}",
        describe(&report)
    );
}
