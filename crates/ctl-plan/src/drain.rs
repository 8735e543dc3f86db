//! Planning drains and restores: pure functions from a [`State`] to [`Changes`].
//!
//! A drain takes an origin out of every region that lists it (or the chosen ones),
//! renormalises the remaining weights to exactly 100 and records what it took in a drain
//! record, all in one transaction. A restore gives back exactly what the record holds
//! when a region is as the drain left it; when the region changed since, it re-adds the
//! origin with its previous share and renormalises the others around it, and says so.

use std::collections::{BTreeMap, BTreeSet};

use crate::drain_record::DrainRecord;
use crate::drain_record::record_region;
pub use crate::drain_record::{DrainRequest, FleetLimit, LimitedChange};
use crate::model::{Changes, StageEdits, State};
use crate::value::RegionValue;
use crate::{Error, FieldError};
use dw_capacity::renormalise;

/// What the weights of a region sum to after a drain or a restore.
pub const WEIGHT_TOTAL: u32 = 100;

/// Refuses (`field` named) an origin name that is empty or holds a `/`: it names keys
/// (`drains/<origin>`), one segment each.
pub fn check_origin_name(field: &str, origin: &str) -> Result<(), Error> {
    if origin.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if origin.contains('/') {
        return Err(Error::invalid(field, "must not contain `/`"));
    }
    Ok(())
}

/// Plans a drain: the origin leaves each region (weights renormalised to [`WEIGHT_TOTAL`])
/// and a drain record keeps what was taken, so that [`plan_restore`] can give it back.
pub fn plan_drain(state: &State, request: &DrainRequest) -> Result<Changes, Error> {
    let origin = request.origin.as_str();
    check_origin_name("origin", origin)?;
    let existing = state.drain_record(origin)?;
    let explicit = !request.regions.is_empty();
    let geos: Vec<String> = if explicit {
        let errors: Vec<FieldError> = request
            .regions
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
                Some(Ok(_)) => None,
            })
            .collect();
        if !errors.is_empty() {
            return Err(Error::Invalid(errors));
        }
        request.regions.clone()
    } else {
        state.regions.keys().cloned().collect()
    };

    let mut changes = Changes {
        guard_regions: true,
        stage_edits: StageEdits::Drain(Box::new(request.clone())),
        ..Changes::default()
    };
    let mut record = existing.clone().unwrap_or_else(|| {
        DrainRecord::new(
            origin,
            &request.source,
            &request.reason,
            &request.by,
            &request.at,
        )
    });
    let mut would_empty = Vec::new();
    for geo in &geos {
        let current = match state.region(geo) {
            Some(Ok(current)) => current,
            Some(Err(error)) => {
                changes.notes.push(format!(
                    "region {geo} skipped: its value is invalid ({error})"
                ));
                continue;
            }
            None => continue,
        };
        if !current.lists(origin) {
            if explicit {
                changes
                    .notes
                    .push(format!("region {geo} does not list {origin}"));
            }
            continue;
        }
        let remaining: Vec<(String, u32)> = current
            .listed_weights()
            .into_iter()
            .filter(|(name, _)| name != origin)
            .collect();
        let renormalised = renormalise(&remaining, WEIGHT_TOTAL)
            .filter(|weights| weights.iter().any(|(_, weight)| *weight > 0));
        match renormalised {
            Some(weights) => {
                let unlisted: Vec<&String> = current
                    .weight
                    .keys()
                    .filter(|name| *name != origin && !current.lists(name))
                    .collect();
                if !unlisted.is_empty() {
                    changes.notes.push(format!(
                        "region {geo}: dropped the weights of unlisted origins {unlisted:?}"
                    ));
                }
                let after = RegionValue {
                    shard: current.shard.clone(),
                    origins: remaining.iter().map(|(name, _)| name.clone()).collect(),
                    weight: weights.into_iter().collect(),
                    extra: current.extra.clone(),
                };
                // A region a shed changed keeps its value from before the shed.
                let entry = record_region(record.regions.get(geo), &current, Some(&after));
                record.regions.insert(geo.clone(), entry);
                changes.regions.insert(geo.clone(), Some(after));
            }
            None if request.force => {
                changes.notes.push(format!(
                    "region {geo}: {origin} was its last origin with weight; the region key is \
                     deleted (--force), routing falls back to the policy's default and failover"
                ));
                changes.regions.insert(geo.clone(), None);
                let entry = record_region(record.regions.get(geo), &current, None);
                record.regions.insert(geo.clone(), entry);
            }
            None if request.skip_emptying => {
                changes.notes.push(format!(
                    "region {geo} left alone: {origin} is its last origin with weight"
                ));
            }
            None => would_empty.push(geo.clone()),
        }
    }
    if !would_empty.is_empty() {
        return Err(Error::Invalid(
            would_empty
                .into_iter()
                .map(|geo| {
                    FieldError::new(
                        "region",
                        format!(
                            "draining {origin} would leave region `{geo}` with no origin \
                             carrying weight; use --force to drain it anyway (the region key is \
                             deleted, restore recreates it)"
                        ),
                    )
                })
                .collect(),
        ));
    }
    // Regions another part drained already: this source's drain joins it there (no value
    // changes), so that the other source's restore leaves the origin drained.
    let joined: Vec<String> = existing
        .iter()
        .flat_map(|record| {
            record.regions.iter().filter(|(geo, region)| {
                (!explicit || geos.contains(geo))
                    && !changes.regions.contains_key(*geo)
                    && region
                        .after
                        .as_ref()
                        .is_none_or(|after| !after.lists(origin))
                    && !record
                        .part(&request.source)
                        .is_some_and(|part| part.regions.contains_key(*geo))
            })
        })
        .map(|(geo, _)| geo.clone())
        .collect();
    if !joined.is_empty() {
        changes.notes.push(format!(
            "{origin} is drained already in {} (by {}): this drain joins it there",
            joined.join(", "),
            existing
                .as_ref()
                .map(|record| record.sources().join(", "))
                .unwrap_or_default()
        ));
    }
    if changes.regions.is_empty() && joined.is_empty() {
        if existing.is_none() && !explicit && changes.notes.is_empty() {
            return Err(Error::invalid(
                "origin",
                format!("`{origin}` is not listed in any region"),
            ));
        }
        changes.notes.push(match &existing {
            Some(record) => format!(
                "nothing to drain: {origin} is already drained ({} by {} at {}: {})",
                record.source, record.by, record.at, record.reason
            ),
            None => format!("nothing to drain for {origin}"),
        });
        return Ok(changes);
    }
    if let Some(limit) = &request.fleet_limit {
        limit.admit(
            &fleet_limit_counts(state),
            origin,
            existing
                .as_ref()
                .is_some_and(DrainRecord::counts_toward_fleet_limit),
            LimitedChange::Drain,
        )?;
        changes.guard_drains = true;
    }
    // This source's part: its effect in each region it drained (a drain wins over any shed
    // there). An older record that this drain extends is written back in the current
    // schema (its regions as they were: schema 2 reads whole values too); a shed record
    // whose shed regions are all drained now becomes a drain's.
    let mut drained: Vec<String> = changes.regions.keys().cloned().collect();
    drained.extend(joined);
    record.take_part(
        &request.source,
        (&request.reason, &request.by, &request.at),
        &drained,
        None,
    );
    record.settle_schema();
    changes.drains.insert(origin.to_string(), Some(record));
    Ok(changes)
}

/// The origins whose drain records count toward a fleet limit (`health`'s
/// `--max-drained-fraction`): every record with a part of a source other than the
/// autopilot ([`DrainRecord::counts_toward_fleet_limit`]), so that load the autopilot moved
/// never refuses a dead origin's drain. A malformed record counts.
pub fn fleet_limit_counts(state: &State) -> Vec<String> {
    state
        .drains
        .keys()
        .filter(|origin| match state.drain_record(origin) {
            Ok(Some(record)) => record.counts_toward_fleet_limit(),
            Ok(None) => false,
            Err(_) => true,
        })
        .cloned()
        .collect()
}

/// Which parts of a drain record a restore undoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restoring<'a> {
    /// Every part, whatever its source (`dwctl restore --all-sources`).
    All,
    /// One source's part (`dwctl restore`, `cli` by default, or `--source`); a record
    /// without one is refused ([`Error::Invalid`], naming the parts there are).
    Part(&'a str),
    /// Automation's own part (`health`, `rebalance`, the autopilot's give back): a record
    /// without one is left alone (an empty plan with a note).
    Own(&'a str),
}

/// Plans the reversal of `origin`'s drain record, or of one source's part of it
/// ([`Restoring`]): in each region the part changed, the configured value with the other
/// parts re-applied (the composition rule, `crate::drain_parts`); the record keeps the
/// other parts, or goes with the last.
pub fn plan_restore(state: &State, origin: &str, which: Restoring<'_>) -> Result<Changes, Error> {
    check_origin_name("origin", origin)?;
    let Some(mut record) = state.drain_record(origin)? else {
        return Err(Error::invalid(
            "origin",
            format!("no drain is recorded for `{origin}`"),
        ));
    };
    let mut changes = Changes {
        guard_regions: true,
        stage_edits: StageEdits::Restore(origin.to_string()),
        ..Changes::default()
    };
    let undone: Vec<String> = match which {
        Restoring::All => record.sources().into_iter().map(str::to_owned).collect(),
        Restoring::Part(source) | Restoring::Own(source) if record.has_part(source) => {
            vec![source.to_owned()]
        }
        Restoring::Own(source) => {
            changes.notes.push(format!(
                "{origin} was drained by {} ({}), not by {source}: left drained",
                record.sources().join(", "),
                record.reason
            ));
            return Ok(changes);
        }
        Restoring::Part(source) => {
            return Err(Error::invalid(
                "origin",
                format!(
                    "`{origin}` has no part of source {source} to restore; its parts: {}. \
                     `--source SOURCE` restores one of them, `--all-sources` all of them",
                    record
                        .part_labels()
                        .iter()
                        .map(|label| crate::shown::Shown(label).to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ));
        }
    };
    let remaining: Vec<String> = record
        .sources()
        .into_iter()
        .filter(|source| !undone.iter().any(|gone| gone == source))
        .map(str::to_owned)
        .collect();
    // The regions the undone parts changed; with every part undone, every region.
    let geos: Vec<String> = record
        .regions
        .keys()
        .filter(|geo| {
            remaining.is_empty()
                || record
                    .parts
                    .iter()
                    .any(|part| undone.contains(&part.source) && part.regions.contains_key(*geo))
        })
        .cloned()
        .collect();
    let what = |shed: bool| if shed { "shed" } else { "drain" };
    let mut written: BTreeMap<String, Option<RegionValue>> = BTreeMap::new();
    for geo in &geos {
        let drained = &record.regions[geo];
        // The value with the undone parts gone: the configured value and the other parts.
        let target = {
            let mut without = record.clone();
            without
                .parts
                .retain(|part| remaining.contains(&part.source));
            if without.parts.is_empty() {
                Some(drained.before.clone())
            } else {
                without.composed(geo)
            }
        };
        // A shed region's recorded `after` still lists the origin.
        let shed = drained
            .after
            .as_ref()
            .is_some_and(|after| after.lists(origin));
        match state.region(geo) {
            None if drained.after.is_none() => match &target {
                Some(value) => {
                    changes
                        .notes
                        .push(format!("region {geo} recreated as it was before the drain"));
                    let value = RegionValue {
                        extra: drained.before.extra.clone(),
                        ..value.clone()
                    };
                    written.insert(geo.clone(), Some(value.clone()));
                    changes.regions.insert(geo.clone(), Some(value));
                }
                None => changes.notes.push(format!(
                    "region {geo} stays deleted: another part drains its last origin"
                )),
            },
            None => changes.notes.push(format!(
                "region {geo} was deleted since the drain: not recreated"
            )),
            Some(Err(error)) => changes.notes.push(format!(
                "region {geo} left alone: its value is invalid now ({error})"
            )),
            Some(Ok(current)) if !shed && current.lists(origin) => {
                changes
                    .notes
                    .push(format!("region {geo} already lists {origin}"));
            }
            Some(Ok(current)) => {
                let unchanged = drained
                    .after
                    .as_ref()
                    .is_some_and(|after| after.same_routing(&current));
                let restored = match (&target, unchanged) {
                    (Some(target), true) => Some(RegionValue {
                        origins: target.origins.clone(),
                        weight: target.weight.clone(),
                        ..current
                    }),
                    // The other parts drain the region's last origin: the key goes again.
                    (None, true) => None,
                    (target, false) => {
                        // Origins the undone parts added (a spill) leave with them; a shed
                        // origin is set back to its share in the value without them.
                        let base_value = target.as_ref().unwrap_or(&drained.before);
                        let added: Vec<String> = drained
                            .after
                            .iter()
                            .flat_map(|after| after.origins.iter())
                            .filter(|name| {
                                *name != origin
                                    && !base_value.lists(name)
                                    && !drained.before.lists(name)
                                    && current.lists(name)
                            })
                            .cloned()
                            .collect();
                        let mut base = current.clone();
                        base.origins
                            .retain(|name| name != origin && !added.contains(name));
                        base.weight
                            .retain(|name, _| name != origin && !added.contains(name));
                        if !added.is_empty() {
                            changes.notes.push(format!(
                                "region {geo}: took out the origins the {} added ({})",
                                what(shed),
                                added.join(", ")
                            ));
                        }
                        if base_value.lists(origin) {
                            let (value, share) = readd(&base, base_value, origin);
                            let verb = if shed { "set" } else { "re-added" };
                            changes.notes.push(format!(
                                "region {geo} changed since the {}: {verb} {origin} with \
                                 weight {share} and renormalised the others to {}",
                                what(shed),
                                WEIGHT_TOTAL - share
                            ));
                            Some(value)
                        } else if base.weight_sum() > 0 {
                            changes.notes.push(format!(
                                "region {geo} changed since the {}: {origin} stays out (another \
                                 part drains it there)",
                                what(shed)
                            ));
                            Some(base)
                        } else {
                            changes.notes.push(format!(
                                "region {geo} changed since the {} and another part drains \
                                 {origin} there: left alone",
                                what(shed)
                            ));
                            continue;
                        }
                    }
                };
                written.insert(geo.clone(), restored.clone());
                changes.regions.insert(geo.clone(), restored);
            }
        }
    }
    if remaining.is_empty() {
        changes.drains.insert(origin.to_string(), None);
        return Ok(changes);
    }
    // The other parts stay: the record keeps them, the regions only they changed, and
    // what this restore wrote as their `after` (the staged values: `crate::stage`).
    record.parts.retain(|part| remaining.contains(&part.source));
    record.regions.retain(|geo, _| {
        record
            .parts
            .iter()
            .any(|part| part.regions.contains_key(geo))
    });
    for (geo, value) in written {
        if let Some(region) = record.regions.get_mut(&geo) {
            region.after = value.map(|value| RegionValue {
                extra: Default::default(),
                ..value
            });
        }
    }
    if record.regions.is_empty() {
        changes.drains.insert(origin.to_string(), None);
        return Ok(changes);
    }
    changes.notes.push(format!(
        "{origin}'s record keeps the parts of {}",
        remaining.join(", ")
    ));
    record.settle_schema();
    changes.drains.insert(origin.to_string(), Some(record));
    Ok(changes)
}

/// `current` with `origin` back at its previous position and previous share of the total;
/// the other weights scaled to the rest. Returns the value and the origin's new weight.
pub(crate) fn readd(
    current: &RegionValue,
    before: &RegionValue,
    origin: &str,
) -> (RegionValue, u32) {
    let previous_total = before.weight_sum();
    let share = if previous_total == 0 {
        0
    } else {
        // Round half up: w * 100 / total.
        let scaled =
            (u64::from(before.weight_of(origin)) * 200 + previous_total) / (2 * previous_total);
        scaled.min(u64::from(WEIGHT_TOTAL)) as u32
    };
    let others = renormalise(&current.listed_weights(), WEIGHT_TOTAL - share)
        .unwrap_or_else(|| current.listed_weights());
    let mut origins = current.origins.clone();
    let position = before
        .origins
        .iter()
        .position(|name| name == origin)
        .unwrap_or(origins.len())
        .min(origins.len());
    origins.insert(position, origin.to_string());
    let mut weight: std::collections::BTreeMap<String, u32> = others.into_iter().collect();
    weight.insert(origin.to_string(), share);
    (
        RegionValue {
            origins,
            weight,
            ..current.clone()
        },
        share,
    )
}

/// Keeps drain records true to the regions they name.
///
/// A drain record says "this origin was taken out of these regions". When a write puts the
/// origin back into one of them (a `set`, an `apply`, a `rollback`), the operator has
/// overridden the drain there: that region leaves the record, in the same transaction, and
/// a record left with no region is deleted. So at every revision, no region named in a
/// (well-formed) drain record as drained lists the drained origin. Regions a shed changed
/// (their recorded `after` lists the origin) are left alone: `restore` sets them back. A
/// malformed record is left alone with a note: it must not block changes about other
/// origins.
pub fn reconcile_drain_records(state: &State, changes: &mut Changes) -> Result<(), Error> {
    let touched: BTreeSet<String> = changes.regions.keys().cloned().collect();
    let mut candidates: BTreeMap<String, DrainRecord> = BTreeMap::new();
    for origin in state.drains.keys() {
        if changes.drains.contains_key(origin) {
            continue;
        }
        match state.drain_record(origin) {
            Ok(Some(record)) if record.regions.keys().any(|geo| touched.contains(geo)) => {
                candidates.insert(origin.clone(), record);
            }
            Ok(_) => {}
            // A malformed record blocks only the commands about its origin: this change
            // goes ahead, and says that record could not be kept in step.
            Err(_) => changes.notes.push(format!(
                "the drain record of {origin} is malformed and was not checked against this \
                 change; repair it with `dwctl drain --repair {origin}`"
            )),
        }
    }
    for (origin, record) in &changes.drains {
        if let Some(record) = record {
            candidates.insert(origin.clone(), record.clone());
        }
    }
    for (origin, mut record) in candidates {
        let before = record.regions.len();
        // A shed region lists the origin on purpose: it is left alone.
        let shed = record.shed_regions();
        record.regions.retain(|geo, _| {
            if shed.contains(geo) {
                return true;
            }
            let lists = match changes.regions.get(geo) {
                Some(new_value) => new_value.as_ref().is_some_and(|value| value.lists(&origin)),
                None => matches!(state.region(geo), Some(Ok(value)) if value.lists(&origin)),
            };
            if lists {
                changes.notes.push(format!(
                    "region {geo} lists {origin} again: it leaves {origin}'s drain record"
                ));
            }
            !lists
        });
        if record.regions.len() != before {
            // The parts forget the regions that left, and a part left with none goes.
            let kept: BTreeSet<String> = record.regions.keys().cloned().collect();
            for part in &mut record.parts {
                part.regions.retain(|geo, _| kept.contains(geo));
            }
            if !record.regions.is_empty() {
                record.settle_schema();
            }
            let update = (!record.regions.is_empty()).then_some(record);
            changes.drains.insert(origin, update);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::named;
    use crate::fixtures::state;

    fn request(origin: &str) -> DrainRequest {
        DrainRequest {
            origin: origin.into(),
            regions: vec![],
            reason: "test".into(),
            source: "cli".into(),
            by: "me@here".into(),
            at: "2026-01-01T00:00:00Z".into(),
            force: false,
            skip_emptying: false,
            fleet_limit: None,
        }
    }

    /// Applies `changes` to `state` as etcd would (drain records included).
    fn apply(state: &State, changes: &Changes) -> State {
        state.with_written(changes, 11)
    }

    fn weights(state: &State, geo: &str) -> Vec<(String, u32)> {
        state.region(geo).unwrap().unwrap().listed_weights()
    }

    /// Region DE holding `region`, before and after the CLI drains origin `a`.
    fn drained_a(region: &str) -> (State, State) {
        let before = state(&[("DE", region)]);
        let drained = apply(&before, &plan_drain(&before, &request("a")).unwrap());
        (before, drained)
    }

    #[test]
    fn drain_renormalises_every_region_and_restore_gives_back_the_exact_weights() {
        let before = state(&[
            (
                "DE",
                r#"{"shard":"eu-1","origins":["a","b","c","d"],"weight":{"a":25,"b":25,"c":25,"d":25}}"#,
            ),
            (
                "FR",
                r#"{"shard":"eu-1","origins":["b","a"],"weight":{"a":10,"b":90}}"#,
            ),
            ("US", r#"{"shard":"us-1","origins":["x"],"weight":{"x":1}}"#),
        ]);
        let changes = plan_drain(&before, &request("a")).unwrap();
        assert_eq!(changes.regions.keys().collect::<Vec<_>>(), ["DE", "FR"]);
        let drained = apply(&before, &changes);
        assert_eq!(
            weights(&drained, "DE"),
            named(&[("b", 34), ("c", 33), ("d", 33)])
        );
        assert_eq!(weights(&drained, "FR"), named(&[("b", 100)]));
        let record = drained.drain_record("a").unwrap().unwrap();
        assert_eq!(record.regions["FR"].before.weight_of("a"), 10);

        let restored = apply(
            &drained,
            &plan_restore(&drained, "a", Restoring::All).unwrap(),
        );
        assert_eq!(weights(&restored, "DE"), weights(&before, "DE"));
        assert_eq!(weights(&restored, "FR"), weights(&before, "FR"));
        assert!(restored.drains.is_empty());
    }

    #[test]
    fn restore_after_a_change_readds_with_the_previous_share() {
        let (_, drained) = drained_a(
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":40,"b":30,"c":30}}"#,
        );
        let mut changed = drained.clone();
        changed.regions.get_mut("DE").unwrap().raw =
            br#"{"shard":"eu-1","origins":["b","c","e"],"weight":{"b":1,"c":1,"e":2}}"#.to_vec();
        let changes = plan_restore(&changed, "a", Restoring::All).unwrap();
        assert!(
            changes
                .notes
                .iter()
                .any(|note| note.contains("changed since the drain"))
        );
        let restored = apply(&changed, &changes);
        assert_eq!(
            weights(&restored, "DE"),
            named(&[("a", 40), ("b", 15), ("c", 15), ("e", 30)])
        );
    }

    #[test]
    fn refuses_to_empty_a_region_unless_forced_and_restore_recreates_it() {
        let before = state(&[
            (
                "DE",
                r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":100,"b":0}}"#,
            ),
            (
                "FR",
                r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
            ),
        ]);
        let Err(Error::Invalid(errors)) = plan_drain(&before, &request("a")) else {
            panic!("an emptying drain must be refused");
        };
        assert_eq!(errors.len(), 1);
        assert!(errors[0].reason.contains("`DE`"));

        let skipping = plan_drain(
            &before,
            &DrainRequest {
                skip_emptying: true,
                ..request("a")
            },
        )
        .unwrap();
        assert_eq!(skipping.regions.keys().collect::<Vec<_>>(), ["FR"]);

        let forced = plan_drain(
            &before,
            &DrainRequest {
                force: true,
                ..request("a")
            },
        )
        .unwrap();
        assert_eq!(forced.regions["DE"], None);
        let drained = apply(&before, &forced);
        assert!(drained.region("DE").is_none());
        let restored = apply(
            &drained,
            &plan_restore(&drained, "a", Restoring::All).unwrap(),
        );
        assert_eq!(
            restored.region("DE").unwrap().unwrap(),
            before.region("DE").unwrap().unwrap()
        );
    }

    #[test]
    fn unknown_origins_and_regions_are_validation_errors() {
        let before = state(&[(
            "DE",
            r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
        )]);
        let field = |result: Result<Changes, Error>| match result {
            Err(Error::Invalid(errors)) => errors[0].field.clone(),
            other => panic!("expected a validation error, got {other:?}"),
        };
        assert_eq!(field(plan_drain(&before, &request("zz"))), "origin");
        assert_eq!(field(plan_drain(&before, &request(""))), "origin");
        assert_eq!(
            field(plan_drain(
                &before,
                &DrainRequest {
                    regions: vec!["XX".into()],
                    ..request("a")
                }
            )),
            "region"
        );
        assert_eq!(field(plan_restore(&before, "a", Restoring::All)), "origin");
    }

    #[test]
    fn automation_restores_only_its_own_drains_and_respects_the_fleet_limit() {
        let (before, drained) =
            drained_a(r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#);
        assert!(
            plan_restore(&drained, "a", Restoring::Own("health"))
                .unwrap()
                .is_empty()
        );
        let limit = FleetLimit {
            origins: ["a", "b", "c"]
                .iter()
                .map(|name| name.to_string())
                .collect(),
            max_drained: 1,
        };
        let limited = DrainRequest {
            fleet_limit: Some(limit),
            ..request("b")
        };
        assert!(matches!(
            plan_drain(&drained, &limited),
            Err(Error::Failed(_))
        ));
        assert!(plan_drain(&before, &limited).unwrap().guard_drains);
    }
}
