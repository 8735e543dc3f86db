//! The load a planned change makes (pure): the routing table before and after the change,
//! compiled by `dw-routing` exactly as the edge nodes compile it, each origin's load
//! predicted on both by `dw-capacity`, and the capacity guard.
//!
//! The tables hold current routing as a node in no stage's cohort serves it: a change of
//! routing leaves open stages out (the prediction says so). A change that writes a stage
//! (`stage create`, `stage widen`) is predicted on the nodes of its cohort
//! ([`predict_stage`]): per node when the traffic has per-node rates, else with the
//! cohort's share of the fleet, assuming its nodes see the fleet's mix. The math is
//! docs/capacity.md's; the storage and the commands are docs/dwctl.md's "Capacity,
//! prediction and shedding".

use std::collections::BTreeMap;

use dw_capacity::{
    Comparison, FittingShed, GuardReport, Load, NodeTables, Overload, Traffic, predict_nodes,
    predict_share,
};
use dw_routing::stage::{Node, Stage};
use dw_routing::{Snapshot, Table};
use serde_json::{Value, json};

use crate::Error;
use crate::capacity::{number_json, percent};
use crate::model::{Changes, StageEdits, State};
use crate::node_report::NodeReport;
use crate::shown::Shown;
use crate::stage::parse_stage;

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

/// The table the nodes of `stage`'s cohort run: `state`'s routing with the staged values
/// (a staged `None` deletes the key), as the agent applies a stage.
pub fn staged_table(state: &State, prefix: &str, stage: &Stage) -> Table {
    let mut snapshot = snapshot(state, prefix);
    for (key, value) in &stage.kvs {
        let key = format!("{prefix}{key}");
        match value {
            Some(raw) => {
                snapshot.kvs.insert(key, raw.clone());
            }
            None => {
                snapshot.kvs.remove(&key);
            }
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
    })
}

/// Whether a change writes a stage's values or cohort (`stage create`, `stage widen`):
/// those are predicted by [`predict_stage`]. Closing a stage (abort, promote) is not one.
pub fn writes_stage(changes: &Changes) -> bool {
    changes.stages.values().any(Option::is_some)
}

/// Predicts a change that writes a stage (the first one `changes` writes) on the nodes of
/// its cohort, before (the stage as `state` holds it: none for a new stage, the narrower
/// cohort for a widen) and after, and judges the result. With per-node traffic each node
/// is judged a cohort member by its id and its labels in `nodes` (a node without a report
/// has none); with fleet totals only, the cohort's share of the fleet runs the staged
/// table ([`predict_share`]): its percentage for a cohort given by percentage only, else
/// its live members among the live `nodes`. `Ok(None)`: the change writes no stage;
/// `Err`: why no prediction can be made.
pub fn predict_stage(
    state: &State,
    changes: &Changes,
    prefix: &str,
    traffic: &Traffic,
    nodes: &[NodeReport],
) -> Result<Option<Prediction>, String> {
    let Some((id, after)) = changes
        .stages
        .iter()
        .find_map(|(id, stage)| stage.as_ref().map(|stage| (id, stage)))
    else {
        return Ok(None);
    };
    let before = state
        .stages
        .get(id)
        .and_then(|entry| parse_stage(id, entry).ok());
    let fleet = table(state, prefix, None);
    let staged_after = staged_table(state, prefix, after);
    let staged_before = before
        .as_ref()
        .map(|stage| (stage, staged_table(state, prefix, stage)));
    let failed = |error: dw_capacity::Error| format!("the prediction failed: {error}");
    let (load_before, load_after, assumed_share) = match traffic.nodes() {
        Some(per_node) => {
            let tables = || NodeTables {
                fleet: &fleet,
                nodes: BTreeMap::new(),
                fleet_size: per_node.len(),
            };
            let mut before_tables = tables();
            if let Some((stage, table)) = &staged_before {
                before_tables.nodes = cohort_tables(stage, table, per_node.keys(), nodes);
            }
            let mut after_tables = tables();
            after_tables.nodes = cohort_tables(after, &staged_after, per_node.keys(), nodes);
            let load_before = predict_nodes(&before_tables, traffic).map_err(failed)?;
            let load_after = predict_nodes(&after_tables, traffic).map_err(failed)?;
            (load_before, load_after, None)
        }
        None => {
            let (share_after, by) = cohort_share(after, nodes)?;
            let (share_before, staged_was) = match &staged_before {
                Some((stage, table)) => (cohort_share(stage, nodes)?.0, table),
                None => (0.0, &staged_after),
            };
            let load_before =
                predict_share(&fleet, staged_was, share_before, traffic).map_err(failed)?;
            let load_after =
                predict_share(&fleet, &staged_after, share_after, traffic).map_err(failed)?;
            let share = CohortShare {
                before: share_before,
                after: share_after,
                by,
            };
            (load_before, load_after, Some(share))
        }
    };
    let comparison = dw_capacity::compare(&load_before, &load_after);
    let capacities = state.valid_capacities();
    let headroom = state.headroom();
    let guard = dw_capacity::guard(&load_after, &capacities, headroom).map_err(failed)?;
    Ok(Some(Prediction {
        before: load_before,
        after: load_after,
        comparison,
        guard,
        capacities,
        headroom,
        fitting: None,
        stages_open: state.stages.keys().any(|other| other != id),
        staged: Some(StagedBasis {
            stage: id.clone(),
            assumed_share,
        }),
    }))
}

/// The nodes of the traffic (`ids`) in `stage`'s cohort, each running `staged`: judged by
/// its id and its labels in `nodes` (a node without a report has none).
fn cohort_tables<'t, 'i>(
    stage: &Stage,
    staged: &'t Table,
    ids: impl Iterator<Item = &'i String>,
    nodes: &[NodeReport],
) -> BTreeMap<String, &'t Table> {
    let no_labels = BTreeMap::new();
    ids.filter(|id| {
        let labels = nodes
            .iter()
            .find(|node| &node.id == *id)
            .map_or(&no_labels, |node| &node.labels);
        stage.cohort.contains(&stage.id, &Node { id, labels })
    })
    .map(|id| (id.clone(), staged))
    .collect()
}

/// A cohort's share of the fleet from fleet totals: its percentage when it is given by
/// percentage only, else its live members among the live `nodes` (with what it was sized
/// by); `Err` when there is no live node to size it by.
fn cohort_share(stage: &Stage, nodes: &[NodeReport]) -> Result<(f64, String), String> {
    let cohort = &stage.cohort;
    if cohort.nodes.is_empty() && cohort.labels.is_empty() {
        let share = f64::from(cohort.points.min(dw_routing::stage::COHORT_POINTS))
            / f64::from(dw_routing::stage::COHORT_POINTS);
        return Ok((share, "its percentage".into()));
    }
    let live: Vec<&NodeReport> = nodes.iter().filter(|node| node.live).collect();
    if live.is_empty() {
        return Err(
            "the traffic has no per-node rates and no live node reports to size the stage's \
             cohort by"
                .into(),
        );
    }
    let members = live
        .iter()
        .filter(|node| {
            cohort.contains(
                &stage.id,
                &Node {
                    id: &node.id,
                    labels: &node.labels,
                },
            )
        })
        .count();
    Ok((
        members as f64 / live.len() as f64,
        format!("{members} of {} live nodes", live.len()),
    ))
}

/// What an automatic drain records of its predicted load (`predicted` in its drain
/// record): `{"made": true, "source", "headroom", "overloads": [{"origin", "predicted",
/// "before", "capacity", "limit"}]}` (the overloads the drain causes or worsens), or
/// `{"made": false, "why"}`.
pub fn drain_prediction(
    state: &State,
    changes: &Changes,
    prefix: &str,
    traffic: &Result<(Traffic, String), String>,
) -> Value {
    let (traffic, source) = match traffic {
        Ok(found) => found,
        Err(why) => return json!({"made": false, "why": why}),
    };
    if let Some(why) = &state.capacities_unreadable {
        return json!({"made": false, "why": why});
    }
    match predict_change(state, changes, prefix, traffic) {
        Ok(prediction) => json!({
            "made": true,
            "source": source,
            "headroom": prediction.headroom,
            "overloads": prediction.refused().iter().map(|overload| json!({
                "origin": overload.origin,
                "predicted": overload.predicted,
                "before": prediction.before.of(&overload.origin),
                "capacity": overload.capacity,
                "limit": overload.limit,
            })).collect::<Vec<_>>(),
        }),
        Err(error) => json!({"made": false, "why": error.to_string()}),
    }
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
        parts.extend(moved.sticky.iter().map(|change| {
            format!(
                "sticky {} {} -> {}",
                Shown(&change.origin),
                rate(change.before),
                rate(change.after)
            )
        }));
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
        }));
    }
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
    });
    (lines, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain_record::DrainRequest;
    use crate::model::Entry;

    fn entry(raw: &str) -> Entry {
        Entry {
            raw: raw.as_bytes().to_vec(),
            mod_revision: 2,
        }
    }

    fn state() -> State {
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

    #[test]
    fn an_automatic_drain_records_its_overloads_or_why_none_were_predicted() {
        let state = state();
        let changes = drain(&state);
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let recorded =
            drain_prediction(&state, &changes, "/dw/routing/", &Ok((traffic, "f".into())));
        assert_eq!(recorded["made"], true);
        assert_eq!(recorded["overloads"][0]["origin"], "fra-b");
        assert_eq!(recorded["overloads"][0]["capacity"], 1000.0);
        let none = drain_prediction(&state, &changes, "/dw/routing/", &Err("no source".into()));
        assert_eq!(none, json!({"made": false, "why": "no source"}));
    }

    fn node(id: &str, live: bool, labels: &[(&str, &str)]) -> NodeReport {
        let report = json!({"revision": 7, "state": "ok"});
        NodeReport {
            id: id.into(),
            live,
            revision: Some(7),
            state: "ok".into(),
            reason: None,
            labels: labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            published_at_ms: None,
            reported_at_ms: None,
            report: dw_node_report::NodeReport::from_value(&report),
            raw: report,
            untrusted: None,
        }
    }

    /// A stage moving DE wholly onto fra-b, on `cohort`.
    fn stage_onto_fra_b(cohort: dw_routing::stage::Cohort) -> Stage {
        Stage {
            schema: dw_routing::stage::STAGE_SCHEMA,
            id: "s1".into(),
            cohort,
            kvs: BTreeMap::from([(
                "region/DE".to_string(),
                Some(r#"{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100}}"#.to_string()),
            )]),
            base: BTreeMap::new(),
            created_by: "t".into(),
            created_at: "t".into(),
            reason: String::new(),
        }
    }

    fn writing(stage: &Stage) -> Changes {
        let mut changes = Changes::default();
        changes.stages.insert(stage.id.clone(), Some(stage.clone()));
        changes
    }

    fn percent_cohort(points: u16) -> dw_routing::stage::Cohort {
        dw_routing::stage::Cohort {
            points,
            ..Default::default()
        }
    }

    #[test]
    fn a_new_stage_with_fleet_totals_moves_its_cohorts_share() {
        // DE: 1000/s sticky over fra-a:50 fra-b:50. A 20 % cohort sending DE wholly to
        // fra-b moves 20 % of fra-a's 500/s: fra-b 500 -> 600, under its guard of 800.
        let state = state();
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let stage = stage_onto_fra_b(percent_cohort(2000));
        let prediction = predict_stage(&state, &writing(&stage), "/dw/routing/", &traffic, &[])
            .unwrap()
            .unwrap();
        assert!((prediction.before.of("fra-b") - 500.0).abs() < 1e-6);
        assert!((prediction.after.of("fra-b") - 600.0).abs() < 1e-6);
        assert!((prediction.after.of("fra-a") - 400.0).abs() < 1e-6);
        assert!(prediction.refused().is_empty());
        let share = prediction
            .staged
            .as_ref()
            .unwrap()
            .assumed_share
            .clone()
            .unwrap();
        assert_eq!((share.before, share.after), (0.0, 0.2));
        assert_eq!(share.by, "its percentage");
        let (lines, json) = render(&prediction, "f", true);
        assert!(
            lines.iter().any(|line| line.contains(
                "stage s1: assumed the cohort's nodes see the fleet's mix (the traffic has no \
                 per-node rates): the cohort is 0% -> 20% of the fleet (its percentage)"
            )),
            "{lines:?}"
        );
        assert_eq!(json["staged"]["assumed_fleet_mix"], true);
        assert_eq!(json["staged"]["share_after"], 0.2);
        assert!(
            !prediction.stages_open,
            "the stage itself is what is predicted"
        );
    }

    #[test]
    fn a_widen_is_judged_from_the_narrower_cohort_and_refused_above_the_guard() {
        // Widening 20 % -> 80 %: fra-b 600 -> 900, above its guard of 800.
        let mut state = state();
        let narrow = stage_onto_fra_b(percent_cohort(2000));
        state
            .stages
            .insert("s1".into(), entry(&serde_json::to_string(&narrow).unwrap()));
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let wide = stage_onto_fra_b(percent_cohort(8000));
        let prediction = predict_stage(&state, &writing(&wide), "/dw/routing/", &traffic, &[])
            .unwrap()
            .unwrap();
        assert!((prediction.before.of("fra-b") - 600.0).abs() < 1e-6);
        assert!((prediction.after.of("fra-b") - 900.0).abs() < 1e-6);
        let refused = prediction.refused();
        assert_eq!(refused.len(), 1);
        assert_eq!(refused[0].origin, "fra-b");
        assert!(refusal(&prediction).contains("fra-b: predicted 900/s (now 600/s)"));
    }

    #[test]
    fn a_cohort_of_nodes_is_sized_by_the_live_reports_or_not_at_all() {
        let state = state();
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let mut cohort = percent_cohort(0);
        cohort.labels.insert("site".into(), "fra".into());
        let stage = stage_onto_fra_b(cohort);
        let nodes = [
            node("edge-1", true, &[("site", "fra")]),
            node("edge-2", true, &[]),
            node("edge-3", true, &[]),
            node("edge-4", true, &[]),
            node("edge-5", false, &[("site", "fra")]),
        ];
        let prediction = predict_stage(&state, &writing(&stage), "/dw/routing/", &traffic, &nodes)
            .unwrap()
            .unwrap();
        // 1 of 4 live nodes: a quarter of fra-a's 500/s moves.
        assert!((prediction.after.of("fra-b") - 625.0).abs() < 1e-6);
        let share = prediction.staged.unwrap().assumed_share.unwrap();
        assert_eq!(share.by, "1 of 4 live nodes");
        let why = predict_stage(
            &state,
            &writing(&stage),
            "/dw/routing/",
            &traffic,
            &nodes[4..],
        )
        .unwrap_err();
        assert!(why.contains("no live node reports"), "{why}");
    }

    #[test]
    fn per_node_traffic_goes_through_each_members_table() {
        // edge-1 (site=fra, in the cohort) answers 500/s of DE, edge-2 500/s.
        let state = state();
        let traffic = Traffic::parse(
            br#"{"nodes":{"edge-1":{"DE":{"sticky":500}},"edge-2":{"DE":{"sticky":500}}}}"#,
        )
        .unwrap();
        let mut cohort = percent_cohort(0);
        cohort.labels.insert("site".into(), "fra".into());
        let stage = stage_onto_fra_b(cohort);
        let nodes = [node("edge-1", true, &[("site", "fra")])];
        let prediction = predict_stage(&state, &writing(&stage), "/dw/routing/", &traffic, &nodes)
            .unwrap()
            .unwrap();
        // edge-1's 500 all on fra-b, edge-2's 500 split 250/250: fra-b 750 (guard 800).
        assert!((prediction.after.of("fra-b") - 750.0).abs() < 1e-6);
        assert!((prediction.after.of("fra-a") - 250.0).abs() < 1e-6);
        assert!(prediction.refused().is_empty());
        assert_eq!(prediction.staged.as_ref().unwrap().assumed_share, None);
        let (lines, json) = render(&prediction, "f", false);
        assert!(
            lines
                .iter()
                .any(|line| line.contains("stage s1: each node's own traffic")),
            "{lines:?}"
        );
        assert_eq!(json["staged"]["per_node"], true);
    }

    #[test]
    fn closing_a_stage_or_changing_routing_is_no_staged_prediction() {
        let state = state();
        let traffic = Traffic::parse(br#"{"geos":{"DE":1000}}"#).unwrap();
        let mut abort = Changes::default();
        abort.stages.insert("s1".into(), None);
        assert!(!writes_stage(&abort));
        assert!(
            predict_stage(&state, &abort, "/dw/routing/", &traffic, &[])
                .unwrap()
                .is_none()
        );
        let stage = stage_onto_fra_b(percent_cohort(100));
        assert!(writes_stage(&writing(&stage)));
    }
}
