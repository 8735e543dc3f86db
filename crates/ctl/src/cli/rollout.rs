//! The command line of `dwctl rollout` and `dwctl rollout resume` (kept out of `cli.rs`).

use std::time::Duration;

use clap::{Args, Subcommand};

use crate::plan::wait::parse_wait;

/// `dwctl rollout --help`'s long text.
pub const AFTER_HELP: &str = "\
Creates a stage of FILE's changes (as `stage create` does) with the first step's cohort, \
then advances it step by step. A step widens the cohort, waits until every live cohort node \
reports the stage applied (a node shown as missing, untrusted, in conflict or stale blocks \
it; fewer than --min-nodes live cohort nodes aborts; --step-timeout bounds the wait, exit 8, \
stage left as it is), then bakes: for --bake, the probed origins must stay healthy (GET \
2xx/3xx, unhealthy after --fail-after failures in a row), --check must exit 0 each time it \
runs, and no node may report a staged key rejected. Any failure aborts the stage (exit 7, \
with the reason). After the last step's bake the stage is promoted.

With --traffic FILE or --prometheus URL, each step's widen and the promote are predicted \
and guarded like `stage widen` and `stage promote`: a step the capacity guard refuses \
stops the rollout (exit 9, nothing written, the stage as it is), resumable once the load \
fits (give the traffic source to `rollout resume` again).

Progress is recorded under <control-prefix>rollouts/<ID> (outside the routing prefix: no \
node republishes for it). Ctrl-C leaves the stage as it is and prints how to resume \
(`dwctl rollout resume ID`, the step's bake starts over) or abort (`dwctl stage abort ID`).

Examples:
  dwctl rollout eu-map.toml --steps 1%,10%,50%,100% --bake 5m --id eu-map \\
      --probe ams-a=http://10.1.0.7/healthz --check 'curl -fsS http://prom/api/ok' \\
      --reason 'CHG-42 new EU map'
  dwctl rollout resume eu-map --check 'curl -fsS http://prom/api/ok'
  dwctl --output json rollout eu-map.toml --steps 10%,100% --bake 1m   # one event a line";

/// `dwctl rollout FILE ...` or `dwctl rollout resume ID`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct RolloutArgs {
    /// `resume`.
    #[command(subcommand)]
    pub command: Option<RolloutCommand>,
    /// The desired state (apply's format: JSON, or TOML by extension).
    #[arg(required = true)]
    pub file: Option<String>,
    /// The cohort of each step, increasing (1%,10%,50%,100%; at most 20 steps).
    #[arg(long, value_name = "PERCENTS", required = true)]
    pub steps: Option<String>,
    /// How long each step bakes once its cohort serves the stage (30s, 5m).
    #[arg(long, value_name = "DURATION", value_parser = parse_wait, required = true)]
    pub bake: Option<Duration>,
    /// ORIGIN=URL probed during every bake; ORIGIN must be one the staged values route
    /// to (repeat; at most 100).
    #[arg(long = "probe", value_name = "ORIGIN=URL")]
    pub probes: Vec<String>,
    /// A shell command run during every bake (sh -c); it must exit 0. At most 4096 bytes;
    /// its environment has DW_ROLLOUT_ID, DW_ROLLOUT_STEP, DW_ROLLOUT_PERCENT.
    #[arg(long, value_name = "CMD")]
    pub check: Option<String>,
    #[command(flatten)]
    pub gates: GateArgs,
    /// Each step's predicted load and the capacity guard (a refused step stops the
    /// rollout, resumable).
    #[command(flatten)]
    pub predict: Box<crate::cli::PredictArgs>,
    /// Why, for the stage, its audit records and the progress record.
    #[arg(long, default_value = "")]
    pub reason: String,
    /// The rollout's id, which is also its stage's (default: rollout-<UTC time>).
    #[arg(long)]
    pub id: Option<String>,
}

/// How often and how strictly the gates are applied.
#[derive(Debug, Clone, Args)]
pub struct GateArgs {
    /// Fewest live cohort nodes a step accepts (never passed on no evidence).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub min_nodes: u32,
    /// Longest a step waits for its cohort to serve the stage (exit 8 after).
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = parse_wait)]
    pub step_timeout: Duration,
    /// Time between probe rounds.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_wait)]
    pub probe_interval: Duration,
    /// Deadline of one probe.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = parse_wait)]
    pub probe_timeout: Duration,
    /// Failed probes in a row that make an origin unhealthy.
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub fail_after: u32,
    /// Time between runs of --check.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_wait)]
    pub check_interval: Duration,
    /// Deadline of one run of --check (killed after).
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_wait)]
    pub check_timeout: Duration,
}

/// `dwctl rollout resume`.
#[derive(Debug, Subcommand)]
pub enum RolloutCommand {
    /// Continue a stopped rollout from the step recorded in etcd (its bake starts over).
    #[command(after_help = "\
The plan (steps, bake, probes, gates) is the recorded one. A rollout that ran a --check must \
be given the same --check again: dwctl never runs a command read from etcd.

Example:
  dwctl rollout resume eu-map --check 'curl -fsS http://prom/api/ok'")]
    Resume {
        /// The rollout's id.
        id: String,
        /// The rollout's --check, again.
        #[arg(long, value_name = "CMD")]
        check: Option<String>,
        /// Each remaining step's predicted load and the capacity guard.
        #[command(flatten)]
        predict: Box<crate::cli::PredictArgs>,
    },
}
