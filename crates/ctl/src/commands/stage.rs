//! `stage create|list|show|widen|promote|abort`: a routing change served by a cohort of
//! nodes first (the rules are in `crate::plan::stage` and `dw_routing::stage`).

use serde_json::{Value, json};

use crate::cli::{CohortArgs, StageCommand};
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::one_shot::{read_state, read_state_and_nodes};
use crate::ops::run::WriteGuard;
use crate::ops::stage::{Acted, CreateRequest, Widening, read_desired};
use crate::output::{Outcome, escape as shown, listing_text};
use crate::plan::apply::describe;
use crate::plan::clock::now_rfc3339;
use crate::plan::rollout_gate::judge;
use crate::plan::stage::{cohort_text, find_stage, open_stages, parse_cohort, promote_conflicts};

/// Runs `dwctl stage ...`.
pub async fn run(context: &Context, command: StageCommand) -> Result<Outcome, Error> {
    match command {
        StageCommand::Create {
            file,
            cohort,
            reason,
            id,
            dry_run,
            predict,
            ..
        } => {
            let guard = predict.to_guard();
            create(context, &file, &cohort, &reason, id, dry_run, guard).await
        }
        StageCommand::List => list(context).await,
        StageCommand::Show { id } => show(context, &id).await,
        StageCommand::Widen {
            id,
            cohort,
            reason,
            predict,
            ..
        } => {
            let wanted = parse_cohort(cohort.cohort.as_deref(), &cohort.nodes, &cohort.labels)?;
            let widening = Widening {
                points: cohort.cohort.is_some().then_some(wanted.points),
                nodes: wanted.nodes,
                labels: wanted.labels,
            };
            let acted =
                crate::ops::stage::widen(context, &id, &widening, &reason, &predict.to_guard())
                    .await?;
            Ok(acted_outcome(acted, "widened", &id))
        }
        StageCommand::Promote {
            id,
            rebase,
            reason,
            predict,
            ..
        } => {
            let guard = predict.to_guard();
            let acted = crate::ops::stage::promote(context, &id, rebase, &reason, &guard).await?;
            Ok(acted_outcome(acted, "promoted", &id))
        }
        StageCommand::Abort { id, reason, .. } => {
            let acted = crate::ops::stage::abort(context, &id, &reason).await?;
            Ok(acted_outcome(acted, "aborted", &id))
        }
    }
}

/// The id `stage create` gives a stage without `--id`: `stage-<UTC time>`.
fn default_id() -> String {
    let now = now_rfc3339();
    let digits: String = now.chars().filter(char::is_ascii_digit).collect();
    format!("stage-{digits}")
}

async fn create(
    context: &Context,
    file: &str,
    cohort: &CohortArgs,
    reason: &str,
    id: Option<String>,
    dry_run: bool,
    guard: WriteGuard,
) -> Result<Outcome, Error> {
    let desired = read_desired(file).await?;
    let cohort = parse_cohort(cohort.cohort.as_deref(), &cohort.nodes, &cohort.labels)?;
    let id = id.unwrap_or_else(default_id);
    let request = CreateRequest {
        desired: &desired,
        cohort,
        reason,
        id: &id,
        dry_run,
        guard,
    };
    let created = crate::ops::stage::create(context, &request).await?;
    let (stage, diff, members) = (&created.stage, &created.diff, &created.members);
    let mut lines = vec![match created.revision {
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
    let mut outcome = Outcome {
        text: lines.join("\n"),
        json: json!({
            "dry_run": dry_run,
            "revision": created.revision,
            "stage": stage,
            "diff": diff.iter().map(|line| json!({"op": line.op.to_string(), "key": line.key, "detail": line.detail})).collect::<Vec<_>>(),
            "cohort_nodes": members,
        }),
    };
    created.predictor.report(&mut outcome, dry_run);
    Ok(outcome)
}

async fn list(context: &Context) -> Result<Outcome, Error> {
    let state = read_state(context).await?;
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
    let (state, nodes) = read_state_and_nodes(context).await?;
    let (stage, entry) = find_stage(&state, id)?;
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

/// The outcome of a stage action (widen, promote, abort) written.
fn acted_outcome(acted: Acted, action: &str, id: &str) -> Outcome {
    let committed = &acted.committed;
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
    acted.predictor.report(&mut outcome, false);
    outcome
}
