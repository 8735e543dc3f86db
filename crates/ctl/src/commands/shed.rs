//! `shed`: move about PERCENT % of an origin's predicted load elsewhere, recorded so that
//! `restore` gives it back.

use crate::cli::ShedArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan_with_traffic;
use crate::output::Outcome;
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::DrainRequest;
use crate::plan::drain_record::SOURCE_CLI;
use crate::plan::shed::{ShedRequest, plan_shed};

/// Runs `dwctl shed`.
pub async fn run(context: &Context, args: ShedArgs) -> Result<Outcome, Error> {
    let request = ShedRequest {
        drain: DrainRequest {
            origin: args.origin.clone(),
            regions: args.regions.clone(),
            reason: args.reason.clone(),
            source: SOURCE_CLI.into(),
            by: operator(),
            at: now_rfc3339(),
            force: false,
            skip_emptying: false,
            fleet_limit: None,
        },
        percent: args.percent,
        spill: args.spill,
    };
    let title = format!(
        "shed {} {}%",
        args.origin,
        crate::plan::capacity::number_json(args.percent)
    );
    let prefix = context.layout.prefix.clone();
    let plan = |state: &State, traffic: Result<&dw_capacity::Traffic, String>| {
        Ok(plan_shed(state, &prefix, traffic, &request)?)
    };
    let guard = args.predict.to_guard();
    run_plan_with_traffic(context, &title, args.dry_run, &guard, plan).await
}
