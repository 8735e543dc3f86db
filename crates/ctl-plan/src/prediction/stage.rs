//! Predicting a change that writes a stage (`stage create`, `stage widen`) on the nodes of
//! its cohort: the staged table each member runs ([`staged_table`]), per node when the
//! traffic has per-node rates, else the cohort's share of the fleet, assumed to see the
//! fleet's mix ([`predict_stage`]). The [`Prediction`] it makes is judged and rendered as
//! any other (the parent module).

use std::collections::BTreeMap;

use dw_capacity::{NodeTables, Traffic, predict_nodes, predict_share};
use dw_routing::Table;
use dw_routing::stage::{Node, Stage};

use super::{BucketsChange, CohortShare, Prediction, StagedBasis, snapshot, table};
use crate::model::{Changes, State};
use crate::node_report::NodeReport;
use crate::stage::parse_stage;

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
    // A stage of the policy that changes N: its cohort runs the staged N.
    let buckets = BucketsChange::between(
        fleet.buckets().map(|n| n.get()),
        staged_after.buckets().map(|n| n.get()),
    );
    let traffic = &BucketsChange::traffic(buckets.as_ref(), traffic);
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
        buckets,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::prediction::tests::{entry, state};
    use crate::prediction::{refusal, render};

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
    fn a_stage_turning_buckets_on_is_predicted_on_its_cohort() {
        // A 20 % cohort turns buckets on: its share of DE's 1000/s splits 50/50 by the
        // assignment, so 100/s of visitors change origin.
        let state = state();
        let traffic = Traffic::parse(br#"{"geos":{"DE":1000}}"#).unwrap();
        let mut stage = stage_onto_fra_b(percent_cohort(2000));
        stage.kvs = BTreeMap::from([(
            "policy/global".to_string(),
            Some(r#"{"buckets":16}"#.to_string()),
        )]);
        let prediction = predict_stage(&state, &writing(&stage), "/dw/routing/", &traffic, &[])
            .unwrap()
            .unwrap();
        let change = prediction.buckets.clone().unwrap();
        assert_eq!((change.before, change.after), (None, Some(16)));
        let (lines, json) = render(&prediction, "file t.json", true);
        assert!(
            lines.contains(&"  bucketed answers changing origin: 100/s of 1000/s (10%)".into()),
            "{lines:?}"
        );
        assert_eq!(json["buckets"]["assumed_bucketed"], true);
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
