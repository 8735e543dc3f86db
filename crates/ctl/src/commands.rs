//! The dispatcher: runs a parsed command line to its outcome, then waits for the fleet
//! when asked to. Each one-shot command is a module of its own below this one (the
//! long-running ones are `origin`, `rebalance` and `health`); they share [`Context`] and the
//! helpers in `input` and `plan`, and none of them imports this module.

mod apply;
mod auth;
mod autopilot;
mod capacity;
mod drain;
mod health;
mod history;
mod home;
mod origin;
mod policy;
mod rebalance;
mod region;
mod repair;
mod restore;
mod rollout;
mod route;
mod shed;
mod stage;
mod status;
mod traffic;

use serde_json::Value;

use crate::cli::{Cli, Command};
use crate::context::Context;
use crate::error::Error;
use crate::output::{Outcome, OutputFormat};
use crate::progress::CommitNote;
use crate::shutdown::Shutdown;

/// Runs one parsed command line to its outcome.
pub async fn run_command(cli: Cli, shutdown: Shutdown) -> Result<Outcome, Error> {
    run_command_noting(cli, shutdown, &CommitNote::default()).await
}

/// [`run_command`], noting in `note` the revision a write committed at before `--wait`
/// starts, so that whoever stops the command (SIGINT) can say the write is in.
pub async fn run_command_noting(
    cli: Cli,
    shutdown: Shutdown,
    note: &CommitNote,
) -> Result<Outcome, Error> {
    let context = cli.global.to_context()?;
    let wait = cli.command.wait();
    let mut outcome = run_one(&context, cli.command, shutdown).await?;
    match (wait, outcome.json["revision"].as_i64()) {
        // Only a write that committed has something to wait for (not a dry run, not
        // "nothing to change").
        (Some(wait), Some(revision)) if outcome.json["dry_run"] != Value::Bool(true) => {
            note.set(revision);
            if context.output == OutputFormat::Text {
                // The commit line comes first, whatever the wait then does.
                outcome.print(OutputFormat::Text);
                outcome.text.clear();
            }
            crate::ops::fleet::wait_after(&context, outcome.clone(), revision, wait)
                .await
                .map_err(|error| match error {
                    Error::Lagging(_) | Error::WaitFailed { .. } => error,
                    other => Error::WaitFailed {
                        revision,
                        reason: other.to_string(),
                        outcome: Box::new(outcome),
                    },
                })
        }
        _ => Ok(outcome),
    }
}

async fn run_one(
    context: &Context,
    command: Command,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    match command {
        Command::Status(args) => status::run(context, args, shutdown).await,
        Command::Region(command) => region::run(context, command).await,
        Command::Policy(command) => policy::run(context, command).await,
        Command::Apply(args) => apply::run(context, args).await,
        Command::Drain(args) => drain::run(context, args).await,
        Command::Shed(args) => shed::run(context, args).await,
        Command::Restore(args) => restore::run(context, args).await,
        Command::Stage(command) => stage::run(context, command).await,
        Command::Rollout(args) => rollout::run(context, args, shutdown).await,
        Command::Origin(command) => origin::run(context, command, shutdown).await,
        Command::Rebalance(args) => rebalance::command(context, args, shutdown).await,
        Command::Auth(args) => auth::run(context, args).await,
        Command::Health(args) => health::command(context, args, shutdown).await,
        Command::Autopilot(args) => autopilot::command(context, args, shutdown).await,
        Command::History(args) => history::history(context, &args.etcd_key).await,
        Command::Route(args) => route::run(context, args).await,
        Command::Traffic(args) => traffic::run(context, args).await,
        Command::Rollback(args) => {
            history::rollback(
                context,
                &args.etcd_key,
                args.to_revision,
                args.dry_run,
                &args.predict.to_guard(),
            )
            .await
        }
    }
}
