//! `apply`: make etcd match a desired-state file, in one transaction.

use serde_json::json;

use crate::cli::ApplyArgs;
use crate::context::Context;
use crate::error::Error;
use crate::input::read_file_async;
use crate::ops::commit::{State, preview, transact};
use crate::ops::run::Predictor;
use crate::output::{Outcome, Shown};
use crate::plan::apply::{FileFormat, parse_desired, plan_apply, plan_apply_capacities};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::policy_geos::unkeyed_policy_geos_note;

/// Runs `dwctl apply`.
pub async fn run(context: &Context, args: ApplyArgs) -> Result<Outcome, Error> {
    let bytes = read_file_async(&args.file).await?;
    let text = String::from_utf8(bytes).map_err(|_| Error::invalid("file", "is not UTF-8"))?;
    let desired = parse_desired(&text, FileFormat::from_path(&args.file))?;
    let mut client = context.etcd.connect().await?;
    let mut diff = Vec::new();
    let (by, at) = (operator(), now_rfc3339());
    let names_capacities = desired.capacities.is_some() || desired.capacity_headroom.is_some();
    let mut predictor = Predictor::new(context, "apply").await?;
    let mut plan = |state: &State| {
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
        predictor.check(context, state, &mut changes)?;
        diff = lines;
        Ok(changes)
    };
    let (revision, changes, attempts) = if args.dry_run {
        let (_, changes) = preview(&mut client, &context.layout, &mut plan).await?;
        (None, changes, 0)
    } else {
        let updated = now_rfc3339();
        let committed = transact(
            &mut client,
            &context.layout,
            &context.retry,
            &updated,
            &mut plan,
        )
        .await?;
        (committed.revision, committed.changes, committed.attempts)
    };
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
    predictor.report(&mut outcome, args.dry_run);
    Ok(outcome)
}
