//! dwctl: the control plane of dw-router.
//!
//! The tool the on-call engineer runs and that automation calls to change routing in etcd
//! (docs/dwctl.md is the operator's guide, docs/routing.md the value schema). Its rules:
//!
//! - **One transaction per change, guarded on what was read.** Every mutating command reads
//!   regions, policy and drain records at one revision ([`read_state`]), plans its change as
//!   a pure function of that state ([`plan_drain`], [`plan_restore`], [`plan_apply`]), and
//!   writes it in one transaction whose guards compare each written key's `mod_revision` to
//!   the revision read ([`commit`]). A conflict re-reads and re-plans, bounded and jittered
//!   ([`transact`]); when every attempt loses, the command exits 3 having written nothing.
//! - **One set of validation rules.** Values are checked by `dw-routing`, exactly as the
//!   edge nodes check them, plus a few stricter rules for values dwctl writes
//!   ([`RegionValue::for_write`], [`PolicyValue::for_write`]).
//!   A failure exits 4 naming the field, before anything is written.
//! - **Drains are recorded.** A drain writes, in the same transaction, what it took
//!   ([`DrainRecord`]) under the control prefix, outside the agents' mirror; `restore` gives
//!   it back. Weights are renormalised to exactly 100 by largest remainder ([`renormalise`]).
//! - **Daemons are libraries.** `origin register`, `rebalance` and `health` are
//!   `run(config, reporter, shutdown)` functions ([`register_origin`], [`run_rebalance`],
//!   [`run_health`]); the binary only wires SIGTERM/SIGINT to [`Shutdown`].
//!
//! The code, in layers (docs/ARCHITECTURE.md has the map): `commands` (one module per
//! subcommand: arguments, an op, the outcome printed), `daemons` (the long-running
//! commands), `cli` (clap definitions, and their conversion to the plain values below:
//! the context, the prediction's inputs), `ops` (all I/O against etcd; every transaction is
//! built in `ops::commit`; no clap type), `context` ([`Context`]), all above the pure
//! planner, a crate of its own (`dw-ctl-plan`,
//! crates/ctl-plan: state in, changes out; no etcd client, no tokio, no clap), named
//! `plan` here. Beside them: [`Context`], `output`, `input`, `progress`, `shutdown`,
//! `error`. `scripts/check-modules` checks that nothing imports upward (`context`, what
//! every op is given, sits below `ops`; `cli` beside `commands`), that no two folders
//! import each other, that no clap type is named below `commands`/`cli`, that only `ops`
//! and `daemons` name the etcd client (and `error`, whose one error type holds the
//! client's error), that `commands` do not reach etcd at all, and that
//! no other file builds a transaction:
//!
//! Layers (scripts/check-modules): context < ops < daemons < commands, cli
//! Names (scripts/check-modules): clap only in commands cli
//! Names (scripts/check-modules): etcd_client only in ops daemons error
//! Names (scripts/check-modules): no etcd in commands
//! Transactions (scripts/check-modules): ops::commit
//!
//! The planners need no etcd. A drain, for instance, renormalises what the other origins
//! of a region keep:
//!
//! ```
//! // `b` (weight 25) leaves a region of a:50 b:25 c:25.
//! let kept = [("a".to_string(), 50), ("c".to_string(), 25)];
//! let renormalised = dwctl::renormalise(&kept, dwctl::WEIGHT_TOTAL).unwrap();
//! assert_eq!(renormalised, [("a".to_string(), 67), ("c".to_string(), 33)]);
//! ```

#![deny(missing_docs)]

mod cli;
mod commands;
mod context;
mod daemons;
mod error;
mod input;
mod ops;
mod output;
// The pure planner (crates/ctl-plan) under its layer's name: `crate::plan::drain` is
// `dw_ctl_plan::drain`.
use dw_ctl_plan as plan;
mod progress;
mod shutdown;

pub use dw_capacity::renormalise;
pub use dw_etcd::EtcdOptions;

pub use crate::{
    cli::{Cli, Command, EndpointsSource, PrometheusArgs, TrafficArgs, WaitArgs},
    commands::{run_command, run_command_noting},
    context::Context,
    daemons::health::{HealthConfig, run as run_health},
    daemons::origin::{RegisterConfig, register as register_origin},
    daemons::rebalance::{LEASE_EXPIRED, RebalanceConfig, run as run_rebalance},
    error::{
        EXIT_OVERLOAD, EXIT_PROMOTE_CONFLICT, EXIT_ROLLOUT_ABORTED, EXIT_STATUSES,
        EXIT_STEP_TIMED_OUT, EXIT_WAIT_FAILED, Error, ExitStatus, FieldError, documented_codes,
        exit_codes_help, exit_codes_summary,
    },
    ops::commit::{
        Changes, Committed, DEFAULT_MAX_REQUEST_BYTES, Entry, Fence, MAX_VALUE_BYTES,
        PreCommitCheck, RetryPolicy, State, commit, preview, preview_checked, read_state,
        reconcile_drain_records, request_bytes, transact, transact_checked, transact_fenced,
    },
    ops::fleet::{EXIT_LAGGING, NodeReport, read_nodes, routing_revision},
    ops::history::{HistoryEntry, read_history},
    ops::origin::{OriginListing, list_origins},
    ops::probe::{ProbeTarget, probe},
    ops::prometheus::{PrometheusOptions, PrometheusSettings},
    ops::route::{RoutingRead, read_routing},
    ops::run::{PredictInputs, WriteGuard},
    ops::traffic_source::{PrometheusSource, TrafficSource, Window},
    output::{Outcome, OutputFormat, Reporter, Shown, escape, is_unsafe_char, terminal_safe},
    plan::apply::{Desired, DiffLine, FileFormat, parse_desired, plan_apply},
    plan::clock::{now_rfc3339, operator, rfc3339_from_unix},
    plan::drain::{DrainRequest, FleetLimit, Restoring, WEIGHT_TOTAL, plan_drain, plan_restore},
    plan::drain_record::{
        DRAIN_RECORD_SCHEMA, DrainRecord, DrainedRegion, SOURCE_CLI, SOURCE_HEALTH,
        SOURCE_REBALANCE,
    },
    plan::guard::{ExemptReason, Guard, NoLoad, StatesGuard},
    plan::keys::{DEFAULT_CONTROL_PREFIX, DEFAULT_NODES_PREFIX, Layout},
    plan::value::{PICK_MODES, PolicyValue, RegionValue},
    plan::wait::{Wait, needed},
    progress::CommitNote,
    shutdown::{Shutdown, ShutdownTrigger},
};

use std::process::ExitCode;

use tokio::signal::unix as signal;

/// The whole program behind `main`: runs the parsed command line, prints its outcome or
/// its error, and returns the documented exit code. `endpoints_from` says where the etcd
/// endpoints came from, named after an error that says etcd could not be reached.
pub fn main_with(cli: Cli, endpoints_from: EndpointsSource) -> ExitCode {
    let output = cli.global.output;
    let endpoints = cli.global.etcd.endpoints.clone();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("dwctl: cannot start the async runtime: {error}");
            return ExitCode::from(1);
        }
    };
    let daemon = cli.command.is_daemon();
    let result = runtime.block_on(async {
        let shutdown = Shutdown::on_signals()
            .map_err(|error| Error::Failed(format!("cannot install signal handlers: {error}")))?;
        if daemon {
            // Long-running commands stop cleanly on the signal themselves (exit 0).
            return run_command(cli, shutdown).await;
        }
        // A one-shot command dies on SIGINT/SIGTERM with 128 + the signal's number, the
        // shell's convention. Run on a worker so that even a command blocked reading
        // stdin is abandoned; before the transaction is sent nothing is written.
        let mut interrupt = signal::signal(signal::SignalKind::interrupt())
            .map_err(|error| Error::Failed(format!("cannot install signal handlers: {error}")))?;
        let mut terminate = signal::signal(signal::SignalKind::terminate())
            .map_err(|error| Error::Failed(format!("cannot install signal handlers: {error}")))?;
        let note = CommitNote::default();
        let noted = note.clone();
        let command = tokio::spawn(async move { run_command_noting(cli, shutdown, &noted).await });
        let interrupted = |signal, code| Error::Interrupted {
            signal,
            code,
            committed: note.committed(),
        };
        tokio::select! {
            joined = command => joined.unwrap_or_else(|error| {
                Err(Error::Failed(format!("the command failed: {error}")))
            }),
            _ = interrupt.recv() => Err(interrupted("SIGINT", 130)),
            _ = terminate.recv() => Err(interrupted("SIGTERM", 143)),
        }
    });
    // Do not wait for lingering background tasks (a watch stream, a signal listener).
    runtime.shutdown_background();
    match result {
        Ok(outcome) => {
            outcome.print(output);
            ExitCode::SUCCESS
        }
        Err(Error::Lagging(outcome)) => {
            // The command did its work; the fleet has not caught up (or status found a
            // lagging node): the full report on stdout, exit 5.
            outcome.print(output);
            ExitCode::from(ops::fleet::EXIT_LAGGING)
        }
        Err(Error::WaitFailed {
            revision,
            reason,
            mut outcome,
        }) => {
            // The write is in: its outcome as usual (text: the commit line was printed
            // before the wait), then why the wait failed, exit 6.
            let error = Error::WaitFailed {
                revision,
                reason: reason.clone(),
                outcome: Box::default(),
            };
            if let serde_json::Value::Object(object) = &mut outcome.json {
                object.insert(
                    "fleet".into(),
                    serde_json::json!({"revision": revision, "error": reason}),
                );
                object.insert(
                    "error".into(),
                    serde_json::json!({"kind": error.kind(), "message": error.to_string(), "fields": []}),
                );
            }
            outcome.print(output);
            eprintln!("dwctl: {}", terminal_safe(&error.to_string()));
            error.to_exit_code()
        }
        Err(error) => {
            eprintln!("dwctl: {}", terminal_safe(&error.to_string()));
            if error.is_unreachable() {
                let hint = endpoints_from.unreachable_hint(&endpoints);
                eprintln!("dwctl: {}", terminal_safe(&hint));
            }
            if output == OutputFormat::Json {
                let fields: Vec<serde_json::Value> = match &error {
                    Error::Invalid(fields) => fields
                        .iter()
                        .map(|field| serde_json::json!({"field": field.field, "reason": field.reason}))
                        .collect(),
                    _ => Vec::new(),
                };
                let committed = match &error {
                    Error::Interrupted { committed, .. } => *committed,
                    _ => None,
                };
                println!(
                    "{}",
                    serde_json::json!({"error": {"kind": error.kind(), "message": error.to_string(), "fields": fields}, "committed_revision": committed})
                );
            }
            error.to_exit_code()
        }
    }
}
