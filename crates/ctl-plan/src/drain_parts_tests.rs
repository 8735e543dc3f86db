//! The parts of a drain record, source by source (issue 42, "Other actors"): for each
//! ordered pair of sources A, B (a person `cli`, `health`, `rebalance`, the `autopilot`),
//! A acts then B acts; restoring A leaves exactly B's part (the weights B alone gives the
//! configured regions), restoring B leaves exactly A's; and the same source twice is one
//! part that one restore undoes whole. Old-schema records are read and restored as before.
//!
//! Each source acts as it does in production: a person drains DE (`dwctl drain a --region
//! DE`), health sheds 50 % (`--on-fail shed:50`, by weight: no traffic), rebalance drains
//! everywhere, the autopilot relieves DE and AT (a's share halved). The autopilot holds
//! on an origin another source has a part on, so a pair with it second is its refusal.

use std::collections::BTreeMap;

use dw_capacity::{RegionEdit, SHED_TOTAL, renormalise};

use crate::autopilot::law::{Action, ActionKind, Figures};
use crate::autopilot::write::{Author, plan_action};
use crate::drain::{DrainRequest, Restoring, plan_drain, plan_restore};
use crate::drain_parts::MAX_PARTS;
use crate::drain_record::{
    DrainRecord, PARTS_RECORD_SCHEMA, SOURCE_AUTOPILOT, SOURCE_CLI, SOURCE_HEALTH, SOURCE_REBALANCE,
};
use crate::fixtures::state;
use crate::model::{Changes, Entry, State};
use crate::shed::{ShedRequest, plan_shed};
use crate::{Error, fixtures::named};

const SOURCES: [&str; 4] = [
    SOURCE_CLI,
    SOURCE_HEALTH,
    SOURCE_REBALANCE,
    SOURCE_AUTOPILOT,
];

fn configured() -> State {
    state(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":40,"b":30,"c":30}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu","origins":["a","c"],"weight":{"a":50,"c":50}}"#,
        ),
        (
            "AT",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":20,"b":80}}"#,
        ),
    ])
}

/// Applies `changes` to `state` as etcd would, each written key at a new revision.
fn apply(state: &State, changes: &Changes) -> State {
    let mut next = state.clone();
    next.revision += 1;
    next.with_written(changes, next.revision)
}

fn request(source: &str, regions: &[String]) -> DrainRequest {
    DrainRequest {
        origin: "a".into(),
        regions: regions.to_vec(),
        reason: format!("{source} acts"),
        source: source.into(),
        by: format!("{source}@host"),
        at: "2026-12-07T00:00:00Z".into(),
        force: false,
        skip_emptying: source != SOURCE_CLI,
        fleet_limit: None,
    }
}

/// The autopilot's relief: a's share of each region halved (over [`SHED_TOTAL`], the
/// others in proportion), as one action.
fn relief(state: &State, regions: &[String]) -> Action {
    let edits = regions
        .iter()
        .filter_map(|geo| {
            let value = state.region(geo)?.ok()?;
            if !value.lists("a") {
                return None;
            }
            let listed = value.listed_weights();
            let total: u64 = listed.iter().map(|(_, weight)| u64::from(*weight)).sum();
            let own = u64::from(value.weight_of("a"));
            let share_now = (own * u64::from(SHED_TOTAL) + total / 2) / total;
            let share = (share_now as f64 * 0.5).round() as u32;
            let others: Vec<(String, u32)> =
                listed.into_iter().filter(|(name, _)| name != "a").collect();
            let mut weight: BTreeMap<String, u32> = renormalise(&others, SHED_TOTAL - share)?
                .into_iter()
                .collect();
            weight.insert("a".into(), share);
            Some(RegionEdit {
                geo: geo.clone(),
                shard: value.shard.clone(),
                origins: value.origins.clone(),
                weight: value
                    .origins
                    .iter()
                    .map(|name| (name.clone(), weight[name]))
                    .collect(),
            })
        })
        .collect();
    Action {
        origin: "a".into(),
        kind: ActionKind::Relieve,
        edits,
        figures: Figures {
            measured: 1000.0,
            capacity: 1000.0,
            target: 800.0,
        },
        predicted: 700.0,
        moved: 300.0,
        limit: 0.8,
        harms: Vec::new(),
        spilled: Vec::new(),
        skipped_staged: Vec::new(),
        changed: Vec::new(),
        ahead: 0.0,
    }
}

/// `source` acts on `state`, in `regions` (or its usual ones).
fn act(state: &State, source: &str, regions: Option<&[String]>) -> Result<Changes, Error> {
    let named = |default: &[&str]| -> Vec<String> {
        regions.map_or_else(
            || default.iter().map(|geo| (*geo).to_owned()).collect(),
            <[String]>::to_vec,
        )
    };
    match source {
        SOURCE_CLI => plan_drain(state, &request(source, &named(&["DE"]))),
        SOURCE_HEALTH => plan_shed(
            state,
            "/dw/routing/",
            Err("no traffic".into()),
            &ShedRequest {
                drain: request(source, &named(&[])),
                percent: 50.0,
                spill: false,
            },
        ),
        SOURCE_REBALANCE => plan_drain(state, &request(source, &named(&[]))),
        _ => {
            let action = relief(state, &named(&["DE", "AT"]));
            let read = state
                .regions
                .iter()
                .map(|(geo, entry)| (geo.clone(), entry.mod_revision))
                .collect();
            let author = Author {
                by: "autopilot@host",
                at: "2026-12-07T00:00:00Z",
            };
            plan_action(state, &action, &read, &author)
        }
    }
}

/// The restore of `source`'s part: a person's for cli, the daemon's own otherwise.
fn restore(state: &State, source: &str) -> State {
    let which = if source == SOURCE_CLI {
        Restoring::Part(source)
    } else {
        Restoring::Own(source)
    };
    let changes = plan_restore(state, "a", which).unwrap();
    assert!(!changes.is_empty(), "restoring {source} changed nothing");
    apply(state, &changes)
}

/// Every region's listed weights (`None`: the key is gone).
fn weights(state: &State) -> BTreeMap<String, Option<Vec<(String, u32)>>> {
    ["DE", "FR", "AT"]
        .iter()
        .map(|geo| {
            let value = state
                .region(geo)
                .map(|value| value.unwrap().listed_weights());
            ((*geo).to_owned(), value)
        })
        .collect()
}

fn record(state: &State) -> Option<DrainRecord> {
    state.drain_record("a").unwrap()
}

/// What `source` alone does to the configured regions, in the regions its part names.
fn alone(source: &str, part_regions: &[String]) -> State {
    let configured = configured();
    let changes = act(&configured, source, Some(part_regions)).unwrap();
    apply(&configured, &changes)
}

fn part_regions(state: &State, source: &str) -> Vec<String> {
    record(state)
        .unwrap()
        .part(source)
        .unwrap()
        .regions
        .keys()
        .cloned()
        .collect()
}

#[test]
fn each_ordered_pair_of_sources_restores_only_its_own_part() {
    let configured = configured();
    let mut checked = Vec::new();
    for first in SOURCES {
        for second in SOURCES {
            if first == second {
                continue;
            }
            let pair = format!("{first} then {second}");
            let one = apply(&configured, &act(&configured, first, None).unwrap());
            let outcome = act(&one, second, None);
            if second == SOURCE_AUTOPILOT {
                // The autopilot sheds no more of an origin another source has a part on.
                assert!(
                    matches!(outcome, Err(Error::Diverged(_))),
                    "{pair}: {outcome:?}"
                );
                let back = restore(&one, first);
                assert_eq!(weights(&back), weights(&configured), "{pair}");
                assert!(record(&back).is_none(), "{pair}");
                checked.push(pair);
                continue;
            }
            if first == SOURCE_REBALANCE && second == SOURCE_HEALTH {
                // Drained everywhere: a shed finds nothing to shed, and says so.
                assert!(
                    matches!(outcome, Err(Error::Invalid(_))),
                    "{pair}: {outcome:?}"
                );
                continue;
            }
            let two = apply(
                &one,
                &outcome.unwrap_or_else(|error| panic!("{pair}: {error}")),
            );
            let both = record(&two).unwrap();
            assert_eq!(both.sources(), [first, second], "{pair}");
            assert_eq!(both.schema, PARTS_RECORD_SCHEMA, "{pair}");
            // Read back from its bytes, the record is the same.
            assert_eq!(
                DrainRecord::parse("a", both.encode().as_bytes()).unwrap(),
                both,
                "{pair}"
            );

            // Restore the first: exactly the second's part is left.
            let only_second = restore(&two, first);
            let expected = alone(second, &part_regions(&two, second));
            assert_eq!(
                weights(&only_second),
                weights(&expected),
                "{pair}: restore {first}"
            );
            assert_eq!(record(&only_second).unwrap().sources(), [second], "{pair}");
            let back = restore(&only_second, second);
            assert_eq!(weights(&back), weights(&configured), "{pair}");
            assert!(record(&back).is_none(), "{pair}");

            // Restore the second: exactly the first's part is left.
            let only_first = restore(&two, second);
            let expected = alone(first, &part_regions(&two, first));
            assert_eq!(
                weights(&only_first),
                weights(&expected),
                "{pair}: restore {second}"
            );
            assert_eq!(record(&only_first).unwrap().sources(), [first], "{pair}");
            let back = restore(&only_first, first);
            assert_eq!(weights(&back), weights(&configured), "{pair}");
            assert!(record(&back).is_none(), "{pair}");
            checked.push(pair);
        }
    }
    // 12 ordered pairs; rebalance-then-health has no second part.
    assert_eq!(checked.len(), 11, "{checked:?}");
}

#[test]
fn a_drain_joins_another_sources_drain_and_outlasts_its_restore() {
    // health drained a dead origin everywhere; its lease expires too: rebalance's drain
    // joins, and health's restore (its probes pass) leaves a drained.
    let configured = configured();
    let health = plan_drain(&configured, &request(SOURCE_HEALTH, &[])).unwrap();
    let one = apply(&configured, &health);
    let joined = plan_drain(&one, &request(SOURCE_REBALANCE, &[])).unwrap();
    assert!(joined.regions.is_empty(), "a join writes no value");
    assert!(
        joined.notes.iter().any(|note| note.contains("joins it")),
        "{:?}",
        joined.notes
    );
    let two = apply(&one, &joined);
    assert_eq!(
        record(&two).unwrap().sources(),
        [SOURCE_HEALTH, SOURCE_REBALANCE]
    );
    let after_health = restore(&two, SOURCE_HEALTH);
    assert_eq!(weights(&after_health), weights(&one));
    assert_eq!(record(&after_health).unwrap().sources(), [SOURCE_REBALANCE]);
}

#[test]
fn the_same_source_twice_is_one_part_one_restore_undoes() {
    let configured = configured();
    for source in SOURCES {
        let one = apply(&configured, &act(&configured, source, None).unwrap());
        let again = match source {
            // A person drains FR too; rebalance and the others act as before.
            SOURCE_CLI => act(&one, source, Some(&["FR".to_owned()])),
            _ => act(&one, source, None),
        }
        .unwrap();
        let two = apply(&one, &again);
        let record = record(&two).unwrap();
        assert_eq!(record.sources(), [source], "{source}");
        assert!(
            record.schema < PARTS_RECORD_SCHEMA,
            "{source}: one part, old schema"
        );
        if source == SOURCE_HEALTH {
            // Two 50 % sheds: 75 %, a's DE share 40 % → 10 %.
            assert_eq!(record.shed.as_ref().unwrap().percent, 75.0);
            assert_eq!(
                two.region("DE").unwrap().unwrap().listed_weights(),
                named(&[("a", 100), ("b", 450), ("c", 450)])
            );
        }
        let back = restore(&two, source);
        assert_eq!(weights(&back), weights(&configured), "{source}");
        assert!(
            crate::drain_parts_tests::record(&back).is_none(),
            "{source}"
        );
    }
}

#[test]
fn a_person_restores_only_their_part_unless_they_ask_for_more() {
    let configured = configured();
    let shed = apply(
        &configured,
        &act(&configured, SOURCE_AUTOPILOT, None).unwrap(),
    );
    // No part of the person: refused, naming the autopilot's part and the flags.
    let Err(Error::Invalid(errors)) = plan_restore(&shed, "a", Restoring::Part(SOURCE_CLI)) else {
        panic!("a restore of a part that is not there must be refused");
    };
    let reason = &errors[0].reason;
    assert!(reason.contains("autopilot: shed"), "{reason}");
    assert!(reason.contains("--all-sources"), "{reason}");
    // A drain over the shed, then --all-sources: the configured weights, no record.
    let drained = apply(&shed, &act(&shed, SOURCE_CLI, None).unwrap());
    let all = apply(
        &drained,
        &plan_restore(&drained, "a", Restoring::All).unwrap(),
    );
    assert_eq!(weights(&all), weights(&configured));
    assert!(record(&all).is_none());
    // A drain over every region the autopilot shed keeps its shed in its part: the
    // person's restore gives the shed back, shed regions and all (reconcile keeps them).
    let everywhere = ["DE".to_owned(), "AT".to_owned()];
    let over = apply(&shed, &act(&shed, SOURCE_CLI, Some(&everywhere)).unwrap());
    let covered = record(&over).unwrap();
    assert!(covered.shed_regions().is_empty());
    assert!(covered.part(SOURCE_AUTOPILOT).unwrap().shed.is_some());
    let back = apply(
        &over,
        &plan_restore(&over, "a", Restoring::Part(SOURCE_CLI)).unwrap(),
    );
    assert_eq!(weights(&back), weights(&shed));
    let kept = record(&back).unwrap();
    assert_eq!(kept.sources(), [SOURCE_AUTOPILOT]);
    assert_eq!(kept.shed_regions().len(), 2);
    // --source autopilot: the person's drain stays.
    let part = plan_restore(&drained, "a", Restoring::Part(SOURCE_AUTOPILOT)).unwrap();
    let left = apply(&drained, &part);
    assert_eq!(record(&left).unwrap().sources(), [SOURCE_CLI]);
    assert_eq!(
        left.region("DE").unwrap().unwrap().listed_weights(),
        named(&[("b", 50), ("c", 50)])
    );
}

#[test]
fn old_records_are_one_part_and_restore_as_before() {
    // A schema-3 record as an older dwctl wrote it: a person's shed of DE, a drain of AT.
    let mut old = configured();
    old.regions.get_mut("DE").unwrap().raw =
        br#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":200,"b":400,"c":400}}"#.to_vec();
    old.regions.get_mut("AT").unwrap().raw =
        br#"{"shard":"eu","origins":["b"],"weight":{"b":100}}"#.to_vec();
    old.drains.insert(
        "a".into(),
        Entry {
            raw: br#"{"schema":3,"origin":"a","reason":"INC-1","source":"cli","by":"ops","at":"2026-01-01T00:00:00Z","regions":{"DE":{"before":{"shard":"eu","origins":["a","b","c"],"weight":{"a":40,"b":30,"c":30}},"after":{"shard":"eu","origins":["a","b","c"],"weight":{"a":200,"b":400,"c":400}}},"AT":{"before":{"shard":"eu","origins":["a","b"],"weight":{"a":20,"b":80}},"after":{"shard":"eu","origins":["b"],"weight":{"b":100}}}},"shed":{"percent":50,"steps":[{"percent":50,"achieved":null,"reason":"INC-1","source":"cli","by":"ops","at":"2026-01-01T00:00:00Z"}]}}"#.to_vec(),
            mod_revision: 5,
        },
    );
    let record = record(&old).unwrap();
    assert_eq!(record.sources(), [SOURCE_CLI]);
    let part = record.part(SOURCE_CLI).unwrap();
    assert!((part.regions["DE"].factor - 0.5).abs() < 1e-9);
    assert!(part.regions["AT"].drains());
    // Written back unchanged, it is the same schema-3 bytes' record (no `parts`).
    assert!(!record.encode().contains("parts"));
    let back = restore(&old, SOURCE_CLI);
    assert_eq!(weights(&back), weights(&configured()));
    assert!(crate::drain_parts_tests::record(&back).is_none());
    // health's restore leaves a person's old record alone.
    let untouched = plan_restore(&old, "a", Restoring::Own(SOURCE_HEALTH)).unwrap();
    assert!(untouched.is_empty());
}

#[test]
fn records_with_parts_that_do_not_read_are_malformed() {
    let configured = configured();
    let shed = apply(
        &configured,
        &act(&configured, SOURCE_AUTOPILOT, None).unwrap(),
    );
    let both = apply(&shed, &act(&shed, SOURCE_CLI, None).unwrap());
    let text = record(&both).unwrap().encode();
    assert!(text.contains(r#""schema":4"#), "{text}");
    for (from, to) in [
        // A newer schema.
        (r#""schema":4"#, r#""schema":5"#),
        // Parts in an older schema.
        (r#""schema":4"#, r#""schema":3"#),
        // Two parts of one source.
        (
            r#""source":"cli","reason":"cli acts""#,
            r#""source":"autopilot","reason":"cli acts""#,
        ),
        // A factor out of range.
        (r#""factor":0.0"#, r#""factor":1.5"#),
    ] {
        assert!(text.contains(from), "{from} in {text}");
        let broken = text.replacen(from, to, 1);
        assert!(DrainRecord::parse("a", broken.as_bytes()).is_err(), "{to}");
    }
}

#[test]
fn the_autopilots_part_neither_counts_nor_exempts_from_the_fleet_limit() {
    use crate::drain::{FleetLimit, fleet_limit_counts};
    let configured = configured();
    let shed = apply(
        &configured,
        &act(&configured, SOURCE_AUTOPILOT, None).unwrap(),
    );
    assert!(
        fleet_limit_counts(&shed).is_empty(),
        "the autopilot's part does not count"
    );
    // health drained b already: with one of three allowed out, a's health drain is
    // refused, the autopilot's shed of a no reason to let it through.
    let b_out = plan_drain(
        &shed,
        &DrainRequest {
            origin: "b".into(),
            ..request(SOURCE_HEALTH, &[])
        },
    )
    .unwrap();
    let b_out = apply(&shed, &b_out);
    assert_eq!(fleet_limit_counts(&b_out), ["b"]);
    let limited = DrainRequest {
        fleet_limit: Some(FleetLimit {
            origins: ["a", "b", "c"]
                .iter()
                .map(|name| (*name).to_owned())
                .collect(),
            max_drained: 1,
        }),
        ..request(SOURCE_HEALTH, &[])
    };
    assert!(matches!(
        plan_drain(&b_out, &limited),
        Err(Error::Failed(_))
    ));
    // Without b out, it goes through, and then a counts.
    let a_out = apply(&shed, &plan_drain(&shed, &limited).unwrap());
    assert_eq!(fleet_limit_counts(&a_out), ["a"]);
}

#[test]
fn a_record_holds_at_most_max_parts() {
    let configured = configured();
    let shed = apply(
        &configured,
        &act(&configured, SOURCE_AUTOPILOT, None).unwrap(),
    );
    let both = apply(&shed, &act(&shed, SOURCE_CLI, None).unwrap());
    let mut record = record(&both).unwrap();
    let template = record.parts[1].clone();
    while record.parts.len() < MAX_PARTS {
        let mut part = template.clone();
        part.source = format!("source-{}", record.parts.len());
        record.parts.push(part);
    }
    // At the limit: read.
    let at = DrainRecord::parse("a", record.encode().as_bytes()).unwrap();
    assert_eq!(at.parts.len(), MAX_PARTS);
    // One more: malformed, and the message says how many.
    let mut part = template;
    part.source = "one-too-many".into();
    record.parts.push(part);
    let error = DrainRecord::parse("a", record.encode().as_bytes()).unwrap_err();
    assert!(
        error.to_string().contains("1 to 8 parts, it has 9"),
        "{error}"
    );
}

/// What dwctl's commit does with a plan (`ops::commit`): the follow-ups that keep drain
/// records and open stages in step, then everything written, stages too.
fn committed(state: &State, mut changes: Changes) -> State {
    crate::bucket_assignment::assign_buckets(state, &mut changes).unwrap();
    crate::drain::reconcile_drain_records(state, &mut changes).unwrap();
    crate::stage::reconcile_stages(state, &mut changes).unwrap();
    crate::bucket_assignment::assign_buckets(state, &mut changes).unwrap();
    let mut next = apply(state, &changes);
    for (id, stage) in &changes.stages {
        match stage {
            Some(stage) => {
                next.stages.insert(
                    id.clone(),
                    Entry {
                        raw: stage.to_json().into_bytes(),
                        mod_revision: next.revision,
                    },
                );
            }
            None => {
                next.stages.remove(id);
            }
        }
    }
    next
}

/// The staged value of `region/DE` in stage `s1` (`None`: the key left the stage).
fn staged_de(state: &State) -> Option<crate::value::RegionValue> {
    let stage = crate::stage::parse_stage("s1", state.stages.get("s1")?).unwrap();
    let raw = stage.kvs.get("region/DE")?.as_ref()?;
    Some(crate::value::RegionValue::from_stored(raw.as_bytes()).unwrap())
}

#[test]
fn a_staged_value_gets_the_other_part_back_and_the_last_restore_the_value_itself() {
    // An open stage holds DE at other weights. A person drains a in DE (the stage's value
    // loses a too); health drains a everywhere (its part joins in DE; a shed would not
    // join a drained region). The person's restore gives the staged value health's part
    // re-applied, not the staged value whole, and the record keeps `stages`; health's
    // restore, the last, brings the staged value back exactly.
    use dw_routing::stage::{Cohort, STAGE_SCHEMA, Stage};
    let staged_text = r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":60,"b":20,"c":20}}"#;
    let staged = crate::value::RegionValue::from_stored(staged_text.as_bytes()).unwrap();
    let stage = Stage {
        schema: STAGE_SCHEMA,
        id: "s1".into(),
        cohort: Cohort {
            points: 500,
            ..Cohort::default()
        },
        kvs: [("region/DE".to_string(), Some(staged_text.to_string()))].into(),
        base: [("region/DE".to_string(), 1)].into(),
        created_by: "t".into(),
        created_at: "t".into(),
        reason: "t".into(),
    };
    let mut start = configured();
    start.stages.insert(
        "s1".into(),
        Entry {
            raw: stage.to_json().into_bytes(),
            mod_revision: 1,
        },
    );

    let drained = committed(&start, act(&start, SOURCE_CLI, None).unwrap());
    assert!(!staged_de(&drained).unwrap().lists("a"));
    assert!(record(&drained).unwrap().stages["s1"].contains_key("DE"));
    let both = committed(
        &drained,
        plan_drain(&drained, &request(SOURCE_HEALTH, &[])).unwrap(),
    );
    let record_both = record(&both).unwrap();
    assert_eq!(record_both.sources(), [SOURCE_CLI, SOURCE_HEALTH]);
    assert!(record_both.stages["s1"].contains_key("DE"));
    assert_eq!(
        staged_de(&both),
        staged_de(&drained),
        "a join leaves the stage"
    );

    // The person's part goes: the staged value with health's part re-applied.
    let health_de = record_both.part(SOURCE_HEALTH).unwrap().regions["DE"].clone();
    let expected = crate::drain_parts::compose(&staged, "a", &[&health_de]).unwrap();
    let person_restored = committed(
        &both,
        plan_restore(&both, "a", Restoring::Part(SOURCE_CLI)).unwrap(),
    );
    let staged_now = staged_de(&person_restored).expect("DE stays staged");
    assert_eq!(staged_now.listed_weights(), expected.listed_weights());
    assert_ne!(staged_now.listed_weights(), staged.listed_weights());
    let record_health = record(&person_restored).unwrap();
    assert_eq!(record_health.sources(), [SOURCE_HEALTH]);
    assert!(record_health.stages["s1"].contains_key("DE"), "stages kept");

    // The last part goes: the staged value exactly, and the record with it.
    let all_restored = committed(
        &person_restored,
        plan_restore(&person_restored, "a", Restoring::Own(SOURCE_HEALTH)).unwrap(),
    );
    assert_eq!(
        staged_de(&all_restored).unwrap().listed_weights(),
        staged.listed_weights()
    );
    assert!(record(&all_restored).is_none());
    assert_eq!(weights(&all_restored), weights(&configured()));
}
