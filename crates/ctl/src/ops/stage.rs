//! The stage operations (`stage create|widen|promote|abort`, and the rollout steps made of
//! them): a plain request in, each planned on the state read and previewed or committed
//! through the one preview-or-commit branch ([`run_checked`]: the size check, the load
//! prediction and the capacity guard included), the result out for the caller to word.
//! The rules of a stage are in `crate::plan::stage` and `dw_routing::stage`.

use std::collections::{BTreeMap, BTreeSet};

use dw_capacity::Traffic;
use dw_routing::stage::{Cohort, STAGE_SCHEMA, Stage, check_stage_id};

use crate::context::Context;
use crate::error::Error;
use crate::input::read_file_async;
use crate::ops::commit::{Changes, Committed, State};
use crate::ops::fleet::{NodeReport, read_nodes};
use crate::ops::run::{Predictor, run_checked};
use crate::output::escape as shown;
use crate::plan::apply::{Desired, DiffLine, FileFormat, parse_desired, plan_apply};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::model::StageEdits;
use crate::plan::rollout_gate::is_member;
use crate::plan::stage::{
    audit, cohort_text, find_stage, is_empty_cohort, key_revision, open_stages, promote_conflicts,
};
use crate::plan::value::{PolicyValue, RegionValue};

/// Reads a stage's desired-state file (apply's format: JSON, or TOML by extension; `-`
/// reads stdin). Capacities are refused: no node reads them, so they are never staged.
pub async fn read_desired(file: &str) -> Result<Desired, Error> {
    let bytes = read_file_async(file).await?;
    let text = String::from_utf8(bytes).map_err(|_| Error::invalid("file", "is not UTF-8"))?;
    let desired = parse_desired(&text, FileFormat::from_path(file))?;
    if desired.capacities.is_some() || desired.capacity_headroom.is_some() {
        return Err(Error::invalid(
            "capacities",
            "capacities are not staged (no node reads them): set them with `dwctl apply` or \
             `dwctl origin capacity`",
        ));
    }
    Ok(desired)
}

/// `stage create`: a stage of `desired`'s keys that differ from current routing.
#[derive(Debug, Clone)]
pub struct CreateRequest<'a> {
    /// The desired state ([`read_desired`]).
    pub desired: &'a Desired,
    /// Who serves the staged values.
    pub cohort: Cohort,
    /// Why, for the stage and its audit record.
    pub reason: &'a str,
    /// The stage id.
    pub id: &'a str,
    /// Preview only, write nothing.
    pub dry_run: bool,
}

/// What `stage create` made (or, dry, would make).
pub struct Created {
    /// The revision it was written at (`None` on a dry run).
    pub revision: Option<i64>,
    /// The stage as written.
    pub stage: Stage,
    /// The staged keys, each against current routing.
    pub diff: Vec<DiffLine>,
    /// The live nodes (by their reports) in the stage's cohort.
    pub members: Vec<String>,
    /// The load prediction to report.
    pub predictor: Predictor,
}

/// Creates a stage (or previews it with `dry_run`).
pub async fn create(context: &Context, request: &CreateRequest<'_>) -> Result<Created, Error> {
    if is_empty_cohort(&request.cohort) {
        return Err(Error::invalid(
            "cohort",
            "selects no node: give --cohort PERCENT, --nodes or --labels",
        ));
    }
    let id = request.id;
    check_stage_id(id).map_err(|e| Error::invalid("id", e.to_string()))?;
    let template = Stage {
        schema: STAGE_SCHEMA,
        id: id.to_owned(),
        cohort: request.cohort.clone(),
        kvs: BTreeMap::new(),
        base: BTreeMap::new(),
        created_by: operator(),
        created_at: now_rfc3339(),
        reason: request.reason.to_owned(),
    };
    let mut client = context.etcd.connect().await?;
    let mut diff = Vec::new();
    let plan = |state: &State, _: Result<&Traffic, String>| {
        plan_create(context, state, request.desired, &template, &mut diff)
    };
    let predictor = predictor(context, &mut client, &format!("stage create {id}")).await?;
    let ran = run_checked(context, &mut client, predictor, request.dry_run, plan).await?;
    let stage = ran
        .committed
        .changes
        .stages
        .get(id)
        .cloned()
        .flatten()
        .unwrap_or(template);
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
    let members = members(&stage, &nodes);
    Ok(Created {
        revision: ran.committed.revision,
        stage,
        diff,
        members,
        predictor: ran.predictor,
    })
}

/// The stage a file describes against `state`: the keys that differ from it.
fn plan_create(
    context: &Context,
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
            .insert(format!("{}{key}", context.layout.prefix), revision);
    }
    stage
        .check()
        .map_err(|e| Error::invalid("stage", e.to_string()))?;
    let (key, record) = audit(
        &context.layout,
        "create",
        id,
        &stage.reason,
        None,
        Some(&stage),
    );
    changes.audit.insert(key, record);
    changes.stages.insert(id.clone(), Some(stage));
    Ok(changes)
}

/// The prediction of a stage action: the traffic the command's flags name, and the node
/// reports its cohort is judged by (read only when there is traffic to predict with).
async fn predictor(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
) -> Result<Predictor, Error> {
    let predictor = Predictor::new(context, title).await?;
    if !predictor.reads_traffic() {
        return Ok(predictor);
    }
    let nodes = read_nodes(client, &context.layout.nodes).await?;
    Ok(predictor.with_nodes(nodes))
}

/// The live nodes (by their reports) in the stage's cohort.
pub fn members(stage: &Stage, nodes: &[NodeReport]) -> Vec<String> {
    nodes
        .iter()
        .filter(|node| node.live && is_member(stage, node))
        .map(|node| node.id.clone())
        .collect()
}

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

/// A stage action written (widen, promote, abort).
pub struct Acted {
    /// What was written, and the state it was planned on.
    pub committed: Committed,
    /// The load prediction to report.
    pub predictor: Predictor,
}

/// Writes a stage action (`action`: `widened`, `promoted`, `aborted`) planned by `plan`.
async fn act<F>(context: &Context, action: &str, id: &str, mut plan: F) -> Result<Acted, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    // A widen is predicted on the cohort's nodes; a promote writes the staged values as
    // current routing: predicted and guarded like any routing change (abort closes the
    // stage: never refused, nothing predicted).
    let predictor = predictor(context, &mut client, &format!("stage {action} {id}")).await?;
    let ran = run_checked(context, &mut client, predictor, false, |state, _| {
        plan(state)
    })
    .await?;
    Ok(Acted {
        committed: ran.committed,
        predictor: ran.predictor,
    })
}

/// Widens stage `id`'s cohort by `widening` (earlier members always stay in).
pub async fn widen(
    context: &Context,
    id: &str,
    widening: &Widening,
    reason: &str,
) -> Result<Acted, Error> {
    let plan = |state: &State| {
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
        let (key, record) = audit(
            &context.layout,
            "widen",
            id,
            reason,
            Some(&stage),
            Some(&after),
        );
        changes.audit.insert(key, record);
        changes.stages.insert(id.to_owned(), Some(after));
        Ok(changes)
    };
    act(context, "widened", id, plan).await
}

/// Promotes stage `id`: its values become current routing for every node, in one
/// transaction guarded on the revisions it was made from (`rebase`: over changes made
/// outside dwctl since).
pub async fn promote(
    context: &Context,
    id: &str,
    rebase: bool,
    reason: &str,
) -> Result<Acted, Error> {
    let plan = |state: &State| {
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
        let (key, record) = audit(&context.layout, "promote", id, reason, Some(&stage), None);
        changes.audit.insert(key, record);
        changes.stages.insert(id.to_owned(), None);
        Ok(changes)
    };
    act(context, "promoted", id, plan).await
}

/// Aborts stage `id`: its cohort returns to current routing.
pub async fn abort(context: &Context, id: &str, reason: &str) -> Result<Acted, Error> {
    let plan = |state: &State| {
        if !state.stages.contains_key(id) {
            return Err(Error::NotFound(format!("no open stage {}", shown(id))));
        }
        // An unreadable stage can be aborted too (it applies nowhere anyway).
        let stage = find_stage(state, id).ok().map(|(stage, _)| stage);
        let mut changes = Changes {
            stage_edits: StageEdits::Keep,
            ..Changes::default()
        };
        let (key, record) = audit(&context.layout, "abort", id, reason, stage.as_ref(), None);
        changes.audit.insert(key, record);
        changes.stages.insert(id.to_owned(), None);
        Ok(changes)
    };
    act(context, "aborted", id, plan).await
}
