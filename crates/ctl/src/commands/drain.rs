//! `drain`: take an origin out of its regions, recording what was taken.

use crate::cli::DrainArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan_with_traffic;
use crate::output::Outcome;
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::{DrainRequest, plan_drain};
use crate::plan::drain_record::SOURCE_CLI;
use crate::plan::shed::add_spill;

/// Runs `dwctl drain`.
pub async fn run(context: &Context, args: DrainArgs) -> Result<Outcome, Error> {
    if args.repair {
        return super::repair::run(context, &args).await;
    }
    let request = DrainRequest {
        origin: args.origin.clone(),
        regions: args.regions.clone(),
        reason: args.reason.clone(),
        source: SOURCE_CLI.into(),
        by: operator(),
        at: now_rfc3339(),
        force: args.force,
        skip_emptying: false,
        fleet_limit: None,
    };
    let title = format!("drain {}", args.origin);
    let prefix = context.layout.prefix.clone();
    let plan = |state: &State, traffic: Result<&dw_capacity::Traffic, String>| {
        let mut changes = plan_drain(state, &request)?;
        if args.spill {
            add_spill(state, &prefix, traffic, &request.origin, &mut changes)?;
        }
        Ok(changes)
    };
    let guard = args.predict.to_guard();
    run_plan_with_traffic(context, &title, args.dry_run, &guard, plan).await
}
