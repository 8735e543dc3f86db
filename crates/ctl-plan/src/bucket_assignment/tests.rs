use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::apply::{Desired, plan_apply};
use crate::drain::{Restoring, plan_drain, plan_restore, reconcile_drain_records};
use crate::drain_record::DrainRequest;
use crate::fixtures::state;
use crate::model::Entry;
use crate::stage::reconcile_stages;
use dw_routing::buckets::MAX_ASSIGNED_ORIGINS;
use dw_routing::stage::{Cohort, STAGE_SCHEMA};

fn n(count: i64) -> BucketCount {
    BucketCount::new(count).unwrap()
}

fn with_policy(mut state: State, raw: &str) -> State {
    state.policy = Some(Entry {
        raw: raw.as_bytes().to_vec(),
        mod_revision: 3,
    });
    state
}

fn drain_request(origin: &str) -> DrainRequest {
    DrainRequest {
        origin: origin.into(),
        regions: Vec::new(),
        reason: "test".into(),
        source: "cli".into(),
        by: "tester".into(),
        at: "2026-01-01T00:00:00Z".into(),
        force: false,
        skip_emptying: false,
        fleet_limit: None,
    }
}

/// What dwctl's `ops::commit` does with a plan: the assignments, the follow-ups, the
/// assignments again.
fn run(state: &State, plan: impl FnOnce(&State) -> Result<Changes, Error>) -> Changes {
    let mut changes = plan(state).unwrap();
    assign_buckets(state, &mut changes).unwrap();
    reconcile_drain_records(state, &mut changes).unwrap();
    reconcile_stages(state, &mut changes).unwrap();
    assign_buckets(state, &mut changes).unwrap();
    changes
}

/// `state` with `changes` committed (regions, drain records, policy, stages), one
/// revision later.
fn committed(state: &State, changes: &Changes) -> State {
    let mut next = state.clone();
    next.revision += 1;
    let at = next.revision;
    let entry = |raw: String| Entry {
        raw: raw.into_bytes(),
        mod_revision: at,
    };
    for (geo, value) in &changes.regions {
        match value {
            Some(value) => next.regions.insert(geo.clone(), entry(value.encode("t"))),
            None => next.regions.remove(geo),
        };
    }
    for (origin, record) in &changes.drains {
        match record {
            Some(record) => next.drains.insert(origin.clone(), entry(record.encode())),
            None => next.drains.remove(origin),
        };
    }
    for (id, stage) in &changes.stages {
        match stage {
            Some(stage) => next.stages.insert(id.clone(), entry(stage.to_json())),
            None => next.stages.remove(id),
        };
    }
    if let Some(policy) = &changes.policy {
        next.policy = Some(entry(policy.encode("t")));
    }
    next
}

/// Each bucket's origin, by name, as the routers use `value` at N.
fn owners(value: &RegionValue, count: BucketCount) -> Vec<String> {
    live_assignment(value, count)
        .unwrap()
        .owners()
        .into_iter()
        .map(|origin| value.origins[usize::from(origin)].clone())
        .collect()
}

fn counts(owners: &[String]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for owner in owners {
        *counts.entry(owner.clone()).or_insert(0) += 1;
    }
    counts
}

/// The buckets moved from `before` to `after`, checked against the minimal-move promise:
/// exactly the sum of the origins' decreases, each from an origin whose count falls to
/// one whose count rises.
fn moved_minimally(before: &[String], after: &[String]) -> Result<usize, String> {
    let (old, new) = (counts(before), counts(after));
    let count = |map: &BTreeMap<String, usize>, origin: &str| map.get(origin).copied().unwrap_or(0);
    let decreases: usize = old
        .keys()
        .map(|origin| count(&old, origin).saturating_sub(count(&new, origin)))
        .sum();
    let mut moved = 0;
    for (from, to) in before.iter().zip(after) {
        if from == to {
            continue;
        }
        moved += 1;
        if count(&new, from) >= count(&old, from) {
            return Err(format!("a bucket left {from}, whose count did not fall"));
        }
        if count(&new, to) <= count(&old, to) {
            return Err(format!("a bucket reached {to}, whose count did not rise"));
        }
    }
    if moved != decreases {
        return Err(format!(
            "{moved} buckets moved, the decreases sum to {decreases}"
        ));
    }
    Ok(moved)
}

fn region_after(changes: &Changes, geo: &str) -> RegionValue {
    changes.regions[geo].clone().unwrap()
}

const DE_HALVES: &str = r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#;

#[test]
fn with_buckets_off_values_are_byte_for_byte_todays() {
    for policy in [
        None,
        Some(r#"{"pick":"rendezvous"}"#),
        Some(r#"{"buckets":0}"#),
    ] {
        let mut base = state(&[("DE", DE_HALVES)]);
        if let Some(policy) = policy {
            base = with_policy(base, policy);
        }
        let planned = plan_drain(&base, &drain_request("a")).unwrap();
        let changes = run(&base, |state| plan_drain(state, &drain_request("a")));
        assert_eq!(
            region_after(&changes, "DE").encode("t"),
            region_after(&planned, "DE").encode("t"),
            "{policy:?}"
        );
        assert!(!region_after(&changes, "DE").extra.contains_key("buckets"));
        assert!(!changes.guard_policy);
    }
}

#[test]
fn a_drain_and_its_restore_round_trip_on_a_default_assignment() {
    let start = with_policy(state(&[("DE", DE_HALVES)]), r#"{"buckets":1024}"#);
    let before = start.region("DE").unwrap().unwrap();
    let first = owners(&before, n(1024));
    // A value written without one adopts the default: blocks in list order.
    assert_eq!(
        live_assignment(&before, n(1024)).unwrap().encode(),
        "0:512,1:512"
    );

    let drained = run(&start, |state| plan_drain(state, &drain_request("a")));
    let after_drain = region_after(&drained, "DE");
    assert_eq!(after_drain.origins, ["b"]);
    assert_eq!(stored_text(&after_drain), Some("0:1024"));
    assert_eq!(
        moved_minimally(&first, &owners(&after_drain, n(1024))),
        Ok(512)
    );
    assert!(drained.guard_policy);
    // The record keeps the routing of before and after; restore reassigns from the
    // current stored assignment, so the record needs no assignment of its own.
    let record = drained.drains["a"].clone().unwrap();
    assert!(!record.regions["DE"].before.extra.contains_key("buckets"));

    let middle = committed(&start, &drained);
    let restored = run(&middle, |state| plan_restore(state, "a", Restoring::All));
    let after_restore = region_after(&restored, "DE");
    assert_eq!(after_restore.origins, ["a", "b"]);
    assert_eq!(stored_text(&after_restore), Some("0:512,1:512"));
    let back = owners(&after_restore, n(1024));
    assert_eq!(
        moved_minimally(&owners(&after_drain, n(1024)), &back),
        Ok(512)
    );
    assert_eq!(back, first, "every bucket is back on its origin");
}

#[test]
fn a_drain_moves_only_the_drained_origins_buckets() {
    let start = with_policy(
        state(&[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":30,"c":20},"buckets":"0:30,1:20,2:10,0:20,1:10,2:10"}"#,
        )]),
        r#"{"buckets":100}"#,
    );
    let before = owners(&start.region("DE").unwrap().unwrap(), n(100));
    let changes = run(&start, |state| plan_drain(state, &drain_request("c")));
    let after = owners(&region_after(&changes, "DE"), n(100));
    assert_eq!(moved_minimally(&before, &after), Ok(20));
    for (from, to) in before.iter().zip(&after) {
        assert!(from == to || from == "c", "{from} -> {to}");
    }
}

#[test]
fn a_stored_assignment_is_followed_by_name_across_a_reordered_list() {
    let start = with_policy(
        state(&[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50},"buckets":"1:2,0:2"}"#,
        )]),
        r#"{"buckets":4}"#,
    );
    let reordered = RegionValue::for_write(
        br#"{"shard":"eu-1","origins":["b","a"],"weight":{"a":50,"b":50},"buckets":"1:2,0:2"}"#,
    )
    .unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            regions: [("DE".to_string(), Some(reordered.clone()))].into(),
            ..Changes::default()
        })
    });
    let after = region_after(&changes, "DE");
    // b is index 0 now: the buckets stay where they were (b on 0, 1; a on 2, 3).
    assert_eq!(stored_text(&after), Some("0:2,1:2"));
    assert_eq!(
        owners(&after, n(4)),
        owners(&start.region("DE").unwrap().unwrap(), n(4))
    );
    // The field given was the one read: dwctl replaced it without a note.
    assert!(changes.notes.is_empty(), "{:?}", changes.notes);
}

#[test]
fn a_buckets_field_given_by_hand_is_replaced_and_said() {
    let start = with_policy(state(&[("DE", DE_HALVES)]), r#"{"buckets":4}"#);
    let given = RegionValue::for_write(
        br#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50},"buckets":"1:2,0:2"}"#,
    )
    .unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            regions: [("DE".to_string(), Some(given.clone()))].into(),
            ..Changes::default()
        })
    });
    assert_eq!(stored_text(&region_after(&changes, "DE")), Some("0:2,1:2"));
    assert!(changes.notes.iter().any(|note| note.contains("dwctl owns")));
}

#[test]
fn a_new_region_gets_the_default_and_a_deleted_one_nothing() {
    let start = with_policy(state(&[("DE", DE_HALVES)]), r#"{"buckets":10}"#);
    let fr = RegionValue::for_write(
        br#"{"shard":"eu-1","origins":["x","y","z"],"weight":{"x":50,"y":30,"z":20}}"#,
    )
    .unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            regions: [
                ("FR".to_string(), Some(fr.clone())),
                ("DE".to_string(), None),
            ]
            .into(),
            ..Changes::default()
        })
    });
    assert_eq!(
        stored_text(&region_after(&changes, "FR")),
        Some("0:5,1:3,2:2")
    );
    assert_eq!(changes.regions["DE"], None);
}

#[test]
fn the_policys_buckets_are_checked_at_their_edges() {
    let policy = |raw: &str| PolicyValue::for_write(raw.as_bytes());
    let of = |raw: &str| {
        policy(raw)
            .unwrap()
            .buckets()
            .unwrap()
            .map(BucketCount::get)
    };
    assert_eq!(of(r#"{}"#), None);
    assert_eq!(of(r#"{"buckets":0}"#), None);
    assert_eq!(of(r#"{"buckets":2}"#), Some(2));
    assert_eq!(of(r#"{"buckets":1024}"#), Some(1024));
    for bad in ["1", "1025", "-1", "16.0", "\"16\"", "true", "null", "1e2"] {
        let errors = policy(&format!(r#"{{"buckets":{bad}}}"#)).unwrap_err();
        assert_eq!(errors[0].field, "buckets", "{bad}");
    }
    // Written among the known fields, in their order.
    assert_eq!(
        policy(r#"{"buckets":64,"pick":"rendezvous"}"#)
            .unwrap()
            .encode("t"),
        r#"{"pick":"rendezvous","buckets":64,"updated":"t"}"#
    );
}

#[test]
fn turning_buckets_on_rewrites_no_region() {
    let start = state(&[("DE", DE_HALVES)]);
    let policy = PolicyValue::for_write(br#"{"buckets":64}"#).unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            policy: Some(policy.clone()),
            ..Changes::default()
        })
    });
    assert!(changes.regions.is_empty());
    assert!(!changes.guard_regions);
}

#[test]
fn a_change_of_n_rescales_every_region_keeping_the_low_buckets() {
    let start = with_policy(
        state(&[
            ("DE", DE_HALVES),
            (
                "FR",
                r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1},"buckets":"2:6,0:5,1:5"}"#,
            ),
        ]),
        r#"{"buckets":16}"#,
    );
    let policy = PolicyValue::for_write(br#"{"buckets":64}"#).unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            policy: Some(policy.clone()),
            ..Changes::default()
        })
    });
    assert!(changes.guard_regions);
    for geo in ["DE", "FR"] {
        let before = owners(&start.region(geo).unwrap().unwrap(), n(16));
        let after = owners(&region_after(&changes, geo), n(64));
        // Every bucket a visitor can hold today keeps its origin.
        assert_eq!(before[..], after[..16], "{geo}");
    }
    // The new buckets go to each origin's default block first (a: 0-31, b: 32-63), the
    // rest in list order.
    assert_eq!(
        stored_text(&region_after(&changes, "DE")),
        Some("0:8,1:8,0:16,1:24,0:8")
    );
    // Shrinking: the buckets below the new N keep their origin where the counts allow (FR's
    // c held 0-3 and keeps 3; a and b take their default blocks).
    let smaller = PolicyValue::for_write(br#"{"buckets":4}"#).unwrap();
    let changes = run(&start, |_| {
        Ok(Changes {
            policy: Some(smaller.clone()),
            ..Changes::default()
        })
    });
    assert_eq!(stored_text(&region_after(&changes, "DE")), Some("0:2,1:2"));
    assert_eq!(
        stored_text(&region_after(&changes, "FR")),
        Some("0:2,1:1,2:1")
    );
}

fn stage_of(id: &str, kvs: &[(&str, &str)]) -> Stage {
    Stage {
        schema: STAGE_SCHEMA,
        id: id.into(),
        cohort: Cohort {
            points: 500,
            ..Cohort::default()
        },
        kvs: kvs
            .iter()
            .map(|(key, value)| (key.to_string(), Some(value.to_string())))
            .collect(),
        base: BTreeMap::new(),
        created_by: "t".into(),
        created_at: "t".into(),
        reason: "t".into(),
    }
}

#[test]
fn a_change_of_n_is_refused_while_a_stage_stages_regions() {
    let mut start = with_policy(state(&[("DE", DE_HALVES)]), r#"{"buckets":16}"#);
    let stage = stage_of(
        "s1",
        &[(
            "region/DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":70,"b":30}}"#,
        )],
    );
    start.stages.insert(
        "s1".into(),
        Entry {
            raw: stage.to_json().into_bytes(),
            mod_revision: 4,
        },
    );
    let mut changes = Changes {
        policy: Some(PolicyValue::for_write(br#"{"buckets":64}"#).unwrap()),
        ..Changes::default()
    };
    let error = assign_buckets(&start, &mut changes).unwrap_err();
    assert!(
        matches!(&error, Error::Failed(text) if text.contains("s1")),
        "{error:?}"
    );
}

#[test]
fn a_staged_value_carries_the_assignment_its_promote_writes() {
    let start = with_policy(state(&[("DE", DE_HALVES)]), r#"{"buckets":100}"#);
    let staged_raw = r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":70,"b":30}}"#;
    let mut stage = stage_of("s1", &[("region/DE", staged_raw)]);
    stage.base.insert("region/DE".into(), 5);
    let mut changes = Changes {
        stages: [("s1".to_string(), Some(stage))].into(),
        stage_edits: crate::model::StageEdits::Keep,
        ..Changes::default()
    };
    assign_buckets(&start, &mut changes).unwrap();
    let stage = changes.stages["s1"].clone().unwrap();
    let staged =
        RegionValue::from_stored(stage.kvs["region/DE"].as_ref().unwrap().as_bytes()).unwrap();
    assert_eq!(stored_text(&staged), Some("0:70,1:30"));
    // The promote writes the staged value as the current one: the same assignment, so the
    // cohort's visitors do not move again.
    let with_stage = committed(&start, &changes);
    let promoted = run(&with_stage, |state| {
        crate::stage_action::plan_promote(
            &crate::keys::Layout::new("/dw/routing/", "/dw/control/").unwrap(),
            state,
            "s1",
            false,
            "go",
        )
    });
    assert_eq!(
        stored_text(&region_after(&promoted, "DE")),
        Some("0:70,1:30")
    );
}

#[test]
fn a_staged_change_of_n_stages_every_region_rescaled() {
    let start = with_policy(
        state(&[
            ("DE", DE_HALVES),
            ("FR", r#"{"shard":"eu-1","origins":["c"],"weight":{"c":1}}"#),
        ]),
        r#"{"buckets":16}"#,
    );
    let mut stage = stage_of("s1", &[("policy/global", r#"{"buckets":64}"#)]);
    stage.base.insert("policy/global".into(), 3);
    let mut changes = Changes {
        stages: [("s1".to_string(), Some(stage))].into(),
        stage_edits: crate::model::StageEdits::Keep,
        ..Changes::default()
    };
    assign_buckets(&start, &mut changes).unwrap();
    let stage = changes.stages["s1"].clone().unwrap();
    assert_eq!(stage.kvs.len(), 3, "{:?}", stage.kvs.keys());
    let de = RegionValue::from_stored(stage.kvs["region/DE"].as_ref().unwrap().as_bytes()).unwrap();
    assert_eq!(stored_text(&de), Some("0:8,1:8,0:16,1:24,0:8"));
    assert_eq!(stage.base["region/DE"], 5);
    assert!(changes.guard_regions);
    // Its promote writes the same values.
    let with_stage = committed(&start, &changes);
    let promoted = run(&with_stage, |state| {
        crate::stage_action::plan_promote(
            &crate::keys::Layout::new("/dw/routing/", "/dw/control/").unwrap(),
            state,
            "s1",
            false,
            "go",
        )
    });
    assert_eq!(
        stored_text(&region_after(&promoted, "DE")),
        Some("0:8,1:8,0:16,1:24,0:8")
    );
    assert_eq!(promoted.policy.unwrap().buckets().unwrap(), Some(n(64)));
}

#[test]
fn apply_leaves_a_region_alone_that_differs_only_by_its_assignment() {
    let start = with_policy(
        state(&[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50},"buckets":"0:2,1:2"}"#,
        )]),
        r#"{"buckets":4}"#,
    );
    let desired = Desired {
        regions: [(
            "DE".to_string(),
            RegionValue::for_write(DE_HALVES.as_bytes()).unwrap(),
        )]
        .into(),
        ..Desired::default()
    };
    let (changes, diff) = plan_apply(&start, &desired, false);
    assert!(changes.regions.is_empty() && diff.is_empty(), "{diff:?}");
}

/// One change of the property test.
#[derive(Debug, Clone)]
enum Change {
    /// New weights for the listed origins (`region set`, `apply`, `rollback`).
    Set(Vec<u32>),
    /// A drain of the origin at this index (mod the list).
    Drain(usize),
    /// The restore of every drained origin, one by one.
    Restore,
    /// A shed: the weight of the origin at this index scaled by this percent left.
    Shed(usize, u32),
    /// A spill: an origin added with this weight.
    Spill(u32),
}

fn change() -> impl Strategy<Value = Change> {
    prop_oneof![
        prop::collection::vec(0u32..=100, 6).prop_map(Change::Set),
        (0usize..6).prop_map(Change::Drain),
        Just(Change::Restore),
        (0usize..6, 0u32..100).prop_map(|(at, left)| Change::Shed(at, left)),
        (1u32..=100).prop_map(Change::Spill),
    ]
}

/// The planned changes of `change` on `state`'s region DE; `None` when the change does
/// not apply (a drain of the last origin, nothing to restore).
fn plan_change(state: &State, change: &Change, spilled: &mut u32) -> Option<Changes> {
    let current = state.region("DE")?.ok()?;
    let write = |value: RegionValue| {
        Some(Changes {
            regions: [("DE".to_string(), Some(value))].into(),
            ..Changes::default()
        })
    };
    match change {
        Change::Set(weights) => {
            let mut value = current.clone();
            for (origin, weight) in current.origins.iter().zip(weights) {
                value.weight.insert(origin.clone(), *weight);
            }
            (value.listed_weights().iter().any(|(_, w)| *w > 0)).then_some(())?;
            write(value)
        }
        Change::Drain(at) => {
            let origin = &current.origins[at % current.origins.len()];
            plan_drain(state, &drain_request(origin)).ok()
        }
        Change::Restore => {
            let origin = state.drains.keys().next()?.clone();
            plan_restore(state, &origin, Restoring::All).ok()
        }
        Change::Shed(at, left) => {
            let origin = &current.origins[at % current.origins.len()];
            let mut value = current.clone();
            let weight = value.weight_of(origin) * left / 100;
            value.weight.insert(origin.clone(), weight);
            (value.listed_weights().iter().any(|(_, w)| *w > 0)).then_some(())?;
            write(value)
        }
        Change::Spill(weight) => {
            *spilled += 1;
            let mut value = current.clone();
            let name = format!("spill-{spilled}");
            value.origins.push(name.clone());
            value.weight.insert(name, *weight);
            write(value)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every kind of dwctl change moves exactly the sum of the origins' decreases, only
    /// from origins whose count falls to origins whose count rises, from whatever
    /// assignment is stored (the default first, then each committed one).
    #[test]
    fn every_kind_of_change_moves_the_sum_of_the_decreases(
        count in 2i64..=1024,
        weights in prop::collection::vec(0u32..=100, 2..6),
        changes in prop::collection::vec(change(), 1..12),
    ) {
        prop_assume!(weights.iter().any(|w| *w > 0));
        let names: Vec<String> = (0..weights.len()).map(|i| format!("o{i}")).collect();
        let value = RegionValue {
            shard: "s".into(),
            origins: names.clone(),
            weight: names.iter().cloned().zip(weights.iter().copied()).collect(),
            extra: Default::default(),
        };
        let mut current = with_policy(
            state(&[("DE", &value.encode("t"))]),
            &format!(r#"{{"buckets":{count}}}"#),
        );
        let mut spilled = 0;
        for change in &changes {
            let Some(mut planned) = plan_change(&current, change, &mut spilled) else {
                continue;
            };
            assign_buckets(&current, &mut planned).unwrap();
            reconcile_drain_records(&current, &mut planned).unwrap();
            let before = owners(&current.region("DE").unwrap().unwrap(), n(count));
            let after_value = region_after(&planned, "DE");
            // What is written decodes as written: the routers use exactly it.
            let text = stored_text(&after_value).unwrap();
            prop_assert_eq!(
                Assignment::decode(text, n(count), after_value.origins.len()).unwrap().encode(),
                text
            );
            let after = owners(&after_value, n(count));
            prop_assert_eq!(moved_minimally(&before, &after), Ok(
                before.iter().zip(&after).filter(|(a, b)| a != b).count()
            ), "{:?}", change);
            current = committed(&current, &planned);
        }
    }
}

#[test]
fn a_stored_assignment_off_its_weights_is_read_as_the_routers_read_it() {
    // Weights changed by hand without the assignment: the routers (and so dwctl's base)
    // reassign the stored one to them; a drain of b then moves only b's buckets from there.
    let start = with_policy(
        state(&[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":25,"b":25,"c":50},"buckets":"1:2,0:2"}"#,
        )]),
        r#"{"buckets":4}"#,
    );
    let current = start.region("DE").unwrap().unwrap();
    assert_eq!(
        live_assignment(&current, n(4)).unwrap().encode(),
        "2:1,1:1,0:1,2:1"
    );
    let before = owners(&current, n(4));
    let changes = run(&start, |state| plan_drain(state, &drain_request("b")));
    let after = owners(&region_after(&changes, "DE"), n(4));
    assert_eq!(moved_minimally(&before, &after), Ok(1));
}

#[test]
fn a_region_of_more_origins_than_an_assignment_indexes_gets_none() {
    let value = |origins: usize| {
        let names: Vec<String> = (0..origins).map(|i| format!("o{i}")).collect();
        RegionValue {
            shard: "s".into(),
            origins: names.clone(),
            weight: names.into_iter().map(|name| (name, 1)).collect(),
            extra: [("buckets".to_string(), Value::from("0:2"))]
                .into_iter()
                .collect(),
        }
    };
    let write = |origins: usize, policy: &str, base: &State| {
        let mut changes = Changes {
            regions: [("DE".to_string(), Some(value(origins)))].into(),
            policy: Some(PolicyValue::for_write(policy.as_bytes()).unwrap()),
            ..Changes::default()
        };
        assign_buckets(base, &mut changes).unwrap();
        stored_text(&region_after(&changes, "DE")).map(str::to_owned)
    };
    let off = State::default();
    // 65,536 origins (an index is 16 bits): assigned; 65,537: written without the field.
    let text = write(MAX_ASSIGNED_ORIGINS, r#"{"buckets":1024}"#, &off).unwrap();
    assert!(text.starts_with("0:1,1:1,"), "{}", &text[..20]);
    assert_eq!(
        write(MAX_ASSIGNED_ORIGINS + 1, r#"{"buckets":1024}"#, &off),
        None
    );
    // A change of N from a base of 65,536 origins (no index left for the buckets past the
    // old N) starts from the new value's own default; from 65,535 it carries over.
    let mut after = value(MAX_ASSIGNED_ORIGINS);
    after.extra.clear();
    let base = value(MAX_ASSIGNED_ORIGINS);
    let next = next_assignment(Some((&base, n(2))), &after, n(4)).unwrap();
    assert_eq!(next.encode(), "0:1,1:1,2:1,3:1");
    let base = value(MAX_ASSIGNED_ORIGINS - 1);
    let error = rescale(
        &live_assignment(&base, n(2)).unwrap(),
        &value(MAX_ASSIGNED_ORIGINS).origins,
        n(4),
        &after,
    )
    .unwrap_err();
    assert!(
        matches!(&error, Error::Invalid(fields) if fields[0].field == "origins"),
        "{error:?}"
    );
    assert!(
        rescale(
            &live_assignment(&base, n(2)).unwrap(),
            &base.origins,
            n(4),
            &after
        )
        .is_ok()
    );
}
