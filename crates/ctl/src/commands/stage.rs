//! `stage create|list|show|widen|promote|abort`: a routing change served by a cohort of
//! nodes first (the rules are in `crate::plan::stage` and `dw_routing::stage`).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use dw_routing::stage::{Cohort, STAGE_SCHEMA, Stage, check_stage_id};

use crate::cli::{CohortArgs, StageCommand};
use crate::context::Context;
use crate::error::Error;
use crate::input::read_file_async;
use crate::ops::commit::{Changes, State, preview, read_state, transact};
use crate::ops::fleet::{NodeReport, read_nodes};
use crate::ops::run::Predictor;
use crate::output::{Outcome, escape as shown, listing_text};
use crate::plan::apply::{DiffLine, FileFormat, describe, parse_desired, plan_apply};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::model::StageEdits;
use crate::plan::rollout_gate::{is_member, judge};
use crate::plan::stage::{
    audit, cohort_text, find_stage, is_empty_cohort, key_revision, open_stages, parse_cohort,
    promote_conflicts,
};
use crate::plan::value::{PolicyValue, RegionValue};

/// Runs `dwctl stage ...`.
pub async fn run(context: &Context, command: StageCommand) -> Result<Outcome, Error> {
    match command {
        StageCommand::Create {
            file,
            cohort,
            reason,
            id,
            dry_run,
            ..
        } => create(context, &file, &cohort, &reason, id, dry_run).await,
        StageCommand::List => list(context).await,
        StageCommand::Show { id } => show(context, &id).await,
        StageCommand::Widen {
            id, cohort, reason, ..
        } => widen(context, &id, &cohort, &reason).await,
        StageCommand::Promote {
            id, rebase, reason, ..
        } => promote(context, &id, rebase, &reason).await,
        StageCommand::Abort { id, reason, .. } => abort(context, &id, &reason).await,
    }
}

/// The id `stage create` gives a stage without `--id`: `stage-<UTC time>`.
fn default_id() -> String {
    let now = now_rfc3339();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    format!("stage-{digits}")
}

fn cohort_of(args: &CohortArgs) -> Result<Cohort, Error> {
    Ok(parse_cohort(
        args.cohort.as_deref(),
        &args.nodes,
        &args.labels,
    )?)
}

/// The stage a file describes against `state`: the keys that differ from it.
fn plan_create(
    context: &Context,
    state: &State,
    desired: &crate::plan::apply::Desired,
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

pub(super) async fn create(
    context: &Context,
    file: &str,
    cohort: &CohortArgs,
    reason: &str,
    id: Option<String>,
    dry_run: bool,
) -> Result<Outcome, Error> {
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
    let cohort = cohort_of(cohort)?;
    if is_empty_cohort(&cohort) {
        return Err(Error::invalid(
            "cohort",
            "selects no node: give --cohort PERCENT, --nodes or --labels",
        ));
    }
    let id = id.unwrap_or_else(default_id);
    check_stage_id(&id).map_err(|e| Error::invalid("id", e.to_string()))?;
    let template = Stage {
        schema: STAGE_SCHEMA,
        id: id.clone(),
        cohort,
        kvs: BTreeMap::new(),
        base: BTreeMap::new(),
        created_by: operator(),
        created_at: now_rfc3339(),
        reason: reason.to_owned(),
    };
    let mut client = context.etcd.connect().await?;
    let mut diff = Vec::new();
    let mut plan = |state: &State| plan_create(context, state, &desired, &template, &mut diff);
    let (revision, changes) = if dry_run {
        let (_, changes) = preview(&mut client, &context.layout, &mut plan).await?;
        (None, changes)
    } else {
        let committed = transact(
            &mut client,
            &context.layout,
            &context.retry,
            &now_rfc3339(),
            &mut plan,
        )
        .await?;
        (committed.revision, committed.changes)
    };
    let stage = changes
        .stages
        .get(&id)
        .cloned()
        .flatten()
        .unwrap_or(template);
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
    let members = members(&stage, &nodes);
    let mut lines = vec![match revision {
        Some(revision) => format!("stage {} created at revision {revision}", shown(&id)),
        None => format!("stage {}: dry run, nothing written", shown(&id)),
    }];
    lines.push(format!("cohort: {}", cohort_text(&stage.cohort)));
    lines.extend(
        diff.iter()
            .map(|line| format!("{} {} {}", line.op, shown(&line.key), shown(&line.detail))),
    );
    lines.push(format!(
        "cohort nodes (from node reports): {}",
        if members.is_empty() {
            "none reporting yet".to_string()
        } else {
            shown(&members.join(", "))
        }
    ));
    Ok(Outcome {
        text: lines.join("\n"),
        json: json!({
            "dry_run": dry_run,
            "revision": revision,
            "stage": stage,
            "diff": diff.iter().map(|line| json!({"op": line.op.to_string(), "key": line.key, "detail": line.detail})).collect::<Vec<_>>(),
            "cohort_nodes": members,
        }),
    })
}

/// The live nodes (by their reports) in the stage's cohort.
fn members(stage: &Stage, nodes: &[NodeReport]) -> Vec<String> {
    nodes
        .iter()
        .filter(|node| node.live && is_member(stage, node))
        .map(|node| node.id.clone())
        .collect()
}

async fn list(context: &Context) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let state = read_state(&mut client, &context.layout).await?;
    let mut lines = Vec::new();
    let mut rows = Vec::new();
    for (id, stage) in open_stages(&state) {
        let revision = state.stages[&id].mod_revision;
        match stage {
            Ok(stage) => {
                lines.push(format!(
                    "{:<24} {:<28} {:>10}  {}  {} ({})",
                    shown(&id),
                    cohort_text(&stage.cohort),
                    revision,
                    shown(&stage.kvs.keys().cloned().collect::<Vec<_>>().join(",")),
                    shown(&stage.created_by),
                    shown(&stage.reason)
                ));
                rows.push(json!({"id": id, "valid": true, "revision": revision, "stage": stage}));
            }
            Err(error) => {
                lines.push(format!(
                    "{:<24} INVALID (applies nowhere): {}",
                    shown(&id),
                    shown(&error.to_string())
                ));
                rows.push(json!({"id": id, "valid": false, "revision": revision, "error": error.to_string()}));
            }
        }
    }
    Ok(Outcome {
        text: listing_text(lines, "no open stages"),
        json: json!({"stages": rows}),
    })
}

async fn show(context: &Context, id: &str) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let state = read_state(&mut client, &context.layout).await?;
    let (stage, entry) = find_stage(&state, id)?;
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
    let mut lines = vec![
        format!(
            "stage {} (revision {}), by {} at {}: {}",
            shown(id),
            entry.mod_revision,
            shown(&stage.created_by),
            shown(&stage.created_at),
            shown(&stage.reason)
        ),
        format!("cohort: {}", cohort_text(&stage.cohort)),
    ];
    let mut diff = Vec::new();
    for (key, staged) in &stage.kvs {
        let current = current_value(&state, key);
        let detail = match (&current, staged) {
            (None, Some(new)) => format!("+ {key} {}", json_text(new)),
            (Some(_), None) => format!("- {key}"),
            (None, None) => format!("= {key} (absent either way)"),
            (Some(old), Some(new)) => {
                format!("~ {key} {}", describe(&json_of(old), &json_of(new)))
            }
        };
        lines.push(shown(&detail));
        diff.push(json!({"key": key, "current": current, "staged": staged}));
    }
    let conflicts = promote_conflicts(&state, &stage, &entry);
    if !conflicts.is_empty() {
        lines.push(format!(
            "changed outside dwctl since the stage was made (promote needs --rebase): {}",
            shown(&conflicts.join(", "))
        ));
    }
    // The verdict a rollout step would reach: a node serves the stage only when the fleet
    // view believes its report too (not missing, untrusted, in conflict or stale).
    let gate = judge(&stage, entry.mod_revision, &context.layout.prefix, &nodes);
    let waiting: Vec<String> = gate.blocking.iter().map(|(node, _)| node.clone()).collect();
    lines.push(format!(
        "cohort nodes: {} live, {} serve it, not yet: {}",
        gate.members.len(),
        gate.serving.len(),
        if gate.blocking.is_empty() {
            "-".to_string()
        } else {
            let why: Vec<String> = gate
                .blocking
                .iter()
                .map(|(node, why)| format!("{node} ({why})"))
                .collect();
            shown(&why.join(", "))
        }
    ));
    Ok(Outcome {
        text: lines.join("\n"),
        json: json!({
            "id": id,
            "revision": Value::Null,
            "stage_revision": entry.mod_revision,
            "stage": stage,
            "diff": diff,
            "conflicts": conflicts,
            "cohort_nodes": gate.members,
            "serving": gate.serving,
            "not_serving": waiting,
            "not_serving_why": gate.blocking.iter()
                .map(|(node, why)| json!({"node": node, "why": why}))
                .collect::<Vec<_>>(),
        }),
    })
}

fn current_value(state: &State, key: &str) -> Option<String> {
    let entry = if key == "policy/global" {
        state.policy.as_ref()
    } else {
        key.strip_prefix("region/")
            .and_then(|geo| state.regions.get(geo))
    };
    entry.map(|entry| String::from_utf8_lossy(&entry.raw).into_owned())
}

fn json_of(text: &str) -> Value {
    let mut value = serde_json::from_str(text).unwrap_or_else(|_| Value::from(text));
    if let Value::Object(object) = &mut value {
        object.remove("updated");
    }
    value
}

fn json_text(text: &str) -> String {
    json_of(text).to_string()
}

/// Writes a stage action (the plan edits only the stage) and reports it.
async fn write_stage_action<F>(
    context: &Context,
    action: &str,
    id: &str,
    mut plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    // A promote writes the staged values as current routing: predicted and guarded like
    // any routing change (widen and abort change no current routing: nothing predicted).
    let mut predictor = Predictor::new(context, &format!("stage {action} {id}")).await?;
    let committed = transact(
        &mut client,
        &context.layout,
        &context.retry,
        &now_rfc3339(),
        |state: &State| {
            let mut changes = plan(state)?;
            predictor.check(context, state, &mut changes)?;
            Ok(changes)
        },
    )
    .await?;
    let mut lines = vec![match committed.revision {
        Some(revision) => format!("stage {} {action} at revision {revision}", shown(id)),
        None => format!("stage {}: nothing to change", shown(id)),
    }];
    let after = committed.changes.stages.get(id).cloned().flatten();
    if let Some(stage) = &after {
        lines.push(format!("cohort: {}", cohort_text(&stage.cohort)));
    }
    lines.extend(
        committed
            .changes
            .notes
            .iter()
            .map(|note| format!("note: {}", shown(note))),
    );
    let mut outcome = Outcome {
        text: lines.join("\n"),
        json: json!({
            "action": action,
            "id": id,
            "revision": committed.revision,
            "attempts": committed.attempts,
            "stage": after,
            "notes": committed.changes.notes,
        }),
    };
    predictor.report(&mut outcome, false);
    Ok(outcome)
}

pub(super) async fn widen(
    context: &Context,
    id: &str,
    args: &CohortArgs,
    reason: &str,
) -> Result<Outcome, Error> {
    let wanted = cohort_of(args)?;
    let plan = |state: &State| {
        let (stage, _) = find_stage(state, id)?;
        let mut wider = stage.cohort.clone();
        if args.cohort.is_some() {
            wider.points = wanted.points;
        }
        wider.nodes.extend(wanted.nodes.iter().cloned());
        if !wanted.labels.is_empty() {
            wider.labels = wanted.labels.clone();
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
    write_stage_action(context, "widened", id, plan).await
}

pub(super) async fn promote(
    context: &Context,
    id: &str,
    rebase: bool,
    reason: &str,
) -> Result<Outcome, Error> {
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
    write_stage_action(context, "promoted", id, plan).await
}

pub(super) async fn abort(context: &Context, id: &str, reason: &str) -> Result<Outcome, Error> {
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
    write_stage_action(context, "aborted", id, plan).await
}
