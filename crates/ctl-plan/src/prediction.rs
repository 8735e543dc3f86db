//! The load a planned change makes (pure): the routing table before and after the change,
//! compiled by `dw-routing` exactly as the edge nodes compile it, each origin's load
//! predicted on both by `dw-capacity`, and the capacity guard.
//!
//! The tables hold current routing as a node in no stage's cohort serves it: a change of
//! routing leaves open stages out (the prediction says so). A change that writes a stage
//! (`stage create`, `stage widen`) is predicted on the nodes of its cohort
//! ([`stage::predict_stage`]): per node when the traffic has per-node rates, else with the
//! cohort's share of the fleet, assuming its nodes see the fleet's mix. The math is
//! docs/capacity.md's; the storage and the commands are docs/dwctl.md's "Capacity,
//! prediction and shedding".

pub mod caveats;
pub mod stage;

use std::collections::BTreeMap;

use dw_capacity::{Comparison, FittingShed, GuardReport, Load, Overload, Traffic};
use dw_routing::{Snapshot, Table};
use serde_json::{Value, json};

use crate::Error;
use crate::bucket_assignment::{buckets_after, state_buckets};
use crate::capacity::{number_json, percent};
use crate::model::{Changes, StageEdits, State};
use crate::shown::Shown;

/// Whether a change touches routing at all (regions or the policy): only those are
/// predicted.
pub fn changes_routing(changes: &Changes) -> bool {
    !changes.regions.is_empty() || changes.policy.is_some()
}

/// The table of `state`'s routing, with `changes` applied when given.
pub fn table(state: &State, prefix: &str, changes: Option<&Changes>) -> Table {
    let mut snapshot = snapshot(state, prefix);
    if let Some(changes) = changes {
        let region_prefix = format!("{prefix}{}", dw_routing::keys::REGION);
        for (geo, value) in &changes.regions {
            let key = format!("{region_prefix}{geo}");
            match value {
                Some(value) => {
                    snapshot.kvs.insert(key, value.encode(""));
                }
                None => {
                    snapshot.kvs.remove(&key);
                }
            }
        }
        if let Some(policy) = &changes.policy {
            let policy_key = format!("{prefix}{}", dw_routing::keys::POLICY);
            snapshot.kvs.insert(policy_key, policy.encode(""));
        }
    }
    Table::from_snapshot(&snapshot)
}

/// `state`'s routing keys as a snapshot under `prefix`.
fn snapshot(state: &State, prefix: &str) -> Snapshot {
    let mut snapshot = Snapshot::new(u64::try_from(state.revision).unwrap_or(0), prefix);
    let region_prefix = format!("{prefix}{}", dw_routing::keys::REGION);
    for (geo, entry) in &state.regions {
        snapshot.kvs.insert(
            format!("{region_prefix}{geo}"),
            String::from_utf8_lossy(&entry.raw).into_owned(),
        );
    }
    if let Some(policy) = &state.policy {
        snapshot.kvs.insert(
            format!("{prefix}{}", dw_routing::keys::POLICY),
            String::from_utf8_lossy(&policy.raw).into_owned(),
        );
    }
    snapshot
}

/// How a staged change was predicted.
#[derive(Debug, Clone, PartialEq)]
pub struct StagedBasis {
    /// The stage's id.
    pub stage: String,
    /// `None`: the traffic has per-node rates, each node's geos went through its own
    /// table. Otherwise fleet totals: the cohort's share of the fleet, assumed to see the
    /// fleet's mix.
    pub assumed_share: Option<CohortShare>,
}

/// A cohort's share of the fleet, before and after the change, when the traffic has no
/// per-node rates.
#[derive(Debug, Clone, PartialEq)]
pub struct CohortShare {
    /// Before the change (0 for a new stage).
    pub before: f64,
    /// After it.
    pub after: f64,
    /// What the share was sized by: the cohort's percentage, or its live nodes among the
    /// fleet's (`2 of 8 live nodes`).
    pub by: String,
}

/// A change's predicted load, and what the guard says of it.
#[derive(Debug, Clone)]
pub struct Prediction {
    /// Each origin's load on current routing.
    pub before: Load,
    /// Each origin's load after the change.
    pub after: Load,
    /// Before and after per origin, and the geos that move.
    pub comparison: Comparison,
    /// The guard's findings on `after`.
    pub guard: GuardReport,
    /// The capacities judged (answers/s by origin).
    pub capacities: BTreeMap<String, f64>,
    /// The headroom used.
    pub headroom: f64,
    /// When the guard refuses: the largest part of the change that fits.
    pub fitting: Option<(String, FittingShed)>,
    /// Whether open stages were left out of the prediction.
    pub stages_open: bool,
    /// Set when the change writes a stage: how its cohort was predicted.
    pub staged: Option<StagedBasis>,
    /// Set when the change turns visitor buckets on or off or changes N.
    pub buckets: Option<BucketsChange>,
}

/// A change of `policy/global`'s visitor buckets, as predicted (docs/capacity.md,
/// "Visitor buckets").
#[derive(Debug, Clone, PartialEq)]
pub struct BucketsChange {
    /// N before (`None`: off).
    pub before: Option<u16>,
    /// N after (`None`: off).
    pub after: Option<u16>,
    /// Turned on from off: every plain answer was predicted as bucketed on both sides
    /// (today a country's visitors all answer on one origin; the region's assignment
    /// decides once the front controller gives each visitor a bucket).
    pub assumed_bucketed: bool,
}

impl BucketsChange {
    /// The change of N `changes` make on `state`, if any.
    pub fn of(state: &State, changes: &Changes) -> Option<BucketsChange> {
        let before = state_buckets(state);
        let after = buckets_after(state, changes).ok()?;
        BucketsChange::between(before.map(|n| n.get()), after.map(|n| n.get()))
    }

    /// The change from N `before` to `after`, if they differ.
    pub fn between(before: Option<u16>, after: Option<u16>) -> Option<BucketsChange> {
        (before != after).then_some(BucketsChange {
            before,
            after,
            assumed_bucketed: before.is_none(),
        })
    }

    /// The traffic both sides are predicted with: `traffic`, its plain answers counted as
    /// bucketed when buckets are turned on.
    pub fn traffic(change: Option<&BucketsChange>, traffic: &Traffic) -> Traffic {
        match change {
            Some(change) if change.assumed_bucketed => traffic.plain_as_bucketed(),
            _ => traffic.clone(),
        }
    }
}

impl Prediction {
    /// The overloads the change causes or worsens (what the guard refuses).
    pub fn refused(&self) -> Vec<&Overload> {
        self.guard.rising(&self.before).collect()
    }
}

/// Predicts `changes` on `state` with `traffic`, and judges the result.
pub fn predict_change(
    state: &State,
    changes: &Changes,
    prefix: &str,
    traffic: &Traffic,
) -> Result<Prediction, Error> {
    let buckets = BucketsChange::of(state, changes);
    let traffic = &BucketsChange::traffic(buckets.as_ref(), traffic);
    let before = dw_capacity::predict(&table(state, prefix, None), traffic);
    let after = dw_capacity::predict(&table(state, prefix, Some(changes)), traffic);
    let comparison = dw_capacity::compare(&before, &after);
    let capacities = state.valid_capacities();
    let headroom = state.headroom();
    let failed =
        |error: dw_capacity::Error| Error::Failed(format!("the prediction failed: {error}"));
    let guard = dw_capacity::guard(&after, &capacities, headroom).map_err(failed)?;
    let mut fitting = None;
    if guard.rising(&before).next().is_some() {
        // The origin the change takes load off: the drained one, else the one losing most.
        let origin = match &changes.stage_edits {
            StageEdits::Drain(request) => Some(request.origin.clone()),
            _ => comparison
                .origins
                .iter()
                .filter(|change| change.after < change.before)
                .max_by(|a, b| (a.before - a.after).total_cmp(&(b.before - b.after)))
                .map(|change| change.origin.clone()),
        };
        if let Some(origin) = origin {
            let shed =
                dw_capacity::largest_fitting_shed(&before, &after, &origin, &capacities, headroom)
                    .map_err(failed)?;
            fitting = Some((origin, shed));
        }
    }
    Ok(Prediction {
        before,
        after,
        comparison,
        guard,
        capacities,
        headroom,
        fitting,
        stages_open: !state.stages.is_empty(),
        staged: None,
        buckets,
    })
}

fn rate(value: f64) -> String {
    if value >= 100.0 {
        format!("{value:.0}/s")
    } else {
        format!("{value:.1}/s")
    }
}

/// The refusal's message: each origin above its guard, and the largest part that fits.
pub fn refusal(prediction: &Prediction) -> String {
    let mut message = format!(
        "refused, nothing written: the change puts origins above their guard ({}% of \
         capacity):",
        percent(prediction.headroom)
    );
    for overload in prediction.refused() {
        message.push_str(&format!(
            "\n  {}: predicted {} (now {}), capacity {}, guard {}",
            Shown(&overload.origin),
            rate(overload.predicted),
            rate(prediction.before.of(&overload.origin)),
            rate(overload.capacity),
            rate(overload.limit),
        ));
    }
    match &prediction.fitting {
        Some((origin, fitting)) if fitting.percent > 0.0 => message.push_str(&format!(
            "\nthe largest part that would fit: about {}% of {}'s load ({}% of this change; \
             bound by {})",
            number_json((fitting.percent * 10.0).floor() / 10.0),
            Shown(origin),
            percent(fitting.fraction_of_plan),
            Shown(fitting.limited_by.as_deref().unwrap_or("-")),
        )),
        Some((origin, _)) => message.push_str(&format!(
            "\nno part of it fits: taking any load off {} overloads an origin already at its \
             guard",
            Shown(origin)
        )),
        None => {}
    }
    message.push_str(
        "\n--allow-overload commits it anyway (recorded in an audit record under \
         <control-prefix>audit/); capacities: `dwctl origin list`",
    );
    message
}

/// The prediction as lines and JSON: each origin whose load changes (before → after, % of
/// capacity), with `geos` every geo that moves, then the origins the guard cannot judge.
pub fn render(prediction: &Prediction, source: &str, geos: bool) -> (Vec<String>, Value) {
    let mut lines = vec![format!(
        "predicted load ({source}; {} in all, {}% not placeable: other, overflow, fail-open):",
        rate(prediction.before.total),
        percent(prediction.before.unplaced_share())
    )];
    let of_capacity = |origin: &str, load: f64| {
        prediction
            .capacities
            .get(origin)
            .map(|capacity| format!("{}%", percent(load / capacity)))
    };
    let mut origins = Vec::new();
    for change in prediction.comparison.changed_origins() {
        let capacity = prediction.capacities.get(&change.origin);
        let over = prediction
            .guard
            .overloads
            .iter()
            .any(|overload| overload.origin == change.origin);
        lines.push(format!(
            "  {:<12} {} -> {}  {}{}",
            Shown(&change.origin).to_string(),
            rate(change.before),
            rate(change.after),
            match capacity {
                Some(capacity) => format!(
                    "({} -> {} of {})",
                    of_capacity(&change.origin, change.before).unwrap_or_default(),
                    of_capacity(&change.origin, change.after).unwrap_or_default(),
                    rate(*capacity)
                ),
                None => "(no capacity)".into(),
            },
            if over { "  ABOVE THE GUARD" } else { "" }
        ));
        origins.push(json!({
            "origin": change.origin,
            "before": change.before,
            "after": change.after,
            "capacity": capacity.map(|capacity| number_json(*capacity)),
            "used_before": capacity.map(|capacity| change.before / capacity),
            "used_after": capacity.map(|capacity| change.after / capacity),
            "above_guard": over,
        }));
    }
    if origins.is_empty() {
        lines.push("  no origin's load changes".into());
    }
    let mut moves = Vec::new();
    for moved in &prediction.comparison.moves {
        let mut parts: Vec<String> = moved
            .plain
            .iter()
            .map(|flow| {
                let name = |origin: &Option<String>| {
                    origin
                        .as_deref()
                        .map_or("fail-open".to_string(), |origin| Shown(origin).to_string())
                };
                format!(
                    "{} {} -> {}",
                    rate(flow.rate),
                    name(&flow.from),
                    name(&flow.to)
                )
            })
            .collect();
        for (kind, changes) in [("sticky", &moved.sticky), ("bucketed", &moved.bucket)] {
            parts.extend(changes.iter().map(|change| {
                format!(
                    "{kind} {} {} -> {}",
                    Shown(&change.origin),
                    rate(change.before),
                    rate(change.after)
                )
            }));
        }
        if geos {
            lines.push(format!(
                "  geo {}: {}",
                Shown(if moved.geo.is_empty() {
                    "(empty)"
                } else {
                    &moved.geo
                }),
                parts.join("; ")
            ));
        }
        moves.push(json!({
            "geo": moved.geo,
            "plain": moved.plain.iter().map(|flow| json!({"from": flow.from, "to": flow.to, "rate": flow.rate})).collect::<Vec<_>>(),
            "sticky": moved.sticky.iter().map(|change| json!({"origin": change.origin, "before": change.before, "after": change.after})).collect::<Vec<_>>(),
            "bucket": moved.bucket.iter().map(|change| json!({"origin": change.origin, "before": change.before, "after": change.after})).collect::<Vec<_>>(),
        }));
    }
    let buckets = bucket_lines(prediction, &mut lines);
    if !geos && !moves.is_empty() {
        lines.push(format!(
            "  {} geo(s) move (--dry-run lists them)",
            moves.len()
        ));
    }
    let unjudged: Vec<String> = prediction
        .guard
        .without_capacity
        .iter()
        .filter(|origin| {
            prediction
                .comparison
                .changed_origins()
                .any(|change| &change.origin == *origin)
        })
        .map(|origin| Shown(origin).to_string())
        .collect();
    if !unjudged.is_empty() {
        lines.push(format!(
            "  no capacity, not judged by the guard: {} (`dwctl origin capacity`)",
            unjudged.join(", ")
        ));
    }
    if let Some(staged) = &prediction.staged {
        lines.push(match &staged.assumed_share {
            None => format!(
                "  stage {}: each node's own traffic through its table (per-node rates)",
                Shown(&staged.stage)
            ),
            Some(share) => format!(
                "  stage {}: assumed the cohort's nodes see the fleet's mix (the traffic has no \
                 per-node rates): the cohort is {}% -> {}% of the fleet ({})",
                Shown(&staged.stage),
                percent(share.before),
                percent(share.after),
                Shown(&share.by)
            ),
        });
    }
    if prediction.stages_open {
        lines.push(match prediction.staged {
            Some(_) => "  other open stages are not predicted".into(),
            None => "  open stages are not predicted: this is the load of the nodes outside \
                     their cohorts"
                .into(),
        });
    }
    let json = json!({
        "made": true,
        "source": source,
        "total": prediction.before.total,
        "no_route_after": prediction.after.no_route,
        "unplaced_share": prediction.before.unplaced_share(),
        "headroom": prediction.headroom,
        "origins": origins,
        "moves": moves,
        "without_capacity": prediction.guard.without_capacity,
        "overloads": prediction.guard.overloads.iter().map(|overload| json!({
            "origin": overload.origin, "predicted": overload.predicted,
            "capacity": overload.capacity, "limit": overload.limit})).collect::<Vec<_>>(),
        "stages_open": prediction.stages_open,
        "staged": prediction.staged.as_ref().map(|staged| json!({
            "stage": staged.stage,
            "per_node": staged.assumed_share.is_none(),
            "assumed_fleet_mix": staged.assumed_share.is_some(),
            "share_before": staged.assumed_share.as_ref().map(|share| share.before),
            "share_after": staged.assumed_share.as_ref().map(|share| share.after),
            "share_by": staged.assumed_share.as_ref().map(|share| share.by.clone()),
        })),
        "buckets": buckets,
    });
    (lines, json)
}

/// The bucketed answers that change origin, per origin (what a change of the assignment
/// moves: visitors, each keeping its bucket), and the change of N if any, as lines added
/// to `lines` and as JSON (`null` when nothing bucketed moves and N stays).
fn bucket_lines(prediction: &Prediction, lines: &mut Vec<String>) -> Value {
    let mut by_origin: BTreeMap<&str, (f64, f64)> = BTreeMap::new();
    for moved in &prediction.comparison.moves {
        for change in &moved.bucket {
            let entry = by_origin.entry(change.origin.as_str()).or_default();
            entry.0 += (change.before - change.after).max(0.0);
            entry.1 += (change.after - change.before).max(0.0);
        }
    }
    let change = prediction.buckets.as_ref();
    if by_origin.is_empty() && change.is_none() {
        return Value::Null;
    }
    let bucketed: f64 = prediction
        .after
        .geos
        .values()
        .map(|geo| geo.rate.bucket)
        .sum();
    let moving: f64 = by_origin.values().map(|(_, gains)| gains).sum();
    let n = |n: Option<u16>| n.map_or("off".to_string(), |n| n.to_string());
    if let Some(change) = change {
        lines.push(format!(
            "  visitor buckets: {} -> {}",
            n(change.before),
            n(change.after)
        ));
        if change.assumed_bucketed {
            lines.push(
                "  assumed: every plain answer becomes bucketed (the front controller's                  bucket helper gives each visitor a bucket); today a country's visitors all                  answer on one origin, after it the region's assignment decides"
                    .into(),
            );
        }
    }
    lines.push(format!(
        "  bucketed answers changing origin: {} of {} ({}%)",
        rate(moving),
        rate(bucketed),
        percent(if bucketed > 0.0 {
            moving / bucketed
        } else {
            0.0
        })
    ));
    for (origin, (losses, gains)) in &by_origin {
        lines.push(format!(
            "    {:<12} -{} +{}",
            Shown(origin).to_string(),
            rate(*losses),
            rate(*gains)
        ));
    }
    json!({
        "before": change.map(|change| change.before),
        "after": change.map(|change| change.after),
        "changes_n": change.is_some(),
        "assumed_bucketed": change.is_some_and(|change| change.assumed_bucketed),
        "bucketed": bucketed,
        "moving": moving,
        "origins": by_origin.iter().map(|(origin, (losses, gains))| json!({
            "origin": origin, "leaving": losses, "arriving": gains})).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain_record::DrainRequest;
    use crate::model::Entry;

    pub(super) fn entry(raw: &str) -> Entry {
        Entry {
            raw: raw.as_bytes().to_vec(),
            mod_revision: 2,
        }
    }

    pub(super) fn state() -> State {
        let mut state = State {
            revision: 7,
            ..State::default()
        };
        state.regions.insert(
            "DE".into(),
            entry(
                r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#,
            ),
        );
        state.capacities.insert(
            "fra-b".into(),
            entry(r#"{"answers_per_s":1000,"by":"","at":""}"#),
        );
        state
    }

    fn drain(state: &State) -> Changes {
        crate::drain::plan_drain(
            state,
            &DrainRequest {
                origin: "fra-a".into(),
                regions: vec![],
                reason: "t".into(),
                source: "cli".into(),
                by: "t".into(),
                at: "t".into(),
                force: false,
                skip_emptying: false,
                fleet_limit: None,
            },
        )
        .unwrap()
    }

    #[test]
    fn a_drain_onto_a_small_origin_is_refused_with_the_part_that_fits() {
        let state = state();
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let prediction = predict_change(&state, &drain(&state), "/dw/routing/", &traffic).unwrap();
        assert!((prediction.after.of("fra-b") - 1000.0).abs() < 1e-6);
        let refused = prediction.refused();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].origin, "fra-b");
        let message = refusal(&prediction);
        assert!(
            message.contains("fra-b: predicted 1000/s (now 500/s), capacity 1000/s, guard 800/s"),
            "{message}"
        );
        // 300 of fra-a's 500 fit under fra-b's 800: 60 %.
        assert!(message.contains("about 60% of fra-a's load"), "{message}");
        let (lines, json) = render(&prediction, "file t.json", true);
        assert!(
            lines.iter().any(|line| line.contains("fra-b")
                && line.contains("(50% -> 100% of 1000/s)  ABOVE THE GUARD")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|line| line.contains("fra-a") && line.contains("(no capacity)")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|line| line.starts_with("  geo DE: sticky")),
            "{lines:?}"
        );
        assert_eq!(json["overloads"][0]["origin"], "fra-b");
    }

    fn policy(raw: &str) -> Changes {
        Changes {
            policy: Some(crate::value::PolicyValue::for_write(raw.as_bytes()).unwrap()),
            ..Changes::default()
        }
    }

    #[test]
    fn turning_buckets_on_predicts_the_visitors_that_move_and_is_guarded() {
        let mut state = state();
        state.capacities.clear();
        // Today all of DE's 2000/s answer on the one origin its country picks.
        let traffic = Traffic::parse(br#"{"geos":{"DE":2000}}"#).unwrap();
        let today = dw_capacity::predict(&table(&state, "/dw/routing/", None), &traffic);
        let (on, off) = if today.of("fra-a") > 0.0 {
            ("fra-a", "fra-b")
        } else {
            ("fra-b", "fra-a")
        };
        state.capacities.insert(
            off.into(),
            entry(r#"{"answers_per_s":1000,"by":"","at":""}"#),
        );
        let prediction = predict_change(
            &state,
            &policy(r#"{"buckets":16}"#),
            "/dw/routing/",
            &traffic,
        )
        .unwrap();
        let change = prediction.buckets.clone().unwrap();
        assert_eq!((change.before, change.after), (None, Some(16)));
        assert!(change.assumed_bucketed);
        // 8 of 16 buckets each: half the visitors move, onto a capacity of 1000/s whose
        // guard is 800/s.
        assert!((prediction.after.of(off) - 1000.0).abs() < 1e-6);
        assert!((prediction.after.of(on) - 1000.0).abs() < 1e-6);
        assert_eq!(prediction.refused()[0].origin, off);
        let (lines, json) = render(&prediction, "file t.json", true);
        assert!(
            lines.contains(&"  visitor buckets: off -> 16".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"  bucketed answers changing origin: 1000/s of 2000/s (50%)".into()),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|line| line.contains("assumed: every plain answer"))
        );
        assert_eq!(json["buckets"]["moving"], 1000.0);
        assert_eq!(json["buckets"]["origins"][0]["origin"], "fra-a");
    }

    #[test]
    fn a_change_of_n_moves_no_visitor_whose_bucket_stays_below_it() {
        let mut state = state();
        state.policy = Some(entry(r#"{"buckets":16}"#));
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"bucket":1600}}}"#).unwrap();
        let mut changes = policy(r#"{"buckets":64}"#);
        crate::bucket_assignment::assign_buckets(&state, &mut changes).unwrap();
        let prediction = predict_change(&state, &changes, "/dw/routing/", &traffic).unwrap();
        assert!(!prediction.buckets.as_ref().unwrap().assumed_bucketed);
        assert!(prediction.refused().is_empty());
        let (lines, json) = render(&prediction, "file t.json", true);
        assert!(
            lines.contains(&"  visitor buckets: 16 -> 64".to_string()),
            "{lines:?}"
        );
        assert_eq!(json["buckets"]["moving"], 0.0);
        // Turned off, bucketed answers fall back on the country's one origin.
        let off = predict_change(
            &state,
            &policy(r#"{"buckets":0}"#),
            "/dw/routing/",
            &traffic,
        )
        .unwrap();
        let (lines, _) = render(&off, "file t.json", true);
        assert!(
            lines.contains(&"  visitor buckets: 16 -> off".to_string()),
            "{lines:?}"
        );
        assert!(
            lines.contains(&"  bucketed answers changing origin: 800/s of 1600/s (50%)".into()),
            "{lines:?}"
        );
    }

    #[test]
    fn a_change_within_the_guard_passes_and_one_without_routing_is_not_predicted() {
        let mut state = state();
        state.capacities.insert(
            "fra-b".into(),
            entry(r#"{"answers_per_s":2000,"by":"","at":""}"#),
        );
        let traffic = Traffic::parse(br#"{"geos":{"DE":1000}}"#).unwrap();
        let prediction = predict_change(&state, &drain(&state), "/dw/routing/", &traffic).unwrap();
        assert!(prediction.refused().is_empty());
        assert!(prediction.fitting.is_none());
        assert!(!changes_routing(&Changes::default()));
    }
}
