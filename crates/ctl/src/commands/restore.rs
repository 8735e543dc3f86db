//! `restore`: give an origin back what its drain record says was taken: a person's own
//! part by default, another source's with `--source`, every part with `--all-sources`.

use crate::cli::RestoreArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan;
use crate::output::Outcome;
use crate::plan::drain::{Restoring, plan_restore};
use crate::plan::drain_record::SOURCE_CLI;

/// Runs `dwctl restore`.
pub async fn run(context: &Context, args: RestoreArgs) -> Result<Outcome, Error> {
    let title = format!("restore {}", args.origin);
    let which = match (&args.source, args.all_sources) {
        (_, true) => Restoring::All,
        (Some(source), false) => Restoring::Part(source),
        (None, false) => Restoring::Part(SOURCE_CLI),
    };
    let plan = |state: &State| Ok(plan_restore(state, &args.origin, which)?);
    let guard = args.predict.to_guard();
    run_plan(context, &title, args.dry_run, &guard, plan).await
}
