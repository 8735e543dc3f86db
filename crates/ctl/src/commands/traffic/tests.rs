//! `dwctl traffic`'s text from fixed readings (the report itself is tested in
//! crates/ctl-plan/src/traffic_report/tests.rs): what it says without series, escaping of
//! what Prometheus and etcd hold, the regions named, capacities; and its queries.

use super::*;
use crate::ops::commit::State;
use crate::ops::origin::OriginListing;
use crate::ops::prometheus::Sample;
use crate::plan::model::Entry;
use crate::plan::traffic_report::Readings;

/// Where the fixed readings came from.
fn source(prometheus: &str) -> Source {
    Source {
        prometheus: prometheus.into(),
        window: "5m".into(),
        geo: None,
    }
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

#[test]
fn no_series_at_all_says_so() {
    let empty = Readings::default();
    let report = report(&empty, &state(), &OriginListing::default(), &[]);
    assert!(
        describe(&report, &source("http://p:9090"), &AutopilotView::NoLeader)
            .starts_with("no dw_router_answers_total in Prometheus")
    );
}

#[test]
fn values_from_prometheus_and_etcd_are_escaped() {
    let mut state = state();
    state.regions.insert(
        "X\u{1b}]0;t\u{7}".into(),
        region(r#"{"shard":"s","origins":["o\u001b[31m"],"weight":{"o\u001b[31m":100}}"#),
    );
    let report = report(&readings(), &state, &OriginListing::default(), &[]);
    let json = serde_json::to_value(&report).unwrap();
    // JSON stays exact.
    assert!(
        json["origins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["origin"] == "evil\u{1b}[2J")
    );
    let text = describe(&report, &source("http://p:9090"), &AutopilotView::NoLeader);
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
    assert!(text.contains("evil\\u{1b}[2J"), "{text}");
    assert!(text.contains("o\\u{1b}[31m"), "{text}");
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
    let queries = crate::ops::traffic::queries(&query_of(&args));
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
    let report = report(&Readings::default(), &state, &OriginListing::default(), &[]);
    let text = describe(&report, &source(""), &AutopilotView::NoLeader);
    assert!(
        text.contains(&format!("R{} 100, registered", SHOWN_REGIONS - 1)),
        "{text}"
    );
    state.regions.insert("S".into(), region(value));
    let report = super::report(&Readings::default(), &state, &OriginListing::default(), &[]);
    let text = describe(&report, &source(""), &AutopilotView::NoLeader);
    assert!(
        text.contains("and 1 more (--output json lists them)"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
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
    let report = report(&readings(), &state(), &listing, &[]);
    let text = describe(&report, &source(""), &AutopilotView::NoLeader);
    assert!(
        text.contains("capacity 200/s, 75% used (the guard refuses above 70%): ABOVE THE GUARD"),
        "{text}"
    );
    assert!(text.contains("capacity 1000/s, 0% used"), "{text}");
    assert!(text.contains("capacity not set"), "{text}");
}

#[test]
fn what_the_autopilot_holds_shows_under_its_origin_and_a_fleet_line() {
    use crate::plan::autopilot::status::{AutopilotStatus, OriginStatus, Since};
    let mut listing = OriginListing::default();
    listing.capacities.insert("fra-a".into(), 200.0);
    let report = report(&readings(), &state(), &listing, &[]);
    // No leader: one line says so, no origin line.
    let text = describe(&report, &source(""), &AutopilotView::NoLeader);
    assert!(
        text.contains("autopilot: no instance leads (no autopilot/leader key)"),
        "{text}"
    );
    assert!(!text.contains("  autopilot:"), "{text}");
    // A leader holding fra-a: the line under fra-a, escaped; nothing under the others.
    let status = AutopilotStatus {
        leader: "ap-1".into(),
        leading_since: "2026-01-01T00:00:00Z".into(),
        origins: std::collections::BTreeMap::from([(
            "fra-a".to_owned(),
            OriginStatus {
                relieving_since: Some("2026-01-01T00:01:00Z".into()),
                holding: Some(Since {
                    why: "it acted on it less than --min-interval ago\u{1b}[2J".into(),
                    since: "2026-01-01T00:01:02Z".into(),
                }),
                hold_reason: Some("min_interval".into()),
                over_target_since: Some("2026-01-01T00:00:58Z".into()),
                next_action_at: Some("2026-01-01T00:01:30Z".into()),
            },
        )]),
        ..AutopilotStatus::default()
    };
    let view = AutopilotView::from_values(Some("ap-1"), Some(&status.to_text()));
    let text = describe(&report, &source(""), &view);
    assert!(
        text.contains("autopilot: ap-1 leads since 2026-01-01T00:00:00Z\n"),
        "{text}"
    );
    let fra = text.find("\nfra-a ").expect("fra-a's block");
    let line = text[fra..]
        .lines()
        .find(|line| line.starts_with("  autopilot:"))
        .expect("fra-a's autopilot line");
    assert_eq!(
        line,
        "  autopilot: relieving since 2026-01-01T00:01:00Z; holding (it acted on it less \
         than --min-interval ago\\u{1b}[2J) since 2026-01-01T00:01:02Z; over target since \
         2026-01-01T00:00:58Z; next action allowed at 2026-01-01T00:01:30Z"
    );
    assert_eq!(text.matches("  autopilot:").count(), 1, "{text}");
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "{text:?}"
    );
}
