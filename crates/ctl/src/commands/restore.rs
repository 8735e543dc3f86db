//! `restore`: give an origin back what its drain record says was taken.

use crate::cli::RestoreArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan;
use crate::output::Outcome;
use crate::plan::drain::plan_restore;

/// Runs `dwctl restore`.
pub async fn run(context: &Context, args: RestoreArgs) -> Result<Outcome, Error> {
    let title = format!("restore {}", args.origin);
    let plan = |state: &State| Ok(plan_restore(state, &args.origin, None)?);
    let guard = args.predict.to_guard();
    run_plan(context, &title, args.dry_run, &guard, plan).await
}
