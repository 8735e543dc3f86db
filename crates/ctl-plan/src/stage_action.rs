//! The stage actions' planners (`stage create|widen|promote|abort`, and the rollout steps
//! made of them): the state read in, the changes to write out, pure. dwctl's
//! `ops/stage.rs` reads, runs them through its one preview-or-commit branch and words the
//! result; the rules they share with every other write (follow-ups, the audit record) are
//! in [`crate::stage`].

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::stage::Stage;

use crate::Error;
use crate::apply::{Desired, DiffLine, plan_apply};
use crate::clock::now_rfc3339;
use crate::keys::Layout;
use crate::model::{Changes, StageEdits, State};
use crate::shown::escape as shown;
use crate::stage::{audit, cohort_text, find_stage, key_revision, open_stages, promote_conflicts};
use crate::value::{PolicyValue, RegionValue};

/// What `stage widen` adds to a cohort: a new percentage (`None`: the percentage stays),
/// more nodes, the labels (empty: they stay).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Widening {
    /// The cohort's new percentage, in points (percent × 100).
    pub points: Option<u16>,
    /// Nodes added by id.
    pub nodes: BTreeSet<String>,
    /// The cohort's labels (they cannot change: only given again).
    pub labels: BTreeMap<String, String>,
}

impl Widening {
    /// The widening to a percentage only (a rollout step).
    pub fn to_points(points: u16) -> Widening {
        Widening {
            points: Some(points),
            ..Widening::default()
        }
    }
}

/// The stage a file describes against `state`: the keys that differ from it.
pub fn plan_create(
    layout: &Layout,
    state: &State,
    desired: &Desired,
    stage_template: &Stage,
    diff_out: &mut Vec<DiffLine>,
) -> Result<Changes, Error> {
    let id = &stage_template.id;
    if state.stages.contains_key(id) {
        return Err(Error::Failed(format!(
            "stage {} is open already: widen, promote or abort it, or pick another --id",
            shown(id)
        )));
    }
    let (planned, lines) = plan_apply(state, desired, false);
    *diff_out = lines;
    if diff_out.is_empty() {
        return Err(Error::Failed(
            "nothing to stage: every key of the file matches current routing".into(),
        ));
    }
    let updated = now_rfc3339();
    let mut stage = stage_template.clone();
    for (geo, value) in &planned.regions {
        stage.kvs.insert(
            format!("region/{geo}"),
            value.as_ref().map(|value| value.encode(&updated)),
        );
    }
    if let Some(policy) = &planned.policy {
        stage
            .kvs
            .insert("policy/global".into(), Some(policy.encode(&updated)));
    }
    for (other, open) in open_stages(state) {
        let Ok(open) = open else { continue };
        if let Some(key) = open.kvs.keys().find(|key| stage.kvs.contains_key(*key)) {
            return Err(Error::Failed(format!(
                "{} is staged by stage {} already (at most one open stage may touch a key): \
                 promote or abort it first",
                shown(key),
                shown(&other)
            )));
        }
    }
    let mut changes = Changes {
        stage_edits: StageEdits::Keep,
        guard_stages: true,
        ..Changes::default()
    };
    for key in stage.kvs.keys() {
        let revision = key_revision(state, key);
        stage.base.insert(key.clone(), revision);
        changes
            .guards
            .insert(format!("{}{key}", layout.prefix), revision);
    }
    stage
        .check()
        .map_err(|e| Error::invalid("stage", e.to_string()))?;
    let (key, record) = audit(layout, "create", id, &stage.reason, None, Some(&stage));
    changes.audit.insert(key, record);
    changes.stages.insert(id.clone(), Some(stage));
    Ok(changes)
}

/// Widens stage `id`'s cohort by `widening` (earlier members always stay in).
pub fn plan_widen(
    layout: &Layout,
    state: &State,
    id: &str,
    widening: &Widening,
    reason: &str,
) -> Result<Changes, Error> {
    let (stage, _) = find_stage(state, id)?;
    let mut wider = stage.cohort.clone();
    if let Some(points) = widening.points {
        wider.points = points;
    }
    wider.nodes.extend(widening.nodes.iter().cloned());
    if !widening.labels.is_empty() {
        wider.labels = widening.labels.clone();
    }
    if !stage.cohort.is_within(&wider) {
        return Err(Error::invalid(
            "cohort",
            format!(
                "{} would drop nodes of the current cohort {} (widen only widens; abort \
                 and create a new stage to narrow)",
                cohort_text(&wider),
                cohort_text(&stage.cohort)
            ),
        ));
    }
    let mut changes = Changes {
        stage_edits: StageEdits::Keep,
        ..Changes::default()
    };
    if wider == stage.cohort {
        changes
            .notes
            .push(format!("the cohort is {} already", cohort_text(&wider)));
        return Ok(changes);
    }
    let mut after = stage.clone();
    after.cohort = wider;
    let (key, record) = audit(layout, "widen", id, reason, Some(&stage), Some(&after));
    changes.audit.insert(key, record);
    changes.stages.insert(id.to_owned(), Some(after));
    Ok(changes)
}

/// Promotes stage `id`: its values become current routing for every node, guarded on the
/// revisions it was made from; `rebase` makes the staged values win over changes made
/// outside dwctl since (refused with [`Error::Diverged`] otherwise).
pub fn plan_promote(
    layout: &Layout,
    state: &State,
    id: &str,
    rebase: bool,
    reason: &str,
) -> Result<Changes, Error> {
    let (stage, entry) = find_stage(state, id)?;
    let conflicts = promote_conflicts(state, &stage, &entry);
    let mut changes = Changes {
        stage_edits: StageEdits::Keep,
        ..Changes::default()
    };
    if !conflicts.is_empty() {
        if !rebase {
            return Err(Error::Diverged(format!(
                "not promoting stage {}: {} changed outside dwctl since the stage was made \
                 (nothing written); `dwctl stage show {}` shows the difference, \
                 `dwctl stage promote {} --rebase` makes the staged values win",
                shown(id),
                shown(&conflicts.join(", ")),
                shown(id),
                shown(id)
            )));
        }
        changes.notes.push(format!(
            "--rebase: the staged values replace changes made outside dwctl to {}",
            shown(&conflicts.join(", "))
        ));
    }
    for (key, value) in &stage.kvs {
        if key == "policy/global" {
            match value {
                Some(raw) => {
                    let policy = PolicyValue::from_stored(raw.as_bytes()).map_err(|e| {
                        Error::Failed(format!("staged policy/global is invalid: {e}"))
                    })?;
                    changes.policy = Some(policy);
                }
                None if state.policy.is_some() => {
                    return Err(Error::Failed(
                        "the stage deletes policy/global, which dwctl never deletes".into(),
                    ));
                }
                None => {}
            }
        } else if let Some(geo) = key.strip_prefix("region/") {
            match value {
                Some(raw) => {
                    let region = RegionValue::from_stored(raw.as_bytes()).map_err(|e| {
                        Error::Failed(format!("staged {} is invalid: {e}", shown(key)))
                    })?;
                    changes.regions.insert(geo.to_owned(), Some(region));
                }
                None if state.regions.contains_key(geo) => {
                    changes.regions.insert(geo.to_owned(), None);
                }
                None => {}
            }
        }
    }
    let (key, record) = audit(layout, "promote", id, reason, Some(&stage), None);
    changes.audit.insert(key, record);
    changes.stages.insert(id.to_owned(), None);
    Ok(changes)
}

/// Aborts stage `id`: its cohort returns to current routing.
pub fn plan_abort(
    layout: &Layout,
    state: &State,
    id: &str,
    reason: &str,
) -> Result<Changes, Error> {
    if !state.stages.contains_key(id) {
        return Err(Error::NotFound(format!("no open stage {}", shown(id))));
    }
    // An unreadable stage can be aborted too (it applies nowhere anyway).
    let stage = find_stage(state, id).ok().map(|(stage, _)| stage);
    let mut changes = Changes {
        stage_edits: StageEdits::Keep,
        ..Changes::default()
    };
    let (key, record) = audit(layout, "abort", id, reason, stage.as_ref(), None);
    changes.audit.insert(key, record);
    changes.stages.insert(id.to_owned(), None);
    Ok(changes)
}
