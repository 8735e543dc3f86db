//! `rollout FILE --steps ... --bake ...` and `rollout resume ID`: the flags parsed into a
//! plan, then the rollout driven by `daemons::rollout` (a stage advanced step by step, each
//! step gated on the node reports, probes and a check).

use std::time::Duration;

use dw_routing::stage::check_stage_id;

use crate::cli::rollout::{RolloutArgs, RolloutCommand};
use crate::context::Context;
use crate::daemons::rollout::{self, StartRequest};
use crate::error::Error;
use crate::output::Outcome;
use crate::plan::clock::now_rfc3339;
use crate::plan::rollout::{Plan, check_command, parse_probes, parse_steps};
use crate::shutdown::Shutdown;

/// Runs `dwctl rollout ...`.
pub async fn run(
    context: &Context,
    args: RolloutArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    match args.command {
        Some(RolloutCommand::Resume {
            id, check, predict, ..
        }) => rollout::resume(context, &id, check.as_deref(), predict.to_guard(), shutdown).await,
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

async fn start(context: &Context, args: RolloutArgs, shutdown: Shutdown) -> Result<Outcome, Error> {
    let plan = plan_of(&args)?;
    let file = args
        .file
        .clone()
        .ok_or_else(|| Error::Usage("rollout needs FILE".into()))?;
    let id = args.id.clone().unwrap_or_else(default_id);
    check_stage_id(&id).map_err(|e| Error::invalid("id", e.to_string()))?;
    let request = StartRequest {
        plan,
        file,
        id,
        guard: args.predict.to_guard(),
        reason: args.reason,
        check: args.check,
    };
    rollout::start(context, request, shutdown).await
}
