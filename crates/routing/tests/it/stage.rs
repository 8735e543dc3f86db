//! dw_routing::stage: the cohort function, the overlay rule and the stage record's limits,
//! through the crate's public API (docs/routing.md, "Stages").

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::stage::{
    AppliedStage, COHORT_POINTS, Cohort, MAX_STAGE_ID_BYTES, MAX_STAGED_KEYS, Node, STAGE_SCHEMA,
    Stage, check_stage_id, cohort_point, overlay,
};
use dw_routing::{Snapshot, Table};
use xxhash_rust::xxh3::xxh3_64;

const P: &str = "/dw/routing/";

fn stage(id: &str, cohort: Cohort, kvs: &[(&str, Option<&str>)]) -> Stage {
    Stage {
        schema: STAGE_SCHEMA,
        id: id.into(),
        cohort,
        kvs: kvs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.map(str::to_owned)))
            .collect(),
        base: BTreeMap::new(),
        created_by: String::new(),
        created_at: String::new(),
        reason: String::new(),
    }
}

fn with(stages: &[Stage]) -> Snapshot {
    let mut s = Snapshot::new(50, P);
    s.kvs.insert(format!("{P}region/DE"), "de-current".into());
    s.kvs.insert(format!("{P}region/FR"), "fr-current".into());
    s.kvs
        .insert(format!("{P}policy/global"), "policy-current".into());
    for stage in stages {
        s.kvs
            .insert(format!("{P}stage/{}", stage.id), stage.to_json());
    }
    s
}

fn node<'a>(id: &'a str, labels: &'a BTreeMap<String, String>) -> Node<'a> {
    Node { id, labels }
}

#[test]
fn the_point_is_xxh3_of_id_nul_node_modulo_10000() {
    // xxh3_64("s\0n") computed independently of this function's code path.
    let expected = (xxh3_64(b"s\0n") % 10_000) as u16;
    assert_eq!(cohort_point("s", "n"), expected);
    // Order matters: the stage id comes first.
    assert_ne!(
        xxh3_64(b"s\0n"),
        xxh3_64(b"n\0s"),
        "test inputs must hash apart"
    );
    // Spread: 10,000 nodes at 20 % land within a few percent of 2,000.
    let members = (0..10_000)
        .filter(|i| cohort_point("eu-map", &format!("edge-{i}")) < 2_000)
        .count();
    assert!((1_800..2_200).contains(&members), "{members}");
}

/// The same fixtures as the PHP cohort function's test (tests/differential/
/// twin-selftest.php, `cohort points`), computed there with PHP's hash('xxh3').
const POINT_FIXTURES: [(&str, &str, u16); 6] = [
    ("eu-map", "edge-1", 1139),
    ("eu-map", "edge-2", 8098),
    ("a", "", 6843),
    ("", "b", 631),
    ("stage.x_1", "fra-17", 7569),
    ("z", "é", 2217),
];

#[test]
fn the_point_agrees_with_php_on_fixtures() {
    for (stage, node, point) in POINT_FIXTURES {
        assert_eq!(cohort_point(stage, node), point, "{stage:?} {node:?}");
    }
}

#[test]
fn a_larger_cohort_holds_every_node_of_a_smaller_one() {
    let labels = BTreeMap::new();
    for i in 0..2_000 {
        let id = format!("n{i}");
        let n = node(&id, &labels);
        let small = Cohort {
            points: 500,
            ..Cohort::default()
        };
        let large = Cohort {
            points: 2_500,
            ..Cohort::default()
        };
        if small.contains("st", &n) {
            assert!(large.contains("st", &n));
        }
    }
    assert!(!Cohort::default().contains("st", &node("x", &labels)));
    let all = Cohort {
        points: COHORT_POINTS,
        ..Cohort::default()
    };
    assert!(all.contains("st", &node("x", &labels)));
}

#[test]
fn nodes_and_labels_select_explicitly() {
    let fra = BTreeMap::from([("site".to_string(), "fra".to_string())]);
    let ams = BTreeMap::from([("site".to_string(), "ams".to_string())]);
    let cohort = Cohort {
        points: 0,
        nodes: BTreeSet::from(["edge-1".to_string()]),
        labels: fra.clone(),
    };
    assert!(cohort.contains("s", &node("edge-1", &ams)));
    assert!(cohort.contains("s", &node("edge-2", &fra)));
    assert!(!cohort.contains("s", &node("edge-2", &ams)));
}

#[test]
fn members_serve_staged_values_and_others_current_ones() {
    let labels = BTreeMap::new();
    let s = stage(
        "move-de",
        Cohort {
            nodes: BTreeSet::from(["a".to_string()]),
            ..Cohort::default()
        },
        &[("region/DE", Some("de-staged")), ("region/FR", None)],
    );
    let current = with(&[s]);
    let revisions = BTreeMap::from([(format!("{P}stage/move-de"), 49)]);
    let a = overlay(&current, &revisions, Some(&node("a", &labels)));
    assert_eq!(a.snapshot.kvs[&format!("{P}region/DE")], "de-staged");
    assert!(!a.snapshot.kvs.contains_key(&format!("{P}region/FR")));
    assert_eq!(
        a.snapshot.stages,
        [AppliedStage {
            id: "move-de".into(),
            revision: 49
        }]
    );
    assert!(a.problems.is_empty());
    let b = overlay(&current, &revisions, Some(&node("b", &labels)));
    assert_eq!(b.snapshot.kvs[&format!("{P}region/DE")], "de-current");
    assert!(b.snapshot.stages.is_empty());
    for o in [&a, &b] {
        assert!(o.snapshot.kvs.keys().all(|k| !k.contains("/stage/")));
        assert_eq!(o.snapshot.revision, 50);
    }
    // No node id: no cohort.
    let none = overlay(&current, &revisions, None);
    assert_eq!(none.snapshot.kvs, b.snapshot.kvs);
}

#[test]
fn a_key_two_stages_touch_routes_from_its_current_value() {
    let labels = BTreeMap::new();
    let everyone = Cohort {
        points: COHORT_POINTS,
        ..Cohort::default()
    };
    let one = stage(
        "one",
        everyone.clone(),
        &[("region/DE", Some("one-de")), ("region/FR", Some("one-fr"))],
    );
    let two = stage("two", Cohort::default(), &[("region/DE", Some("two-de"))]);
    let o = overlay(
        &with(&[one, two]),
        &BTreeMap::new(),
        Some(&node("n", &labels)),
    );
    assert_eq!(o.snapshot.kvs[&format!("{P}region/DE")], "de-current");
    assert_eq!(o.snapshot.kvs[&format!("{P}region/FR")], "one-fr");
    assert_eq!(o.problems.len(), 1);
    assert!(o.problems[0].1.contains("one, two"), "{:?}", o.problems);
}

#[test]
fn an_unreadable_stage_applies_nowhere() {
    let labels = BTreeMap::new();
    let mut current = with(&[]);
    current
        .kvs
        .insert(format!("{P}stage/bad"), "{\"schema\":1".into());
    let mut wrong_id = stage(
        "other",
        Cohort {
            points: COHORT_POINTS,
            ..Cohort::default()
        },
        &[("region/DE", Some("x"))],
    )
    .to_json();
    current
        .kvs
        .insert(format!("{P}stage/named"), std::mem::take(&mut wrong_id));
    let o = overlay(&current, &BTreeMap::new(), Some(&node("n", &labels)));
    assert_eq!(o.snapshot.kvs[&format!("{P}region/DE")], "de-current");
    assert_eq!(o.problems.len(), 2, "{:?}", o.problems);
    assert!(o.snapshot.stages.is_empty());
}

#[test]
fn only_region_and_policy_keys_can_be_staged() {
    let mut s = stage("x", Cohort::default(), &[("origin/fra-a", Some("{}"))]);
    assert!(s.check().is_err());
    s.kvs = BTreeMap::from([("region/".to_string(), None)]);
    assert!(s.check().is_err());
    s.kvs = BTreeMap::from([("policy/global".to_string(), Some("{}".to_string()))]);
    assert!(s.check().is_ok());
    s.kvs.clear();
    assert!(s.check().is_err(), "an empty stage is refused");
}

#[test]
fn stage_ids_and_limits_are_checked_at_their_edges() {
    assert!(check_stage_id(&"a".repeat(MAX_STAGE_ID_BYTES)).is_ok());
    assert!(check_stage_id(&"a".repeat(MAX_STAGE_ID_BYTES + 1)).is_err());
    for bad in ["", "-a", "A", "a b", "a/b", "a\u{1b}"] {
        assert!(check_stage_id(bad).is_err(), "{bad:?}");
    }
    let mut c = Cohort {
        points: COHORT_POINTS,
        ..Cohort::default()
    };
    assert!(c.check().is_ok());
    c.points += 1;
    assert!(c.check().is_err());
    let many: BTreeMap<String, Option<String>> = (0..=MAX_STAGED_KEYS)
        .map(|i| (format!("region/G{i}"), None))
        .collect();
    let mut s = stage("x", Cohort::default(), &[]);
    s.kvs = many;
    assert!(s.check().is_err());
    s.kvs.pop_first();
    assert!(s.check().is_ok());
}

#[test]
fn the_stages_field_round_trips_and_is_absent_when_empty() {
    let mut s = Snapshot::new(9, P);
    s.kvs.insert(format!("{P}region/DE"), "{}".into());
    let plain = s.to_json();
    assert!(!String::from_utf8_lossy(&plain).contains("stages"));
    s.stages.push(AppliedStage {
        id: "eu-map".into(),
        revision: 8,
    });
    let json = s.to_json();
    assert!(String::from_utf8_lossy(&json).contains(r#""stages":[{"id":"eu-map","revision":8}]"#));
    assert_eq!(Snapshot::parse(&json).unwrap(), s);
    // The exact reading agrees, and an unreadable field is taken as empty.
    let spaced = String::from_utf8_lossy(&json).replace(':', " : ");
    assert_eq!(Snapshot::parse(spaced.as_bytes()).unwrap().stages, s.stages);
    let odd = String::from_utf8_lossy(&plain).replace("{\"format\"", "{\"stages\":7,\"format\"");
    let parsed = Snapshot::parse(odd.as_bytes()).unwrap();
    assert!(parsed.stages.is_empty());
}

#[test]
fn a_table_names_the_stages_on_every_reading_path() {
    let mut s = Snapshot::new(9, P);
    s.kvs.insert(
        format!("{P}region/DE"),
        r#"{"shard":"eu-1","origins":["fra-a"]}"#.into(),
    );
    s.stages = vec![
        AppliedStage {
            id: "a".into(),
            revision: 3,
        },
        AppliedStage {
            id: "b.2".into(),
            revision: 8,
        },
    ];
    let json = s.to_json();
    let first = Table::parse(&json).unwrap();
    assert_eq!(first.stages(), s.stages.as_slice());
    // The reload path reads the field in its own one-pass reader.
    let reloaded = Table::parse_after(&json, &first).unwrap();
    assert_eq!(reloaded.stages(), s.stages.as_slice());
    assert_eq!(Table::from_snapshot(&s).stages(), s.stages.as_slice());
    // A shape the one-pass reader does not know goes to the exact reading, same answer.
    let reordered = String::from_utf8_lossy(&json)
        .replace(r#"{"id":"a","revision":3}"#, r#"{"revision":3,"id":"a"}"#);
    assert_ne!(reordered.as_bytes(), json.as_slice());
    let odd = Table::parse_after(reordered.as_bytes(), &first).unwrap();
    assert_eq!(odd.stages(), s.stages.as_slice());
    assert_eq!(
        Table::parse(&Snapshot::new(1, P).to_json())
            .unwrap()
            .stages(),
        &[]
    );
}

#[test]
fn widening_keeps_earlier_members() {
    let five = Cohort {
        points: 500,
        ..Cohort::default()
    };
    let twenty = Cohort {
        points: 2_000,
        ..Cohort::default()
    };
    assert!(five.is_within(&twenty));
    assert!(!twenty.is_within(&five));
    let named = Cohort {
        nodes: BTreeSet::from(["a".into()]),
        ..five.clone()
    };
    assert!(!named.is_within(&twenty));
}
