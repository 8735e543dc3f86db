//! `apply`: make etcd match a desired-state file, in one transaction.

use dw_capacity::Traffic;
use serde_json::json;

use crate::cli::ApplyArgs;
use crate::context::Context;
use crate::error::Error;
use crate::input::read_file_async;
use crate::ops::commit::{Committed, State};
use crate::ops::one_shot::run_checked;
use crate::output::{Outcome, Shown};
use crate::plan::apply::{FileFormat, parse_desired, plan_apply, plan_apply_capacities};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::policy_geos::unkeyed_policy_geos_note;

/// Runs `dwctl apply`.
pub async fn run(context: &Context, args: ApplyArgs) -> Result<Outcome, Error> {
    let bytes = read_file_async(&args.file).await?;
    let text = String::from_utf8(bytes).map_err(|_| Error::invalid("file", "is not UTF-8"))?;
    let desired = parse_desired(&text, FileFormat::from_path(&args.file))?;
    let mut diff = Vec::new();
    let (by, at) = (operator(), now_rfc3339());
    let names_capacities = desired.capacities.is_some() || desired.capacity_headroom.is_some();
    let plan = |state: &State, _: Result<&Traffic, String>| {
        let (mut changes, mut lines) = plan_apply(state, &desired, args.prune);
        if names_capacities {
            if let Some(why) = &state.capacities_unreadable {
                return Err(Error::Failed(why.clone()));
            }
            plan_apply_capacities(
                state,
                &desired,
                args.prune,
                (&by, &at),
                &mut changes,
                &mut lines,
            );
        }
        changes
            .notes
            .extend(unkeyed_policy_geos_note(state, &changes));
        diff = lines;
        Ok(changes)
    };
    let guard = args.predict.to_guard();
    let ran = run_checked(context, "apply", &guard, args.dry_run, plan).await?;
    let Committed {
        revision,
        changes,
        attempts,
        ..
    } = &ran.committed;
    let mut lines: Vec<String> = diff
        .iter()
        .map(|line| format!("{} {} {}", line.op, Shown(&line.key), Shown(&line.detail)))
        .collect();
    if diff.is_empty() {
        lines.push("no changes: etcd already matches the file".into());
    }
    lines.extend(
        changes
            .notes
            .iter()
            .map(|note| format!("note: {}", Shown(note))),
    );
    match (args.dry_run, revision) {
        (true, _) if !diff.is_empty() => lines.push("dry run: nothing written".into()),
        (false, Some(revision)) => lines.push(format!("applied at revision {revision}")),
        _ => {}
    }
    let mut outcome = Outcome {
        text: lines.join("\n"),
        json: json!({
            "dry_run": args.dry_run,
            "revision": revision,
            "attempts": attempts,
            "diff": diff.iter().map(|line| json!({"op": line.op.to_string(), "key": line.key, "detail": line.detail})).collect::<Vec<_>>(),
            "notes": changes.notes,
        }),
    };
    ran.predictor.report(&mut outcome, args.dry_run);
    Ok(outcome)
}
