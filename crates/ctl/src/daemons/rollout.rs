//! The rollout driver behind `dwctl rollout FILE` and `rollout resume ID`: a stage
//! advanced step by step, each step gated on the node reports, probes and a check (the
//! rules are in `crate::plan::rollout`; the stage actions are `crate::ops::stage`'s, the
//! ones `dwctl stage` runs, so they write the same audit records; the progress record and
//! the reads are `crate::ops::rollout`'s). `commands::rollout` parses the flags.

use serde_json::json;

use dw_routing::stage::Cohort;

use crate::context::Context;
use crate::error::Error;
use crate::ops::rollout::RolloutStore;
use crate::ops::stage::{CreateRequest, read_desired};
use crate::output::{Outcome, escape as shown};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::rollout::{
    Plan, ROLLOUT_SCHEMA, Record, RolloutState, check_matches, check_probed_origins, duration_text,
    percent_text,
};
use crate::plan::rollout_gate::judge;
use crate::shutdown::Shutdown;

mod driver;

use driver::Driver;

use crate::ops::run::WriteGuard;

/// A new rollout: what `dwctl rollout FILE` was given.
pub struct StartRequest {
    /// The steps, the bake and the gates.
    pub plan: Plan,
    /// The desired-state file (`-`: stdin).
    pub file: String,
    /// The stage's and the rollout's id (checked).
    pub id: String,
    /// Why, for the stage, its audit records and the progress record.
    pub reason: String,
    /// The check command given on the command line.
    pub check: Option<String>,
    /// The capacity guard's inputs of the create, each widen and the promote.
    pub guard: WriteGuard,
}

/// Starts a rollout: its stage created at the first step's cohort (refused, with nothing
/// written, when that cohort holds fewer than `--min-nodes` live nodes), then driven step
/// by step to its promote or its verdict.
pub async fn start(
    context: &Context,
    request: StartRequest,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let StartRequest {
        plan,
        file,
        id,
        reason,
        check,
        guard,
    } = request;
    let mut store = RolloutStore::open(context).await?;
    let previous = store.load(&id).await?;
    if let Some((Ok(record), _)) = &previous
        && record.state.is_resumable()
        && store.stage_is_open(&id).await?
    {
        return Err(Error::Failed(format!(
            "rollout {id} is {} at step {}/{}: resume it with `dwctl rollout resume {id}` or \
             abort it with `dwctl stage abort {id}`",
            record.state.name(),
            (record.step + 1).min(record.plan.steps.len()),
            record.plan.steps.len()
        )));
    }
    // What the stage would be (validation and diff as `stage create`), and who is in the
    // first step's cohort, before anything is written.
    let desired = read_desired(&file).await?;
    let mut request = CreateRequest {
        desired: &desired,
        cohort: Cohort {
            points: plan.steps[0],
            ..Cohort::default()
        },
        reason: &reason,
        id: &id,
        dry_run: true,
        guard: guard.clone(),
    };
    let staged = crate::ops::stage::create(context, &request).await?.stage;
    check_probed_origins(&staged, &plan.probes)?;
    let nodes = store.nodes().await?;
    let gate = judge(&staged, i64::MAX, &context.layout.prefix, &nodes);
    if gate.members.len() < plan.min_nodes {
        return Err(Error::invalid(
            "cohort",
            format!(
                "step 1 ({}) holds {} live node(s) by the node reports ({} live in all), fewer \
                 than --min-nodes {}: a step is never passed on no evidence; nothing written \
                 (use a larger first step)",
                percent_text(plan.steps[0]),
                gate.members.len(),
                nodes.iter().filter(|node| node.live).count(),
                plan.min_nodes
            ),
        ));
    }
    request.dry_run = false;
    let created = crate::ops::stage::create(context, &request).await?;
    let diff: Vec<serde_json::Value> = created
        .diff
        .iter()
        .map(|line| json!({"op": line.op.to_string(), "key": line.key, "detail": line.detail}))
        .collect();
    let now = now_rfc3339();
    let record = Record {
        schema: ROLLOUT_SCHEMA,
        id: id.clone(),
        plan,
        step: 0,
        bake_started_at: None,
        state: RolloutState::Running,
        outcome: None,
        reason: reason.clone(),
        created_by: operator(),
        created_at: now.clone(),
        updated_at: now,
    };
    let revision = previous.map_or(0, |(_, revision)| revision);
    let mut driver = Driver::new(context, store, record, revision, shutdown, check, guard);
    driver.save().await?;
    driver.event(
        "created",
        &format!(
            "stage {} at revision {}: {} step(s) {}, bake {} each",
            id,
            created
                .revision
                .map_or(serde_json::Value::Null, serde_json::Value::from),
            driver.record.plan.steps.len(),
            driver
                .record
                .plan
                .steps
                .iter()
                .map(|points| percent_text(*points))
                .collect::<Vec<_>>()
                .join(","),
            duration_text(driver.record.plan.bake())
        ),
        json!({"id": id, "revision": created.revision, "diff": diff,
               "plan": driver.record.plan}),
    );
    driver.predicted(&created.predictor);
    driver.drive().await
}

/// Resumes rollout `id` from the step its progress record names (the step's bake starts
/// over), with the check command given now (`check`, which must match the recorded one).
pub async fn resume(
    context: &Context,
    id: &str,
    check: Option<&str>,
    guard: WriteGuard,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let mut store = RolloutStore::open(context).await?;
    let Some((record, revision)) = store.load(id).await? else {
        return Err(Error::NotFound(format!("no rollout {}", shown(id))));
    };
    let mut record =
        record.map_err(|e| Error::Failed(format!("the progress record of {}: {e}", shown(id))))?;
    if !record.state.is_resumable() {
        return Err(Error::Failed(format!(
            "rollout {id} is {}: nothing to resume",
            record.state.name()
        )));
    }
    check_matches(record.plan.check.as_deref(), check)?;
    if !store.stage_is_open(id).await? {
        return Err(Error::Failed(format!(
            "rollout {id}: its stage is closed (promoted or aborted outside the rollout); \
             nothing to resume"
        )));
    }
    let was = record.state;
    record.state = RolloutState::Running;
    record.outcome = None;
    let check = check.map(str::to_owned);
    let mut driver = Driver::new(context, store, record, revision, shutdown, check, guard);
    driver.save().await?;
    let step = driver.record.step;
    driver.event(
        "resumed",
        &format!(
            "rollout {id} ({}) at step {}/{}",
            was.name(),
            (step + 1).min(driver.record.plan.steps.len()),
            driver.record.plan.steps.len()
        ),
        json!({"id": id, "step": step + 1, "was": was.name()}),
    );
    driver.drive().await
}
