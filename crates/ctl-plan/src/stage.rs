//! Open stages as dwctl keeps them in step with its own writes, and what the `stage`
//! commands share (the cohort flags, promote's guard, the audit record).
//!
//! The stage record and the cohort and overlay rules are `dw_routing::stage`'s; this
//! module decides how a write that is not a stage command edits the open stages, in the
//! same transaction ([`reconcile_stages`], run by every plan):
//!
//! - a direct write (`region set`, `policy set`, `apply`, `rollback`) of a key an open
//!   stage touches removes that key from the stage (a stage left with no key is deleted),
//!   so the write reaches every node, the cohort too, and the notes say so;
//! - a drain takes the origin out of every staged region value that lists it too (a
//!   staged value it would empty leaves the stage instead), and the drain record keeps
//!   what it took from each stage;
//! - a restore gives the stages back what its record says was taken from them; a restore
//!   of one part of several gives each staged value the other parts re-applied, and the
//!   record keeps its `stages` until the last part goes.
//!
//! Promote is guarded on the revisions a stage was made from ([`promote_conflicts`]): a
//! staged key whose `mod_revision` is neither its base revision nor the revision the
//! stage key was last written at was changed around dwctl. (dwctl edits a stage in the
//! same transaction as the key, so such a change leaves both at one revision.)

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use dw_routing::stage::{COHORT_POINTS, Cohort, Stage};

use crate::Error;
use crate::drain::{plan_drain, readd};
use crate::drain_parts::{Effect, compose};
use crate::drain_record::DrainRequest;
use crate::drain_record::DrainedRegion;
use crate::keys::Layout;
use crate::model::{Changes, Entry, StageEdits, State};
use crate::shown::escape as shown;
use crate::value::RegionValue;

/// The open stages of `state`, read; an unreadable one as an error.
pub fn open_stages(state: &State) -> Vec<(String, Result<Stage, Error>)> {
    state
        .stages
        .iter()
        .map(|(id, entry)| (id.clone(), parse_stage(id, entry)))
        .collect()
}

/// Reads one stage key.
pub fn parse_stage(id: &str, entry: &Entry) -> Result<Stage, Error> {
    let text = std::str::from_utf8(&entry.raw)
        .map_err(|_| Error::Failed(format!("stage {}: not UTF-8", shown(id))))?;
    Stage::parse(id, text).map_err(|e| Error::Failed(format!("stage {}: {e}", shown(id))))
}

/// The stage `id` of `state`, or not-found.
pub fn find_stage(state: &State, id: &str) -> Result<(Stage, Entry), Error> {
    let entry = state
        .stages
        .get(id)
        .ok_or_else(|| Error::NotFound(format!("no open stage {}", shown(id))))?;
    Ok((parse_stage(id, entry)?, entry.clone()))
}

/// The keys (relative, `region/DE`) a change writes.
fn written_keys(changes: &Changes) -> BTreeSet<String> {
    let mut keys: BTreeSet<String> = changes
        .regions
        .keys()
        .map(|geo| format!("region/{geo}"))
        .collect();
    if changes.policy.is_some() {
        keys.insert("policy/global".into());
    }
    keys
}

/// A drain or restore that writes a key an open stage stages, without editing that stage
/// (the staged value does not list the origin), writes the stage again unchanged in the
/// same transaction, so that the key and the stage share the drain's revision and promote
/// sees dwctl's own write, not one around it.
fn rewrite_stages_of_written_keys(state: &State, changes: &mut Changes) {
    let written = written_keys(changes);
    for (id, stage) in open_stages(state) {
        let Ok(stage) = stage else { continue };
        if changes.stages.contains_key(&id) || !stage.kvs.keys().any(|key| written.contains(key)) {
            continue;
        }
        changes.stages.insert(id, Some(stage));
    }
}

/// `stage` as it is written again over `entry` (its key as read): the base of every
/// staged key that dwctl wrote together with the stage's last write (both at
/// `entry.mod_revision`) moves to that revision. Promote believes a key whose revision is
/// its base or the stage key's, so without this a later rewrite of the stage (a widen, a
/// second drain) would make the earlier drain look like a write around dwctl.
pub fn carry_base(state: &State, stage: &Stage, entry: Option<&Entry>) -> Stage {
    let mut stage = stage.clone();
    let Some(entry) = entry else { return stage };
    let carried: Vec<String> = stage
        .kvs
        .keys()
        .filter(|key| key_revision(state, key) == entry.mod_revision)
        .cloned()
        .collect();
    for key in carried {
        stage.base.insert(key, entry.mod_revision);
    }
    stage
}

/// Edits the open stages to follow `changes` (see the module's rules).
pub fn reconcile_stages(state: &State, changes: &mut Changes) -> Result<(), Error> {
    match std::mem::take(&mut changes.stage_edits) {
        StageEdits::Keep => {
            changes.stage_edits = StageEdits::Keep;
            Ok(())
        }
        StageEdits::Direct => {
            let written = written_keys(changes);
            if written.is_empty() {
                return Ok(());
            }
            for (id, stage) in open_stages(state) {
                let Ok(mut stage) = stage else { continue };
                if changes.stages.contains_key(&id) {
                    continue;
                }
                let removed: Vec<String> = stage
                    .kvs
                    .keys()
                    .filter(|key| written.contains(*key))
                    .cloned()
                    .collect();
                if removed.is_empty() {
                    continue;
                }
                for key in removed {
                    stage.kvs.remove(&key);
                    stage.base.remove(&key);
                    changes.notes.push(format!(
                        "{key} was staged by {}: the direct write removes it from the stage, \
                         so it reaches every node",
                        shown(&id)
                    ));
                }
                if stage.kvs.is_empty() {
                    changes.notes.push(format!(
                        "stage {} stages nothing else: it is deleted",
                        shown(&id)
                    ));
                    changes.stages.insert(id, None);
                } else {
                    changes.stages.insert(id, Some(stage));
                }
            }
            Ok(())
        }
        StageEdits::Drain(request) => {
            drain_stages(state, changes, &request);
            changes.stage_edits = StageEdits::Drain(request);
            rewrite_stages_of_written_keys(state, changes);
            Ok(())
        }
        StageEdits::Restore(origin) => {
            restore_stages(state, changes, &origin)?;
            changes.stage_edits = StageEdits::Restore(origin);
            rewrite_stages_of_written_keys(state, changes);
            Ok(())
        }
    }
}

/// The staged regions of `stage` as a state of their own, for the drain planner.
fn staged_regions(stage: &Stage) -> State {
    let regions = stage
        .kvs
        .iter()
        .filter_map(|(key, value)| {
            let geo = key.strip_prefix("region/")?;
            let value = value.as_ref()?;
            Some((
                geo.to_owned(),
                Entry {
                    raw: value.as_bytes().to_vec(),
                    mod_revision: 0,
                },
            ))
        })
        .collect();
    State {
        regions,
        ..State::default()
    }
}

fn drain_stages(state: &State, changes: &mut Changes, request: &DrainRequest) {
    let origin = request.origin.as_str();
    // Only a drain that is recorded (it took something) edits stages.
    let Some(Some(mut record)) = changes.drains.get(origin).cloned() else {
        return;
    };
    let mut edited = false;
    for (id, stage) in open_stages(state) {
        let Ok(mut stage) = stage else { continue };
        let staged = staged_regions(&stage);
        let listing = staged.regions_listing(origin);
        if listing.is_empty() {
            continue;
        }
        let mut only = request.clone();
        only.regions = if request.regions.is_empty() {
            listing.clone()
        } else {
            listing
                .iter()
                .filter(|geo| request.regions.contains(geo))
                .cloned()
                .collect()
        };
        if only.regions.is_empty() {
            continue;
        }
        only.fleet_limit = None;
        only.skip_emptying = !request.force;
        let Ok(planned) = plan_drain(&staged, &only) else {
            continue;
        };
        let mut taken = BTreeMap::new();
        for geo in only.regions.iter() {
            let key = format!("region/{geo}");
            let Some(Ok(before)) = staged.region(geo) else {
                continue;
            };
            match planned.regions.get(geo) {
                Some(after) => {
                    stage
                        .kvs
                        .insert(key, after.as_ref().map(|value| value.encode(&request.at)));
                    taken.insert(
                        geo.to_string(),
                        DrainedRegion {
                            before,
                            after: after.clone(),
                        },
                    );
                    changes.notes.push(format!(
                        "stage {}: {origin} leaves its staged region/{geo} too",
                        shown(&id)
                    ));
                }
                None => {
                    // The drain would empty the staged value: it leaves the stage, so the
                    // cohort routes from the drained current value.
                    stage.kvs.remove(&key);
                    stage.base.remove(&key);
                    changes.notes.push(format!(
                        "stage {}: {origin} is the only origin of its staged region/{geo}: \
                         the key leaves the stage",
                        shown(&id)
                    ));
                }
            }
        }
        if !taken.is_empty() {
            record.stages.insert(id.clone(), taken);
        }
        edited = true;
        if stage.kvs.is_empty() {
            changes.stages.insert(id, None);
        } else {
            changes.stages.insert(id, Some(stage));
        }
    }
    if edited {
        changes.drains.insert(origin.to_string(), Some(record));
    }
}

fn restore_stages(state: &State, changes: &mut Changes, origin: &str) -> Result<(), Error> {
    let Some(record) = state.drain_record(origin)? else {
        return Ok(());
    };
    // A restore of some parts: the record that stays with the other parts. Each staged
    // value gets those parts re-applied (the composition rule, `crate::drain_parts`), and
    // the record keeps what it still took from the stage, for the last restore.
    let mut kept = match changes.drains.get(origin) {
        Some(Some(kept)) => Some(kept.clone()),
        _ => None,
    };
    for (id, geos) in &record.stages {
        let Some(Ok(mut stage)) = state.stages.get(id).map(|entry| parse_stage(id, entry)) else {
            changes.notes.push(format!(
                "stage {} is closed since the drain: nothing to give back to it",
                shown(id)
            ));
            continue;
        };
        let mut edited = false;
        for (geo, drained) in geos {
            let key = format!("region/{geo}");
            let others: Vec<Effect> = kept
                .iter()
                .flat_map(|kept| kept.parts.iter())
                .filter_map(|part| part.regions.get(geo).cloned())
                .collect();
            // The staged value without the undone parts; `None`: the other parts drain its
            // last origin, so the staged value is left as it is.
            let effects: Vec<&Effect> = others.iter().collect();
            let Some(target) = compose(&drained.before, origin, &effects) else {
                continue;
            };
            let current = match stage.kvs.get(&key) {
                Some(Some(raw)) => RegionValue::from_stored(raw.as_bytes()).ok(),
                _ => None,
            };
            let restored = match current {
                None if drained.after.is_none() && stage.kvs.contains_key(&key) => target,
                None => continue,
                Some(current) if current.lists(origin) => continue,
                Some(current)
                    if drained
                        .after
                        .as_ref()
                        .is_some_and(|after| after.same_routing(&current)) =>
                {
                    RegionValue {
                        origins: target.origins.clone(),
                        weight: target.weight.clone(),
                        ..current
                    }
                }
                Some(current) if target.lists(origin) => readd(&current, &target, origin).0,
                Some(_) => continue,
            };
            if let Some(kept) = kept.as_mut() {
                let taken = kept.stages.entry(id.clone()).or_default();
                if others.is_empty() {
                    taken.remove(geo);
                } else if let Some(region) = taken.get_mut(geo) {
                    region.after = Some(restored.clone());
                }
                if taken.is_empty() {
                    kept.stages.remove(id);
                }
            }
            let back = if restored.lists(origin) {
                "is back in"
            } else {
                "stays out of (another part drains it)"
            };
            stage
                .kvs
                .insert(key, Some(restored.encode(&crate::clock::now_rfc3339())));
            changes.notes.push(format!(
                "stage {}: {origin} {back} its staged region/{geo}",
                shown(id)
            ));
            edited = true;
        }
        if edited {
            changes.stages.insert(id.clone(), Some(stage));
        }
    }
    if let Some(kept) = kept {
        changes.drains.insert(origin.to_string(), Some(kept));
    }
    Ok(())
}

/// The `mod_revision` of a relative key in `state` (0: absent).
pub fn key_revision(state: &State, key: &str) -> i64 {
    if key == "policy/global" {
        return state.policy.as_ref().map_or(0, |entry| entry.mod_revision);
    }
    key.strip_prefix("region/")
        .and_then(|geo| state.regions.get(geo))
        .map_or(0, |entry| entry.mod_revision)
}

/// The staged keys changed around dwctl since the stage was made: their `mod_revision` is
/// neither the recorded base nor the revision the stage key was written at.
pub fn promote_conflicts(state: &State, stage: &Stage, entry: &Entry) -> Vec<String> {
    stage
        .kvs
        .keys()
        .filter(|key| {
            let now = key_revision(state, key);
            let base = stage.base.get(*key).copied().unwrap_or(0);
            now != base && now != entry.mod_revision
        })
        .cloned()
        .collect()
}

/// The cohort the flags describe: `--cohort 5%` (or `2.5`, `100%`), `--nodes`, `--labels`.
pub fn parse_cohort(cohort: Option<&str>, nodes: &[String], labels: &str) -> Result<Cohort, Error> {
    let points = match cohort {
        None => 0,
        Some(text) => parse_percent(text)?,
    };
    let cohort = Cohort {
        points,
        nodes: nodes
            .iter()
            .map(|node| node.trim().to_owned())
            .filter(|node| !node.is_empty())
            .collect(),
        labels: crate::node_report::parse_selector(labels)?,
    };
    cohort
        .check()
        .map_err(|e| Error::invalid("cohort", e.to_string()))?;
    Ok(cohort)
}

/// `5%`, `5`, `0.25%` → points (percent × 100); 0 to 100 %, at most two decimals.
pub fn parse_percent(text: &str) -> Result<u16, Error> {
    let number = text.trim().trim_end_matches('%').trim();
    let bad = || {
        Error::invalid(
            "cohort",
            format!(
                "{:?}: expected a percentage from 0 to 100 with at most two decimals, e.g. 5%",
                shown(text)
            ),
        )
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() || fraction.len() > 2 || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    if !fraction.bytes().all(|b| b.is_ascii_digit()) || whole.len() > 3 {
        return Err(bad());
    }
    let whole: u32 = whole.parse().map_err(|_| bad())?;
    let fraction: u32 = format!("{fraction:0<2}").parse().map_err(|_| bad())?;
    let points = whole * 100 + fraction;
    if points > u32::from(COHORT_POINTS) {
        return Err(bad());
    }
    Ok(points as u16)
}

/// `25% + nodes a,b + labels site=fra`.
pub fn cohort_text(cohort: &Cohort) -> String {
    let mut parts = Vec::new();
    if cohort.points > 0 || (cohort.nodes.is_empty() && cohort.labels.is_empty()) {
        parts.push(format!(
            "{}.{:02}%",
            cohort.points / 100,
            cohort.points % 100
        ));
    }
    if !cohort.nodes.is_empty() {
        parts.push(format!(
            "nodes {}",
            shown(&cohort.nodes.iter().cloned().collect::<Vec<_>>().join(","))
        ));
    }
    if !cohort.labels.is_empty() {
        parts.push(format!(
            "labels {}",
            shown(
                &cohort
                    .labels
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(",")
            )
        ));
    }
    parts.join(" + ")
}

/// Whether a cohort selects no node by construction.
pub fn is_empty_cohort(cohort: &Cohort) -> bool {
    cohort.points == 0 && cohort.nodes.is_empty() && cohort.labels.is_empty()
}

/// The audit record of a stage action, at `<control>stages/<id>` (each action rewrites it;
/// `dwctl history` lists them).
pub fn audit(
    layout: &Layout,
    action: &str,
    id: &str,
    reason: &str,
    before: Option<&Stage>,
    after: Option<&Stage>,
) -> (String, String) {
    let record = json!({
        "action": action,
        "stage": id,
        "by": crate::clock::operator(),
        "at": crate::clock::now_rfc3339(),
        "reason": reason,
        "before": before.map_or(Value::Null, |s| serde_json::to_value(s).unwrap_or(Value::Null)),
        "after": after.map_or(Value::Null, |s| serde_json::to_value(s).unwrap_or(Value::Null)),
    });
    (layout.stage_audit(id), record.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages_parse_to_points_at_their_edges() {
        assert_eq!(parse_percent("5%").unwrap(), 500);
        assert_eq!(parse_percent("0.25%").unwrap(), 25);
        assert_eq!(parse_percent("100").unwrap(), 10_000);
        assert_eq!(parse_percent("0").unwrap(), 0);
        for bad in ["100.01%", "101", "-1", "1.234", "x", "", "%", "1e2", "1000"] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(shown("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("plain é"), "plain é");
    }
}
