//! `restore`: give an origin back what its drain record says was taken.

use crate::cli::RestoreArgs;
use crate::context::Context;
use crate::drain::plan_restore;
use crate::error::Error;
use crate::output::Outcome;
use crate::plan::run_plan;
use crate::state::State;

/// Runs `dwctl restore`.
pub async fn run(context: &Context, args: RestoreArgs) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let title = format!("restore {}", args.origin);
    let plan = |state: &State| plan_restore(state, &args.origin, None);
    run_plan(context, &mut client, &title, args.dry_run, plan).await
}
