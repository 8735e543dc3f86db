//! Planning a shed (pure): lower an origin's share of its load by about `PERCENT`
//! instead of taking it out, and `--spill` for sheds and drains.
//!
//! With traffic, the weights come from `dw-capacity`'s shed search on the table the nodes
//! compile (the real pick: a changed weight rehashes a region's plain geos under legacy),
//! which reports the percent it achieves; without traffic the origin's share of each
//! region is lowered by `PERCENT` (exact for sticky traffic under rendezvous, and said
//! so). `shed 100` is [`plan_drain`], exactly. What a shed changed is kept in the origin's
//! drain record (schema 3, [`crate::shed_record`]), so that `restore` gives every
//! region back its value from before the first shed.
//!
//! `--spill` ([`add_spill`]) runs `dw-capacity`'s spill on a planned drain or shed: origins
//! from the next steps of each changed region's chain that already serve its shard are
//! added with the least weight that keeps every origin within its guard. It needs traffic
//! and capacities (refused without them: there would be nothing to judge a weight by).

use std::collections::BTreeSet;

use dw_capacity::{RegionEdit, SpillRequest, Traffic};

use crate::drain::{DrainRequest, check_origin_name, plan_drain};
use crate::drain_record::record_region;
use crate::drain_record::{DrainRecord, LimitedChange};
use crate::model::{Changes, StageEdits, State};
use crate::prediction::table;
use crate::shed_record::ShedStep;
use crate::stage::open_stages;
use crate::value::RegionValue;
use crate::{Error, FieldError};
use dw_capacity::renormalise;

/// What a shed's weights sum to in a region it changes (finer than a drain's 100, as
/// `dw-capacity` plans them).
pub const SHED_TOTAL: u32 = dw_capacity::SHED_TOTAL;

/// A shed to plan: the drain's fields (origin, regions, reason, who, the automation's
/// limits), the percent, and whether to spill.
#[derive(Debug, Clone)]
pub struct ShedRequest {
    /// Origin, regions, reason, source, by, at; `force`, `skip_emptying` and
    /// `fleet_limit` as a drain has them (a shed of 100 is that drain).
    pub drain: DrainRequest,
    /// Percent of the origin's predicted load to move: above 0, at most 100.
    pub percent: f64,
    /// Add spill origins where the guard would be passed.
    pub spill: bool,
}

/// The traffic a plan may search with, or why there is none.
pub type TrafficView<'a> = Result<&'a Traffic, String>;

/// Plans a shed on `state` (see the module's documentation).
pub fn plan_shed(
    state: &State,
    prefix: &str,
    traffic: TrafficView<'_>,
    request: &ShedRequest,
) -> Result<Changes, Error> {
    let drain = &request.drain;
    let origin = drain.origin.as_str();
    check_origin_name("origin", origin)?;
    if !(request.percent.is_finite() && request.percent > 0.0 && request.percent <= 100.0) {
        return Err(Error::Usage(format!(
            "PERCENT {}: above 0 and at most 100",
            request.percent
        )));
    }
    if request.percent >= 100.0 {
        let mut changes = plan_drain(state, drain)?;
        if request.spill {
            add_spill(state, prefix, traffic, origin, &mut changes)?;
        }
        return Ok(changes);
    }
    let existing = state.drain_record(origin)?;
    let (values, achieved, mut notes) = match &traffic {
        Ok(traffic) => searched(state, prefix, traffic, origin, request)?,
        Err(why) => by_weight(state, origin, request, why)?,
    };
    let mut changes = Changes {
        guard_regions: true,
        stage_edits: StageEdits::Direct,
        ..Changes::default()
    };
    changes.notes.append(&mut notes);
    let staged = staged_geos(state);
    let refused: Vec<FieldError> = values
        .iter()
        .filter_map(|(geo, _)| {
            staged.get(geo).map(|stage| {
                FieldError::new(
                    "region",
                    format!(
                        "region `{geo}` is staged by stage `{stage}`: promote or abort the \
                         stage first, or shed the other regions (--region)"
                    ),
                )
            })
        })
        .collect();
    if !refused.is_empty() {
        return Err(Error::Invalid(refused));
    }
    if values.is_empty() {
        changes.notes.push(format!(
            "nothing to shed for {origin}: no region's weights change"
        ));
        return Ok(changes);
    }
    if let Some(limit) = &drain.fleet_limit {
        limit.admit(
            &crate::drain::fleet_limit_counts(state),
            origin,
            existing
                .as_ref()
                .is_some_and(DrainRecord::counts_toward_fleet_limit),
            LimitedChange::Shed,
        )?;
        changes.guard_drains = true;
    }
    let mut record = existing.unwrap_or_else(|| {
        DrainRecord::new(origin, &drain.source, &drain.reason, &drain.by, &drain.at)
    });
    for (geo, (current, after)) in &values {
        let entry = record_region(record.regions.get(geo), current, Some(after));
        record.regions.insert(geo.clone(), entry);
        changes.regions.insert(geo.clone(), Some(after.clone()));
    }
    let step = ShedStep {
        percent: request.percent,
        achieved,
        regions: drain.regions.clone(),
        reason: drain.reason.clone(),
        source: drain.source.clone(),
        by: drain.by.clone(),
        at: drain.at.clone(),
    };
    let shed: Vec<String> = values.iter().map(|(geo, _)| geo.clone()).collect();
    record.take_part(
        &drain.source,
        (&drain.reason, &drain.by, &drain.at),
        &shed,
        Some(step),
    );
    record.settle_schema();
    changes.drains.insert(origin.to_string(), Some(record));
    if request.spill {
        add_spill(state, prefix, traffic, origin, &mut changes)?;
    }
    Ok(changes)
}

/// Each changed region: its value now and the value the shed writes.
type Values = Vec<(String, (RegionValue, RegionValue))>;

/// The shed search's values, the achieved percent and its notes.
fn searched(
    state: &State,
    prefix: &str,
    traffic: &Traffic,
    origin: &str,
    request: &ShedRequest,
) -> Result<(Values, Option<f64>, Vec<String>), Error> {
    check_regions(state, origin, &request.drain.regions)?;
    let plan = dw_capacity::shed(
        &table(state, prefix, None),
        traffic,
        &dw_capacity::ShedRequest {
            origin: origin.to_owned(),
            percent: request.percent,
            regions: request.drain.regions.clone(),
        },
    )
    .map_err(capacity_error)?;
    let mut notes = Vec::new();
    let values = changed_values(state, &plan.edits);
    if plan.base_load > 0.0 {
        notes.push(format!(
            "shed {origin}: asked {}%, the plan takes {}% of its predicted load from the \
             selected regions ({} of {} answers/s)",
            shown_number(request.percent),
            shown_number((plan.achieved_percent * 10.0).round() / 10.0),
            shown_number((plan.before.of(origin) - plan.after.of(origin)).round()),
            shown_number(plan.base_load.round()),
        ));
    } else {
        notes.push(format!(
            "{origin} carries no predicted traffic in the selected regions: there is \
             nothing to shed"
        ));
    }
    for geo in &plan.blocked {
        notes.push(format!(
            "region {geo} left alone: {origin} is its last origin with weight (list \
             another origin there to shed it)"
        ));
    }
    Ok((values, Some(plan.achieved_percent), notes))
}

/// Without traffic: the origin's share of each selected region lowered by `percent`.
fn by_weight(
    state: &State,
    origin: &str,
    request: &ShedRequest,
    why: &str,
) -> Result<(Values, Option<f64>, Vec<String>), Error> {
    let geos = check_regions(state, origin, &request.drain.regions)?;
    let mut notes = vec![format!(
        "no traffic to search with ({why}): shed by weight, {origin}'s share of each region \
         lowered by {}%; the load it moves is not predicted",
        shown_number(request.percent)
    )];
    let mut values = Values::new();
    for geo in geos {
        let Some(Ok(current)) = state.region(&geo) else {
            continue;
        };
        if !current.lists(origin) {
            continue;
        }
        let listed = current.listed_weights();
        let total: u64 = listed.iter().map(|(_, weight)| u64::from(*weight)).sum();
        let others: Vec<(String, u32)> = listed
            .iter()
            .filter(|(name, _)| name != origin)
            .cloned()
            .collect();
        let own = u64::from(current.weight_of(origin));
        if own == 0 {
            continue;
        }
        let total_share = u64::from(SHED_TOTAL);
        let share_now = ((own * total_share + total / 2) / total.max(1)).clamp(1, total_share - 1);
        let share = ((share_now as f64) * (1.0 - request.percent / 100.0)).round() as u32;
        let share = share.max(1);
        let Some(scaled) = renormalise(&others, SHED_TOTAL - share)
            .filter(|weights| weights.iter().any(|(_, weight)| *weight > 0))
        else {
            notes.push(format!(
                "region {geo} left alone: {origin} is its last origin with weight"
            ));
            continue;
        };
        let mut weight: std::collections::BTreeMap<String, u32> = scaled.into_iter().collect();
        weight.insert(origin.to_string(), share);
        let after = RegionValue {
            weight,
            ..current.clone()
        };
        if !after.same_routing(&current) {
            values.push((geo, (current, after)));
        }
    }
    Ok((values, None, notes))
}

/// The geos a shed may change: the named ones (each must exist, be valid and list the
/// origin), or every region (an origin no region lists is an error).
fn check_regions(state: &State, origin: &str, named: &[String]) -> Result<Vec<String>, Error> {
    if named.is_empty() {
        let listing = state.regions_listing(origin);
        if listing.is_empty() {
            return Err(Error::invalid(
                "origin",
                format!("`{origin}` is not listed in any region"),
            ));
        }
        return Ok(listing);
    }
    let errors: Vec<FieldError> = named
        .iter()
        .filter_map(|geo| match state.region(geo) {
            None => Some(FieldError::new(
                "region",
                format!("there is no region `{geo}`"),
            )),
            Some(Err(error)) => Some(FieldError::new(
                "region",
                format!("region `{geo}` holds an invalid value ({error}); fix it first"),
            )),
            Some(Ok(value)) if !value.lists(origin) => Some(FieldError::new(
                "region",
                format!("region `{geo}` does not list `{origin}`"),
            )),
            Some(Ok(_)) => None,
        })
        .collect();
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    Ok(named.to_vec())
}

/// The regions `edits` changes, as values keeping each region's unknown fields.
fn changed_values(state: &State, edits: &[RegionEdit]) -> Values {
    edits
        .iter()
        .filter_map(|edit| {
            let Some(Ok(current)) = state.region(&edit.geo) else {
                return None;
            };
            let after = RegionValue {
                shard: current.shard.clone(),
                origins: edit.origins.clone(),
                weight: edit.weight.iter().cloned().collect(),
                extra: current.extra.clone(),
            };
            (!after.same_routing(&current)).then(|| (edit.geo.clone(), (current, after)))
        })
        .collect()
}

/// `--spill` on a planned drain or shed: `dw-capacity`'s spill adds origins from the next
/// steps of each changed region's chain, and the record's `after` keeps them (restore
/// takes them out with the rest). Refused without traffic or capacities.
pub fn add_spill(
    state: &State,
    prefix: &str,
    traffic: TrafficView<'_>,
    origin: &str,
    changes: &mut Changes,
) -> Result<(), Error> {
    let traffic = traffic.map_err(|why| {
        Error::invalid(
            "spill",
            format!(
                "--spill needs the traffic to weigh the origins it adds, and there is none \
                 ({why}); give --traffic FILE or --prometheus URL, or drop --spill"
            ),
        )
    })?;
    if let Some(why) = &state.capacities_unreadable {
        return Err(Error::invalid(
            "spill",
            format!("--spill needs the capacities: {why}"),
        ));
    }
    let capacities = state.valid_capacities();
    if capacities.is_empty() {
        return Err(Error::invalid(
            "spill",
            "--spill needs origins' capacities to keep them within their guard, and none is \
             set (`dwctl origin capacity ORIGIN ANSWERS_PER_S`)",
        ));
    }
    let edits: Vec<RegionEdit> = changes
        .regions
        .iter()
        .filter_map(|(geo, value)| Some(value.as_ref()?.as_edit(geo)))
        .collect();
    if edits.is_empty() {
        return Ok(());
    }
    let plan = dw_capacity::spill(
        &table(state, prefix, None),
        traffic,
        &edits,
        &SpillRequest {
            origin: origin.to_owned(),
            capacities,
            headroom: state.headroom(),
            declared: Default::default(),
        },
    )
    .map_err(capacity_error)?;
    if plan.added.is_empty() {
        changes.notes.push(if plan.overloads.is_empty() {
            "--spill: nothing to add, every origin stays within its guard".into()
        } else {
            "--spill: no origin of the next steps can take load within its guard".into()
        });
    }
    for added in &plan.added {
        changes.notes.push(format!(
            "--spill: region {} adds {} with weight {} (from {}'s origins)",
            added.region, added.origin, added.weight, added.from
        ));
    }
    if !plan.overloads.is_empty() {
        let names: Vec<&str> = plan
            .overloads
            .iter()
            .map(|overload| overload.origin.as_str())
            .collect();
        changes.notes.push(format!(
            "--spill could not keep every origin within its guard: {} still above it",
            names.join(", ")
        ));
    }
    let spilled: BTreeSet<&str> = plan
        .added
        .iter()
        .map(|added| added.region.as_str())
        .collect();
    for edit in plan
        .edits
        .iter()
        .filter(|edit| spilled.contains(edit.geo.as_str()))
    {
        let Some(Some(value)) = changes.regions.get_mut(&edit.geo) else {
            continue;
        };
        value.origins = edit.origins.clone();
        value.weight = edit.weight.iter().cloned().collect();
        if let Some(Some(record)) = changes.drains.get_mut(origin)
            && let Some(region) = record.regions.get_mut(&edit.geo)
        {
            region.after = Some(RegionValue {
                extra: Default::default(),
                ..value.clone()
            });
            // The spill is the acting source's (the last part): its effect keeps it.
            if let Some(source) = record.parts.last().map(|part| part.source.clone()) {
                record.refresh_effects(&source, std::slice::from_ref(&edit.geo));
            }
        }
    }
    Ok(())
}

/// The geos an open stage stages, with the stage's id.
fn staged_geos(state: &State) -> std::collections::BTreeMap<String, String> {
    let mut staged = std::collections::BTreeMap::new();
    for (id, stage) in open_stages(state) {
        let Ok(stage) = stage else { continue };
        for key in stage.kvs.keys() {
            if let Some(geo) = key.strip_prefix("region/") {
                staged.insert(geo.to_owned(), id.clone());
            }
        }
    }
    staged
}

fn capacity_error(error: dw_capacity::Error) -> Error {
    match error {
        dw_capacity::Error::Invalid { field, reason } => Error::invalid(field, reason),
        other => Error::Failed(format!("the shed search failed: {other}")),
    }
}

fn shown_number(value: f64) -> String {
    crate::capacity::number_json(value).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::reconcile_drain_records;
    use crate::drain::{Restoring, plan_restore};
    use crate::fixtures::state;
    use crate::model::Entry;
    use crate::shed_record::SHED_RECORD_SCHEMA;

    const PREFIX: &str = "/dw/routing/";

    fn request(origin: &str, percent: f64) -> ShedRequest {
        ShedRequest {
            drain: DrainRequest {
                origin: origin.into(),
                regions: vec![],
                reason: "test".into(),
                source: "cli".into(),
                by: "me@here".into(),
                at: "2026-01-01T00:00:00Z".into(),
                force: false,
                skip_emptying: false,
                fleet_limit: None,
            },
            percent,
            spill: false,
        }
    }

    /// `changes` applied as the transaction would, reconcile first.
    fn apply(state: &State, changes: &Changes) -> State {
        let mut changes = changes.clone();
        reconcile_drain_records(state, &mut changes).unwrap();
        state.with_written(&changes, 11)
    }

    fn weights(state: &State, geo: &str) -> Vec<(String, u32)> {
        state.region(geo).unwrap().unwrap().listed_weights()
    }

    const DE: &str =
        r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50},"note":"keep"}"#;
    const FR: &str = r#"{"shard":"eu-1","origins":["b","a","c"],"weight":{"a":2,"b":1,"c":1}}"#;

    fn sticky() -> Traffic {
        Traffic::parse(br#"{"geos":{"DE":{"sticky":1000},"FR":{"sticky":1000}}}"#).unwrap()
    }

    #[test]
    fn a_shed_with_traffic_is_searched_recorded_and_restored_exactly() {
        let before = state(&[("DE", DE), ("FR", FR)]);
        let traffic = sticky();
        let changes = plan_shed(&before, PREFIX, Ok(&traffic), &request("a", 40.0)).unwrap();
        let record = changes.drains["a"].clone().unwrap();
        assert_eq!(record.schema, SHED_RECORD_SCHEMA);
        let step = &record.shed.as_ref().unwrap().steps[0];
        let achieved = step.achieved.unwrap();
        assert!((achieved - 40.0).abs() < 1.0, "{achieved}");
        assert_eq!(record.shed_regions().len(), 2);
        let shed = apply(&before, &changes);
        // Still listed, with less weight; unknown fields kept; the record survived the
        // reconcile of its own transaction.
        let de = shed.region("DE").unwrap().unwrap();
        assert!(de.lists("a") && de.weight_of("a") * 1000 < de.weight_sum() as u32 * 500);
        assert_eq!(de.extra["note"], "keep");
        assert_eq!(shed.drain_record("a").unwrap().unwrap(), record);
        // The predicted load of a really went down by about 40 %.
        let load =
            |state: &State| dw_capacity::predict(&table(state, PREFIX, None), &traffic).of("a");
        let took = 100.0 * (load(&before) - load(&shed)) / load(&before);
        assert!((took - achieved).abs() < 1e-6, "{took} vs {achieved}");

        let restored = apply(&shed, &plan_restore(&shed, "a", Restoring::All).unwrap());
        assert_eq!(weights(&restored, "DE"), weights(&before, "DE"));
        assert_eq!(weights(&restored, "FR"), weights(&before, "FR"));
        assert!(restored.drains.is_empty());
    }

    #[test]
    fn a_later_write_is_not_undone_by_reconcile_and_restore_sets_the_share_back() {
        let before = state(&[("DE", DE), ("FR", FR)]);
        let shed = apply(
            &before,
            &plan_shed(&before, PREFIX, Ok(&sticky()), &request("a", 50.0)).unwrap(),
        );
        // An operator rewrites DE, a listing it: the shed record keeps DE.
        let mut write = Changes::default();
        let rewritten = RegionValue::from_stored(
            br#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":10,"b":60,"c":30}}"#,
        )
        .unwrap();
        write.regions.insert("DE".into(), Some(rewritten));
        let written = apply(&shed, &write);
        let record = written.drain_record("a").unwrap().unwrap();
        assert!(record.regions.contains_key("DE") && record.regions.contains_key("FR"));
        assert_eq!(written.region("DE").unwrap().unwrap().weight_of("a"), 10);
        // Restore: FR exactly, DE gets a's share from before the shed (50 of 100).
        let changes = plan_restore(&written, "a", Restoring::All).unwrap();
        assert!(
            changes
                .notes
                .iter()
                .any(|note| note.contains("changed since the shed")),
            "{:?}",
            changes.notes
        );
        let restored = apply(&written, &changes);
        assert_eq!(weights(&restored, "FR"), weights(&before, "FR"));
        assert_eq!(restored.region("DE").unwrap().unwrap().weight_of("a"), 50);
    }

    #[test]
    fn shed_100_is_the_drain_and_a_drain_after_a_shed_keeps_the_first_values() {
        let before = state(&[("DE", DE), ("FR", FR)]);
        let drain = plan_drain(&before, &request("a", 100.0).drain).unwrap();
        let shed = plan_shed(&before, PREFIX, Ok(&sticky()), &request("a", 100.0)).unwrap();
        assert_eq!(shed.regions, drain.regions);
        assert_eq!(shed.drains, drain.drains);
        let no_traffic = plan_shed(&before, PREFIX, Err("none".into()), &request("a", 100.0));
        assert_eq!(no_traffic.unwrap().regions, drain.regions);

        let once = apply(
            &before,
            &plan_shed(&before, PREFIX, Ok(&sticky()), &request("a", 30.0)).unwrap(),
        );
        let twice = apply(
            &once,
            &plan_shed(&once, PREFIX, Ok(&sticky()), &request("a", 30.0)).unwrap(),
        );
        let record = twice.drain_record("a").unwrap().unwrap();
        let info = record.shed.as_ref().unwrap();
        assert!((info.percent - 51.0).abs() < 1e-9 && info.steps.len() == 2);
        assert_eq!(record.regions["DE"].before.weight_of("a"), 50);
        let drained = apply(
            &twice,
            &plan_drain(&twice, &request("a", 100.0).drain).unwrap(),
        );
        let record = drained.drain_record("a").unwrap().unwrap();
        assert_eq!((record.schema, record.shed.is_none()), (2, true));
        assert!(!drained.region("DE").unwrap().unwrap().lists("a"));
        let restored = apply(
            &drained,
            &plan_restore(&drained, "a", Restoring::All).unwrap(),
        );
        assert_eq!(weights(&restored, "DE"), weights(&before, "DE"));
        assert_eq!(weights(&restored, "FR"), weights(&before, "FR"));
    }

    #[test]
    fn without_traffic_the_share_is_lowered_by_weight_and_said_so() {
        let before = state(&[("DE", DE), ("FR", FR)]);
        let changes = plan_shed(
            &before,
            PREFIX,
            Err("no traffic source".into()),
            &request("a", 40.0),
        )
        .unwrap();
        assert!(
            changes.notes[0].contains("shed by weight"),
            "{:?}",
            changes.notes
        );
        let de = changes.regions["DE"].clone().unwrap();
        // 500 of 1000 → 300; b gets the rest.
        assert_eq!(
            de.listed_weights(),
            [("a".to_string(), 300), ("b".to_string(), 700)]
        );
        let fr = changes.regions["FR"].clone().unwrap();
        assert_eq!(fr.weight_of("a"), 300);
        assert_eq!(fr.weight_sum(), 1000);
        let record = changes.drains["a"].clone().unwrap();
        assert_eq!(record.shed.unwrap().steps[0].achieved, None);
    }

    #[test]
    fn bad_requests_are_refused_before_anything_is_planned() {
        let before = state(&[
            ("DE", DE),
            ("US", r#"{"shard":"us","origins":["x"],"weight":{"x":1}}"#),
        ]);
        let field = |result: Result<Changes, Error>| match result {
            Err(Error::Invalid(errors)) => errors[0].field.clone(),
            other => panic!("expected a validation error, got {other:?}"),
        };
        let traffic = sticky();
        assert_eq!(
            field(plan_shed(
                &before,
                PREFIX,
                Ok(&traffic),
                &request("zz", 40.0)
            )),
            "origin"
        );
        let mut named = request("a", 40.0);
        named.drain.regions = vec!["US".into()];
        assert_eq!(
            field(plan_shed(&before, PREFIX, Ok(&traffic), &named)),
            "region"
        );
        named.drain.regions = vec!["XX".into()];
        assert_eq!(
            field(plan_shed(&before, PREFIX, Err("none".into()), &named)),
            "region"
        );
        for bad in [0.0, -1.0, 100.5, f64::NAN] {
            assert!(matches!(
                plan_shed(&before, PREFIX, Ok(&traffic), &request("a", bad)),
                Err(Error::Usage(_))
            ));
        }
        // --spill without traffic or capacities: refused, field spill.
        let mut spill = request("a", 40.0);
        spill.spill = true;
        assert_eq!(
            field(plan_shed(&before, PREFIX, Err("none".into()), &spill)),
            "spill"
        );
        assert_eq!(
            field(plan_shed(&before, PREFIX, Ok(&traffic), &spill)),
            "spill"
        );
        // The last origin of a region is left alone, and said so.
        let alone = state(&[("US", r#"{"shard":"us","origins":["x"],"weight":{"x":1}}"#)]);
        let traffic = Traffic::parse(br#"{"geos":{"US":10}}"#).unwrap();
        let changes = plan_shed(&alone, PREFIX, Ok(&traffic), &request("x", 40.0)).unwrap();
        assert!(changes.regions.is_empty());
        assert!(
            changes
                .notes
                .iter()
                .any(|note| note.contains("last origin")),
            "{:?}",
            changes.notes
        );
    }

    #[test]
    fn spill_adds_an_origin_of_the_next_step_within_its_guard() {
        // DE's a and b; the continent bucket EU serves eu-1 from c. b can take 600 of DE's
        // 1000 sticky answers (capacity 750 at 0.8): a drain of a needs c.
        let mut before = state(&[
            (
                "DE",
                r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#,
            ),
            (
                "continent/EU",
                r#"{"shard":"eu-1","origins":["c"],"weight":{"c":100}}"#,
            ),
        ]);
        for (origin, capacity) in [("b", 750), ("c", 1000)] {
            before.capacities.insert(
                origin.into(),
                Entry {
                    raw: format!(r#"{{"answers_per_s":{capacity},"by":"","at":""}}"#).into_bytes(),
                    mod_revision: 3,
                },
            );
        }
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let mut drain = request("a", 100.0);
        drain.spill = true;
        let changes = plan_shed(&before, PREFIX, Ok(&traffic), &drain).unwrap();
        let de = changes.regions["DE"].clone().unwrap();
        assert_eq!(de.origins, ["b", "c"]);
        assert!(
            changes.notes.iter().any(|note| note.contains("adds c")),
            "{:?}",
            changes.notes
        );
        let after = dw_capacity::predict(&table(&before, PREFIX, Some(&changes)), &traffic);
        assert!(after.of("b") <= 600.0 + 1e-9, "{}", after.of("b"));
        // The record keeps c in `after`; restore takes it out again.
        let record = changes.drains["a"].clone().unwrap();
        assert_eq!(
            record.regions["DE"].after.as_ref().unwrap().origins,
            ["b", "c"]
        );
        let drained = apply(&before, &changes);
        let restored = apply(
            &drained,
            &plan_restore(&drained, "a", Restoring::All).unwrap(),
        );
        assert_eq!(weights(&restored, "DE"), weights(&before, "DE"));
    }

    #[test]
    fn a_region_an_open_stage_stages_is_refused() {
        let mut before = state(&[("DE", DE), ("FR", FR)]);
        let stage = dw_routing::stage::Stage::parse(
            "s1",
            r#"{"schema":1,"id":"s1","cohort":{"nodes":["edge-7"]},"kvs":{"region/DE":"{\"shard\":\"eu-1\",\"origins\":[\"b\"],\"weight\":{\"b\":1}}"},"base":{"region/DE":5}}"#,
        );
        let Ok(stage) = stage else {
            panic!("stage: {stage:?}");
        };
        before.stages.insert(
            "s1".into(),
            Entry {
                raw: stage.to_json().into_bytes(),
                mod_revision: 6,
            },
        );
        let Err(Error::Invalid(errors)) =
            plan_shed(&before, PREFIX, Err("none".into()), &request("a", 40.0))
        else {
            panic!("a staged region must be refused");
        };
        assert!(
            errors[0].reason.contains("stage `s1`"),
            "{}",
            errors[0].reason
        );
    }
}
