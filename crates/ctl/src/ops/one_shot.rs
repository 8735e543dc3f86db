//! The ops a one-shot command calls with nothing but its [`Context`]: each opens the
//! context's own connection here, so that no command holds an etcd client, then runs the
//! op of the same name that takes one (`ops::run`'s preview-or-commit branch, the state
//! read at one revision). The daemons, which keep one connection across many writes, call
//! those directly.

use dw_capacity::Traffic;

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{Changes, State};
use crate::ops::fleet::{NodeReport, read_nodes};
use crate::ops::run::{self, PredictInputs, Predictor, Ran, StatesGuard};
use crate::output::Outcome;

/// [`run::run_plan`] on a connection of `context`'s: previews or commits `plan`, guarded as
/// `guard` states, and reports each key it changes.
pub async fn run_plan<F>(
    context: &Context,
    title: &str,
    dry_run: bool,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
    plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    run::run_plan(context, &mut client, title, dry_run, guard, plan).await
}

/// [`run::run_plan_with_traffic`] on a connection of `context`'s (a plan that searches with
/// the traffic the prediction reads: `shed`, `--spill`).
pub async fn run_plan_with_traffic<F>(
    context: &Context,
    title: &str,
    dry_run: bool,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
    plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State, Result<&Traffic, String>) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    run::run_plan_with_traffic(context, &mut client, title, dry_run, guard, plan).await
}

/// [`run::run_checked`] on a connection of `context`'s, with the prediction `guard` states
/// (titled `title`), for a command that words its own outcome (`apply`).
pub async fn run_checked<F>(
    context: &Context,
    title: &str,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
    dry_run: bool,
    plan: F,
) -> Result<Ran, Error>
where
    F: FnMut(&State, Result<&Traffic, String>) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    let predictor = Predictor::new(context, title, guard).await?;
    run::run_checked(context, &mut client, predictor, dry_run, plan).await
}

/// The routing state at one revision (`policy get`, `stage list`).
pub async fn read_state(context: &Context) -> Result<State, Error> {
    let mut client = context.etcd.connect().await?;
    crate::ops::commit::read_state(&mut client, &context.layout).await
}

/// The routing state at one revision, then every node report (`stage show`).
pub async fn read_state_and_nodes(context: &Context) -> Result<(State, Vec<NodeReport>), Error> {
    let mut client = context.etcd.connect().await?;
    let state = crate::ops::commit::read_state(&mut client, &context.layout).await?;
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
    Ok((state, nodes))
}
