//! The control law's table tests: each rule of the law on a small fleet.

use std::collections::{BTreeMap, BTreeSet};

use dw_capacity::{RegionEdit, Traffic};
use dw_routing::Table;

use super::Settings;
use super::harm::Harm;
use super::law::{
    ActionKind, Decision, Direction, HoldReason, Memory, Reading, RecordOf, World, decide, measure,
};

fn table(kvs: &[(&str, &str)]) -> Table {
    let mut members: Vec<String> = kvs
        .iter()
        .map(|(geo, value)| {
            format!(
                "{}:{}",
                serde_json::to_string(&format!("/dw/routing/region/{geo}")).unwrap(),
                serde_json::to_string(value).unwrap()
            )
        })
        .collect();
    members.push(r#""/dw/routing/policy/global":"{\"pick\":\"rendezvous\"}""#.to_owned());
    let text = format!(
        r#"{{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{{{}}}}}"#,
        members.join(",")
    );
    Table::parse(text.as_bytes()).unwrap()
}

fn traffic(geos: &[(&str, f64)]) -> Traffic {
    let body: Vec<String> = geos
        .iter()
        .map(|(geo, rate)| format!("\"{geo}\":{{\"sticky\":{rate}}}"))
        .collect();
    Traffic::parse(format!("{{\"geos\":{{{}}}}}", body.join(",")).as_bytes()).unwrap()
}

fn caps(pairs: &[(&str, f64)]) -> BTreeMap<String, f64> {
    pairs
        .iter()
        .map(|(name, cap)| ((*name).to_owned(), *cap))
        .collect()
}

/// The fleet: `a` serves DE (home), FR and the EU bucket, `b` and `c` share them.
fn fleet() -> Table {
    table(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu","origins":["a","c"],"weight":{"a":1,"c":1}}"#,
        ),
        (
            "continent/EU",
            r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":2,"b":1,"c":1}}"#,
        ),
    ])
}

struct Run {
    settings: Settings,
    memory: Memory,
    capacities: BTreeMap<String, f64>,
    records: BTreeMap<String, RecordOf>,
    staged: BTreeSet<String>,
    homes: BTreeMap<String, BTreeSet<String>>,
}

impl Run {
    fn new(capacities: &[(&str, f64)]) -> Run {
        Run {
            settings: Settings::default(),
            memory: Memory::default(),
            capacities: caps(capacities),
            records: BTreeMap::new(),
            staged: BTreeSet::new(),
            homes: BTreeMap::new(),
        }
    }

    fn eval(&mut self, now: u64, table: &Table, traffic: Result<&Traffic, &str>) -> Decision {
        let world = World {
            now,
            capacities: &self.capacities,
            headroom: 0.8,
            records: &self.records,
            staged: &self.staged,
            homes: &self.homes,
        };
        match traffic {
            Ok(traffic) => {
                let loads = measure(table, traffic);
                decide(
                    &self.settings,
                    &mut self.memory,
                    &world,
                    Ok(Reading {
                        table,
                        traffic,
                        loads: &loads,
                    }),
                )
                .unwrap()
            }
            Err(why) => decide(
                &self.settings,
                &mut self.memory,
                &world,
                Err(why.to_owned()),
            )
            .unwrap(),
        }
    }
}

/// DE 400, FR 400, EU 800 answers/s, all sticky: a gets 200 + 200 + 400 = 800.
fn busy() -> Traffic {
    traffic(&[("DE", 400.0), ("FR", 400.0), ("AT", 800.0)])
}

fn reasons(decision: &Decision) -> Vec<(&str, &'static str)> {
    decision
        .holds
        .iter()
        .map(|hold| (hold.origin.as_str(), hold.reason.label()))
        .collect()
}

#[test]
fn a_relief_waits_for_its_streak_then_brings_the_origin_under_target_minus_band() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    // a: 800/s against a target of 720: over.
    let first = run.eval(0, &table, Ok(&traffic));
    assert_eq!(first.over_target, ["a"]);
    assert!(first.action.is_none(), "one evaluation over is not --for 2");
    let second = run.eval(2, &table, Ok(&traffic));
    let action = second.action.expect("relieved on the second evaluation");
    assert_eq!(action.kind, ActionKind::Relieve);
    let goal = 720.0 * 0.95;
    assert!(action.predicted <= 720.0, "{}", action.predicted);
    assert!(
        (action.predicted - goal).abs() < 0.02 * 720.0,
        "{} vs {goal}",
        action.predicted
    );
    assert!(
        action.moved <= 800.0 - goal + 0.02 * 720.0,
        "no more than wanted: {}",
        action.moved
    );
    // Least harm first: the EU bucket, never DE (a's home here? not yet) before it.
    assert_eq!(action.harms, [Harm::Shared]);
    assert!(action.edits.iter().all(|edit| edit.geo == "continent/EU"));
    for (name, _, after) in &action.changed {
        assert!(
            *after <= 0.8 * run.capacities[name] + 1e-9 || name == "a",
            "{name} {after}"
        );
    }
    assert!(
        action.reason().contains("measured 800.0/s, target 720.0/s"),
        "{}",
        action.reason()
    );
    assert_eq!(
        run.memory.origins["a"].last_direction,
        Some(Direction::Down)
    );
}

#[test]
fn home_geos_move_last() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 500.0), ("b", 2000.0), ("c", 2000.0)]);
    run.homes
        .insert("a".into(), BTreeSet::from(["DE".to_owned()]));
    run.settings.max_moved_per_minute = 1.0;
    run.eval(0, &table, Ok(&traffic));
    let action = run.eval(2, &table, Ok(&traffic)).action.unwrap();
    // 800 → 380 needs more than the bucket's 400: FR (own key) next, DE (home) last.
    assert_eq!(action.harms, [Harm::Shared, Harm::OwnKey]);
    assert!(!action.edits.iter().any(|edit| edit.geo == "DE"));
}

#[test]
fn fail_static_an_unusable_source_moves_nothing_and_no_streak() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.eval(0, &table, Ok(&traffic));
    let held = run.eval(2, &table, Err("Prometheus did not answer"));
    assert!(held.action.is_none());
    assert_eq!(reasons(&held), [("", "source_unusable")]);
    assert_eq!(run.memory.origins["a"].over, 1, "the streak did not move");
    assert!(run.eval(4, &table, Ok(&traffic)).action.is_some());
}

#[test]
fn another_sources_record_holds_the_origin() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.records
        .insert("a".into(), RecordOf::Other("cli".into()));
    run.eval(0, &table, Ok(&traffic));
    let decision = run.eval(2, &table, Ok(&traffic));
    assert!(decision.action.is_none());
    assert_eq!(reasons(&decision), [("a", "other_source")]);
    assert_eq!(
        decision.holds[0].reason,
        HoldReason::OtherSource("cli".into())
    );
}

#[test]
fn beside_another_sources_part_it_holds_but_gives_its_own_part_back() {
    // Over target with the autopilot's part beside a person's: held, no relief.
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.records.insert(
        "a".into(),
        RecordOf::Shared {
            own: Vec::new(),
            other: "cli".into(),
        },
    );
    run.eval(0, &table, Ok(&traffic));
    let decision = run.eval(2, &table, Ok(&traffic));
    assert!(decision.action.is_none());
    assert_eq!(reasons(&decision), [("a", "other_source")]);

    // Quiet, its part is given back toward the values the other part keeps.
    let shed = crate::autopilot::law_tests::table(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        ),
        (
            "continent/EU",
            r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":100,"b":450,"c":450}}"#,
        ),
    ]);
    let toward = vec![edit("continent/EU", &[("a", 2), ("b", 1), ("c", 1)])];
    let quiet = crate::autopilot::law_tests::traffic(&[("DE", 100.0), ("AT", 200.0)]);
    let mut back = Run::new(&[("a", 1000.0), ("b", 1000.0), ("c", 1000.0)]);
    back.settings.max_moved_per_minute = 1.0;
    back.records.insert(
        "a".into(),
        RecordOf::Shared {
            own: toward.clone(),
            other: "health".into(),
        },
    );
    back.eval(0, &shed, Ok(&quiet));
    let all = back
        .eval(600, &shed, Ok(&quiet))
        .action
        .expect("given back");
    assert_eq!(all.kind, ActionKind::GiveBackAll);
    assert_eq!(all.edits, toward);

    // Drained everywhere by the other part, a answers nothing and is in no load: it is
    // measured at 0, and its part is given back all the same (no edit: the drain stays).
    let drained = crate::autopilot::law_tests::table(&[
        ("DE", r#"{"shard":"eu","origins":["b"],"weight":{"b":100}}"#),
        (
            "continent/EU",
            r#"{"shard":"eu","origins":["b","c"],"weight":{"b":50,"c":50}}"#,
        ),
    ]);
    let kept = vec![edit("continent/EU", &[("b", 50), ("c", 50)])];
    let mut out = Run::new(&[("a", 1000.0), ("b", 1000.0), ("c", 1000.0)]);
    out.settings.max_moved_per_minute = 1.0;
    out.records.insert(
        "a".into(),
        RecordOf::Shared {
            own: kept,
            other: "cli".into(),
        },
    );
    assert!(out.eval(0, &drained, Ok(&quiet)).action.is_none());
    let given = out
        .eval(600, &drained, Ok(&quiet))
        .action
        .expect("its part given back");
    assert_eq!(given.kind, ActionKind::GiveBackAll);
    assert!(given.edits.is_empty(), "{:?}", given.edits);
}

#[test]
fn min_interval_and_the_per_minute_cap_hold() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.settings.min_interval = 30;
    run.eval(0, &table, Ok(&traffic));
    assert!(run.eval(2, &table, Ok(&traffic)).action.is_some());
    // The table is not changed here, so a is still over: held by the interval.
    run.eval(4, &table, Ok(&traffic));
    let cooling = run.eval(31, &table, Ok(&traffic));
    assert_eq!(reasons(&cooling), [("a", "min_interval")]);
    // At 32 the interval is over, but the cap (10 % of 1,600/s = 160/s a minute) was
    // spent by the first relief's 116/s only in part: the second is cut to what is left.
    let capped = run.eval(32, &table, Ok(&traffic));
    let action = capped.action.expect("the rest of the cap");
    assert!(action.moved <= 160.0 - 116.0 + 1.0, "{}", action.moved);
    // Spent: the next one (its streak built again, its interval set aside) waits for
    // the window.
    run.eval(34, &table, Ok(&traffic));
    run.memory.origins.get_mut("a").unwrap().last_action = Some(0);
    let spent = run.eval(36, &table, Ok(&traffic));
    assert_eq!(reasons(&spent), [("a", "rate_cap")]);
}

#[test]
fn a_staged_region_is_skipped_and_reported() {
    let table = fleet();
    let traffic = busy();
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.staged.insert("continent/EU".into());
    run.eval(0, &table, Ok(&traffic));
    let decision = run.eval(2, &table, Ok(&traffic));
    assert_eq!(decision.skipped_staged["a"], ["continent/EU"]);
    let action = decision.action.unwrap();
    assert!(action.edits.iter().all(|edit| edit.geo != "continent/EU"));
    assert!(
        action
            .reason()
            .contains("staged regions skipped: continent/EU")
    );
}

#[test]
fn everyone_over_target_moves_only_what_lowers_the_highest_utilisation() {
    let table = fleet();
    let traffic = busy();
    // a: 800 of 900 (0.89); b: 400 of 480 (0.83), c: 400 of 480 (0.83): all over 0.8.
    let mut run = Run::new(&[("a", 900.0), ("b", 480.0), ("c", 480.0)]);
    run.eval(0, &table, Ok(&traffic));
    let decision = run.eval(2, &table, Ok(&traffic));
    assert!(decision.fleet_over_target);
    let action = decision.action.expect("a relief up to the ceiling");
    assert_eq!(action.kind, ActionKind::RelieveAtCeiling);
    let before_max = 800.0 / 900.0;
    let after_max = action
        .changed
        .iter()
        .map(|(name, _, after)| after / run.capacities[name])
        .fold(0.0, f64::max);
    assert!(after_max < before_max, "{after_max} < {before_max}");
    assert!(after_max <= 0.9 + 1e-9);
    // With b and c above the ceiling already, nothing moves: not off a (0.94), and not
    // off b or c (0.91) onto the other or a.
    let mut full = Run::new(&[("a", 850.0), ("b", 440.0), ("c", 440.0)]);
    full.eval(0, &table, Ok(&traffic));
    let none = full.eval(2, &table, Ok(&traffic));
    assert!(none.fleet_over_target && none.action.is_none());
    assert_eq!(
        reasons(&none),
        [("a", "no_room"), ("b", "no_room"), ("c", "no_room")]
    );
}

fn edit(geo: &str, weights: &[(&str, u32)]) -> RegionEdit {
    RegionEdit {
        geo: geo.into(),
        shard: "eu".into(),
        origins: weights.iter().map(|(name, _)| (*name).to_owned()).collect(),
        weight: weights
            .iter()
            .map(|(name, w)| ((*name).to_owned(), *w))
            .collect(),
    }
}

#[test]
fn give_back_after_the_low_watermark_whole_or_a_step_or_hold() {
    // a was shed to 100/1000 of the bucket by the autopilot (its record: 2:1:1 before).
    let shed = table(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        ),
        (
            "continent/EU",
            r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":100,"b":450,"c":450}}"#,
        ),
    ]);
    let before = vec![edit("continent/EU", &[("a", 2), ("b", 1), ("c", 1)])];
    let quiet = traffic(&[("DE", 100.0), ("AT", 200.0)]);
    let mut run = Run::new(&[("a", 1000.0), ("b", 1000.0), ("c", 1000.0)]);
    run.settings.max_moved_per_minute = 1.0;
    run.records
        .insert("a".into(), RecordOf::Own(before.clone()));
    assert!(run.eval(0, &shed, Ok(&quiet)).action.is_none());
    assert!(
        run.eval(599, &shed, Ok(&quiet)).action.is_none(),
        "not for 10 min yet"
    );
    let all = run.eval(600, &shed, Ok(&quiet)).action.expect("given back");
    assert_eq!(all.kind, ActionKind::GiveBackAll);
    assert_eq!(all.edits, before);

    // Busier: the whole would put a over target × 0.95 (a: 50 + 1000 × 0.5 = 550 vs
    // 760), so only... every figure: a now 50 + 2,000 × 0.1 = 250 < 0.7 × 800 = 560.
    let busier = traffic(&[("DE", 100.0), ("AT", 2000.0)]);
    let mut step = Run::new(&[("a", 1000.0), ("b", 2000.0), ("c", 2000.0)]);
    step.settings.max_moved_per_minute = 1.0;
    step.records
        .insert("a".into(), RecordOf::Own(before.clone()));
    step.eval(0, &shed, Ok(&busier));
    let part = step
        .eval(600, &shed, Ok(&busier))
        .action
        .expect("a step back");
    assert_eq!(part.kind, ActionKind::GiveBackStep);
    assert!(part.predicted <= 800.0, "{}", part.predicted);
    assert_eq!(step.memory.origins["a"].last_direction, Some(Direction::Up));

    // Busiest: even a quarter would overload a.
    let busiest = traffic(&[("DE", 100.0), ("AT", 5000.0)]);
    let mut hold = Run::new(&[("a", 1300.0), ("b", 9000.0), ("c", 9000.0)]);
    hold.settings.max_moved_per_minute = 1.0;
    hold.records.insert("a".into(), RecordOf::Own(before));
    hold.eval(0, &shed, Ok(&busiest));
    let held = hold.eval(600, &shed, Ok(&busiest));
    assert!(held.action.is_none());
    assert_eq!(reasons(&held), [("a", "give_back_would_overload")]);
}

#[test]
fn direction_changes_are_counted() {
    let mut memory = Memory::default();
    let table = fleet();
    let traffic = busy();
    let capacities = caps(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    let (records, staged, homes) = (BTreeMap::new(), BTreeSet::new(), BTreeMap::new());
    let settings = Settings::default();
    for now in [0, 2] {
        let world = World {
            now,
            capacities: &capacities,
            headroom: 0.8,
            records: &records,
            staged: &staged,
            homes: &homes,
        };
        let loads = measure(&table, &traffic);
        decide(
            &settings,
            &mut memory,
            &world,
            Ok(Reading {
                table: &table,
                traffic: &traffic,
                loads: &loads,
            }),
        )
        .unwrap();
    }
    assert_eq!(memory.origins["a"].direction_changes, 0);
    assert_eq!(memory.origins["a"].last_direction, Some(Direction::Down));
}

/// `busy()` × `factor`: a's load is 800 × factor.
fn busy_times(factor: f64) -> Traffic {
    traffic(&[
        ("DE", 400.0 * factor),
        ("FR", 400.0 * factor),
        ("AT", 800.0 * factor),
    ])
}

/// a's capacity `capacity`, b and c 1,000; `--for` 3, `trend_horizon` as given; a's
/// load 800 × each factor at t = 0, 2, 4: the action at 4 (none before).
fn relief_after(capacity: f64, horizon: u64, factors: [f64; 3]) -> super::law::Action {
    let table = fleet();
    let mut run = Run::new(&[("a", capacity), ("b", 1000.0), ("c", 1000.0)]);
    run.settings.over_for = 3;
    run.settings.trend_horizon = horizon;
    run.settings.max_moved_per_minute = 1.0;
    for (now, factor) in [(0, factors[0]), (2, factors[1])] {
        let decision = run.eval(now, &table, Ok(&busy_times(factor)));
        assert!(decision.action.is_none(), "not before --for 3");
    }
    run.eval(4, &table, Ok(&busy_times(factors[2])))
        .action
        .expect("relieved at the third evaluation")
}

#[test]
fn a_rising_load_is_relieved_ahead_by_its_slope_within_the_bound() {
    // Flat (slope 0): the plain aim, target × 0.95 = 684, nothing ahead.
    let flat = relief_after(900.0, 4, [1.1, 1.1, 1.1]);
    assert_eq!(flat.ahead, 0.0);
    assert!(
        (flat.predicted - 684.0).abs() < 0.02 * 720.0,
        "{}",
        flat.predicted
    );
    // Rising 20/s (800, 840, 880) with a 4 s horizon: 80/s further down.
    let rising = relief_after(900.0, 4, [1.0, 1.05, 1.1]);
    assert!((rising.ahead - 80.0).abs() < 1e-6, "{}", rising.ahead);
    assert!(
        (rising.predicted - (684.0 - 80.0)).abs() < 0.02 * 720.0,
        "{}",
        rising.predicted
    );
    assert!(
        rising
            .reason()
            .contains("aimed 80.0/s ahead of a rising load")
    );
    // A 40 s horizon would be 800/s ahead: bounded at a quarter of the target (180/s).
    let bounded = relief_after(900.0, 40, [1.0, 1.05, 1.1]);
    assert!(
        (bounded.ahead - 0.25 * 720.0).abs() < 1e-6,
        "{}",
        bounded.ahead
    );
    assert!(
        (bounded.predicted - (684.0 - 180.0)).abs() < 0.02 * 720.0,
        "{}",
        bounded.predicted
    );
    // Falling (960, 920, 880 against a target of 800): nothing ahead, the plain aim 760.
    let falling = relief_after(1000.0, 40, [1.2, 1.15, 1.1]);
    assert_eq!(falling.ahead, 0.0);
    assert!(
        (falling.predicted - 760.0).abs() < 0.02 * 800.0,
        "{}",
        falling.predicted
    );
    // Horizon 0: the trend is off.
    let off = relief_after(900.0, 0, [1.0, 1.05, 1.1]);
    assert_eq!(off.ahead, 0.0);
}

#[test]
fn a_relief_changing_the_table_is_not_read_as_a_trend() {
    // The same traffic at 0, 2 and 4, but the table changed in between: the slope is taken
    // under the table now, so it is 0 (a's measured load fell only by the table).
    let table = fleet();
    let shed = table_with_eu_weights(1, 2, 2);
    let mut run = Run::new(&[("a", 900.0), ("b", 1000.0), ("c", 1000.0)]);
    run.settings.over_for = 3;
    run.settings.max_moved_per_minute = 1.0;
    let traffic = busy();
    run.eval(0, &shed, Ok(&traffic));
    run.eval(2, &shed, Ok(&traffic));
    // a under `shed`: 200 + 200 + 800 × 1/5 = 560 (not over); under `fleet`: 800.
    let decision = run.eval(4, &table, Ok(&traffic));
    assert!(decision.action.is_none(), "the streak starts at 4");
    run.eval(6, &table, Ok(&traffic));
    let action = run.eval(8, &table, Ok(&traffic)).action.expect("relieved");
    assert_eq!(action.ahead, 0.0, "no slope from a table change");
}

fn table_with_eu_weights(a: u32, b: u32, c: u32) -> Table {
    let eu =
        format!(r#"{{"shard":"eu","origins":["a","b","c"],"weight":{{"a":{a},"b":{b},"c":{c}}}}}"#);
    table(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        ),
        (
            "FR",
            r#"{"shard":"eu","origins":["a","c"],"weight":{"a":1,"c":1}}"#,
        ),
        ("continent/EU", &eu),
    ])
}

#[test]
fn above_capacity_is_acted_on_at_once_and_without_min_interval() {
    let table = fleet();
    let traffic = busy();
    // a: 800/s against a capacity of 780: relieved at the first evaluation (--for 2).
    let mut run = Run::new(&[("a", 780.0), ("b", 1000.0), ("c", 1000.0)]);
    run.settings.max_moved_per_minute = 1.0;
    let first = run.eval(0, &table, Ok(&traffic));
    let action = first.action.expect("an emergency acts at once");
    assert!(action.reason().contains("above capacity: acted at once"));
    // The table is not changed here: still above capacity 2 s later, it acts again,
    // --min-interval (30 s) notwithstanding.
    assert!(run.eval(2, &table, Ok(&traffic)).action.is_some());
    // Exactly at capacity is not above it: the streak and --min-interval hold as ever.
    let mut at = Run::new(&[("a", 800.0), ("b", 1000.0), ("c", 1000.0)]);
    at.settings.max_moved_per_minute = 1.0;
    assert!(at.eval(0, &table, Ok(&traffic)).action.is_none());
    assert!(at.eval(2, &table, Ok(&traffic)).action.is_some());
    at.eval(4, &table, Ok(&traffic));
    let cooling = at.eval(6, &table, Ok(&traffic));
    assert_eq!(reasons(&cooling), [("a", "min_interval")]);
}

#[test]
fn no_give_back_while_the_load_rises_past_the_band() {
    // a shed to 100/1000 of the bucket (its record: 2:1:1 before), capacity 1,000 (target
    // 800, band 40/s over the 40 s horizon: rising means more than 1/s).
    let shed = table(&[
        (
            "DE",
            r#"{"shard":"eu","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        ),
        (
            "continent/EU",
            r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":100,"b":450,"c":450}}"#,
        ),
    ]);
    let before = vec![edit("continent/EU", &[("a", 2), ("b", 1), ("c", 1)])];
    let at = |rate: f64| traffic(&[("DE", 100.0), ("AT", rate)]);
    let run_with = |rates: [f64; 3]| {
        let mut run = Run::new(&[("a", 1000.0), ("b", 1000.0), ("c", 1000.0)]);
        run.settings.max_moved_per_minute = 1.0;
        run.records
            .insert("a".into(), RecordOf::Own(before.clone()));
        run.eval(0, &shed, Ok(&at(rates[0])));
        run.eval(596, &shed, Ok(&at(rates[0])));
        run.eval(598, &shed, Ok(&at(rates[1])));
        run.eval(600, &shed, Ok(&at(rates[2])))
    };
    // a: 50 + AT / 10: 70, 90, 110 (10/s): rising, held.
    let held = run_with([200.0, 400.0, 600.0]);
    assert!(held.action.is_none());
    assert_eq!(reasons(&held), [("a", "rising")]);
    // 70, 71, 72 (0.5/s: 20/s over the horizon, under the band's 40): given back.
    let slow = run_with([200.0, 210.0, 220.0]);
    assert_eq!(
        slow.action.expect("given back").kind,
        ActionKind::GiveBackAll
    );
    // Falling: given back.
    let falling = run_with([600.0, 400.0, 200.0]);
    assert!(falling.action.is_some());
}
