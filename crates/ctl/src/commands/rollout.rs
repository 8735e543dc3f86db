//! `rollout FILE --steps ... --bake ...` and `rollout resume ID`: a stage advanced step by
//! step, each step gated on the node reports, probes and a check (the rules are in
//! `crate::plan::rollout`; the stage actions are `crate::ops::stage`'s, the ones `dwctl
//! stage` runs, so they write the same audit records).

use std::time::Duration;

use etcd_client::Client;
use serde_json::json;

use dw_routing::stage::{Cohort, check_stage_id};

use crate::cli::rollout::{RolloutArgs, RolloutCommand};
use crate::context::Context;
use crate::error::Error;
use crate::ops::fleet::read_nodes;
use crate::ops::run::WriteGuard;
use crate::ops::stage::{CreateRequest, read_desired};
use crate::output::{Outcome, escape as shown};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::rollout::{
    Plan, ROLLOUT_SCHEMA, Record, RolloutState, check_command, check_matches, check_probed_origins,
    duration_text, parse_probes, parse_steps, percent_text,
};
use crate::plan::rollout_gate::judge;
use crate::shutdown::Shutdown;

mod driver;

use driver::Driver;

/// Runs `dwctl rollout ...`.
pub async fn run(
    context: &Context,
    args: RolloutArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    match args.command {
        Some(RolloutCommand::Resume {
            id, check, predict, ..
        }) => {
            let guard = predict.to_guard();
            resume(context, &id, check.as_deref(), guard, shutdown).await
        }
        None => start(context, args, shutdown).await,
    }
}

/// The plan the flags describe; a usage or validation error for a bad one.
fn plan_of(args: &RolloutArgs) -> Result<Plan, Error> {
    let steps = parse_steps(args.steps.as_deref().unwrap_or_default())?;
    let probes = parse_probes(&args.probes)?;
    if let Some(check) = &args.check {
        check_command(check)?;
    }
    let ms = |duration: Duration| u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    let gates = &args.gates;
    Ok(Plan {
        steps,
        bake_ms: ms(args.bake.unwrap_or_default()),
        probes,
        probe_interval_ms: ms(gates.probe_interval),
        probe_timeout_ms: ms(gates.probe_timeout),
        fail_after: gates.fail_after,
        check: args.check.clone(),
        check_interval_ms: ms(gates.check_interval),
        check_timeout_ms: ms(gates.check_timeout),
        min_nodes: gates.min_nodes as usize,
        step_timeout_ms: ms(gates.step_timeout),
    })
}

fn default_id() -> String {
    let digits: String = now_rfc3339().chars().filter(char::is_ascii_digit).collect();
    format!("rollout-{digits}")
}

/// The progress record of `id` and its `mod_revision` (0: none).
async fn load(
    client: &mut Client,
    context: &Context,
    id: &str,
) -> Result<Option<(Result<Record, String>, i64)>, Error> {
    let response = client.get(context.layout.rollout(id), None).await?;
    Ok(response
        .kvs()
        .first()
        .map(|kv| (Record::parse(kv.value()), kv.mod_revision())))
}

async fn stage_is_open(client: &mut Client, context: &Context, id: &str) -> Result<bool, Error> {
    Ok(!client
        .get(context.layout.stage(id), None)
        .await?
        .kvs()
        .is_empty())
}

async fn start(context: &Context, args: RolloutArgs, shutdown: Shutdown) -> Result<Outcome, Error> {
    let plan = plan_of(&args)?;
    let file = args
        .file
        .clone()
        .ok_or_else(|| Error::Usage("rollout needs FILE".into()))?;
    let id = args.id.clone().unwrap_or_else(default_id);
    check_stage_id(&id).map_err(|e| Error::invalid("id", e.to_string()))?;
    let mut client = context.etcd.connect().await?;
    let previous = load(&mut client, context, &id).await?;
    if let Some((Ok(record), _)) = &previous
        && record.state.is_resumable()
        && stage_is_open(&mut client, context, &id).await?
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
        reason: &args.reason,
        id: &id,
        dry_run: true,
        guard: args.predict.to_guard(),
    };
    let staged = crate::ops::stage::create(context, &request).await?.stage;
    check_probed_origins(&staged, &plan.probes)?;
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
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
        reason: args.reason.clone(),
        created_by: operator(),
        created_at: now.clone(),
        updated_at: now,
    };
    let revision = previous.map_or(0, |(_, revision)| revision);
    let mut driver = Driver::new(
        context,
        client,
        record,
        revision,
        shutdown,
        args.check.clone(),
        request.guard.clone(),
    );
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

async fn resume(
    context: &Context,
    id: &str,
    check: Option<&str>,
    guard: WriteGuard,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let Some((record, revision)) = load(&mut client, context, id).await? else {
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
    if !stage_is_open(&mut client, context, id).await? {
        return Err(Error::Failed(format!(
            "rollout {id}: its stage is closed (promoted or aborted outside the rollout); \
             nothing to resume"
        )));
    }
    let was = record.state;
    record.state = RolloutState::Running;
    record.outcome = None;
    let check = check.map(str::to_owned);
    let mut driver = Driver::new(context, client, record, revision, shutdown, check, guard);
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
