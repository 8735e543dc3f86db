//! The command line: every subcommand, its flags, and help that shows how to use it.

use std::time::Duration;

use clap::{Arg, Args, Parser, Subcommand};
use dw_etcd::EtcdArgs;
use dw_routing::keys::{DEFAULT_CONTROL_PREFIX, DEFAULT_NODES_PREFIX};

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::RetryPolicy;
use crate::output::OutputFormat;
use crate::plan::keys::Layout;
use auth::AUTH_HELP;

mod auth;
mod autopilot;
mod endpoints;
mod output_format;
pub(crate) mod rollout;
mod stage;
mod traffic;

use crate::plan::wait::{Wait, parse_wait};
pub use auth::AuthArgs;
pub use autopilot::AutopilotArgs;
pub use endpoints::EndpointsSource;
pub use stage::{CohortArgs, StageCommand};
pub use traffic::{PredictArgs, PrometheusArgs, TrafficArgs, TrafficSourceArgs};

const ABOUT: &str = "The control plane of dw-router: atomic, revision-guarded routing changes";

const LONG_ABOUT: &str = "\
The control plane of dw-router: atomic, revision-guarded routing changes in etcd.

Every change is one etcd transaction guarded on the revisions it read, so no edge node ever \
sees half of it and no two writers clobber each other. Values are validated with the same \
rules the edge nodes use (dw-routing) before anything is written.";

/// What `dwctl --help` prints after the options: the exit codes (listed once, in
/// `error::exit_status`), examples, the environment.
fn after_help() -> String {
    format!("{}\n{AFTER_HELP_EXAMPLES}", crate::error::exit_codes_help())
}

const AFTER_HELP_EXAMPLES: &str = "\
Examples:
  dwctl region list
  dwctl drain fra-a --reason 'INC-123: 502s from fra-a'
  dwctl shed fra-a 40 --traffic traffic.json --dry-run   # move 40 % of fra-a's load
  dwctl restore fra-a
  dwctl apply routing.toml --dry-run
  dwctl drain fra-a --wait=30s --quorum 95
  dwctl drain fra-a --dry-run --prometheus http://prometheus:9090   # predicted load
  dwctl status --labels dc=fra

Environment: DWCTL_ENDPOINTS, DWCTL_PREFIX, DWCTL_CONTROL_PREFIX, DWCTL_NODES_PREFIX,
DWCTL_USER, DWCTL_PASSWORD, DWCTL_PASSWORD_FILE, DWCTL_CACERT, DWCTL_CERT, DWCTL_KEY,
DWCTL_DIAL_TIMEOUT, DWCTL_REQUEST_TIMEOUT; DWCTL_PROMETHEUS_URL (traffic). Guide: /usr/share/doc/dwctl/dwctl.md.";

/// The parsed command line: global flags, then one command.
#[derive(Debug, Parser)]
#[command(name = "dwctl", version, about = ABOUT, long_about = LONG_ABOUT, after_help = after_help())]
#[command(mut_args(EtcdArgs::env("DWCTL_")), mut_args(dwctl_connection_flag))]
pub struct Cli {
    /// Flags every command takes (etcd, prefixes, output, retries).
    #[command(flatten)]
    pub global: GlobalArgs,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The shared connection flags as dwctl takes them: on every subcommand, a local etcd by
/// default, a 5 s request deadline (`--timeout` is its older name).
fn dwctl_connection_flag(arg: Arg) -> Arg {
    match arg.get_id().as_str() {
        "endpoints" => arg
            .required(false)
            .default_value("http://127.0.0.1:2379")
            .global(true),
        "request_timeout" => arg
            .default_value("5s")
            .visible_alias("timeout")
            .global(true),
        id if EtcdArgs::IDS.contains(&id) => arg.global(true),
        _ => arg,
    }
}

#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// How to reach etcd (the flags `dw-agent` takes too).
    #[command(flatten)]
    pub etcd: EtcdArgs,
    /// The routing prefix the edge agents mirror.
    #[arg(long, env = "DWCTL_PREFIX", default_value = dw_routing::DEFAULT_PREFIX, global = true)]
    pub prefix: String,
    /// Where dwctl keeps drain records and registered origins (outside --prefix).
    #[arg(long, env = "DWCTL_CONTROL_PREFIX", default_value = DEFAULT_CONTROL_PREFIX, global = true)]
    pub control_prefix: String,
    /// Where the agents report (outside --prefix).
    #[arg(long, env = "DWCTL_NODES_PREFIX", default_value = DEFAULT_NODES_PREFIX, global = true)]
    pub nodes_prefix: String,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", global = true)]
    pub output: OutputFormat,
    /// The largest transaction to send, in bytes: etcd's --max-request-bytes (1.5 MiB by
    /// default; a client cannot read the server's). A larger plan is refused before it is
    /// sent (exit 4), also with --dry-run.
    #[arg(long, env = "DWCTL_MAX_REQUEST_BYTES", default_value_t = crate::ops::commit::DEFAULT_MAX_REQUEST_BYTES, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(4096..=1 << 31), global = true)]
    pub max_request_bytes: usize,
    /// Attempts of a guarded write before giving up with exit code 3.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100), global = true)]
    pub retries: u32,
}

impl GlobalArgs {
    /// The context these flags describe; a usage error for a malformed one.
    pub fn to_context(&self) -> Result<Context, Error> {
        let etcd = self.etcd.clone().into_options()?;
        Ok(Context {
            retry: RetryPolicy {
                attempts: self.retries,
                reconnect: Some(std::sync::Arc::new(etcd.clone())),
                ..RetryPolicy::default()
            },
            etcd,
            layout: Layout::new(&self.prefix, &self.control_prefix)?
                .with_nodes(&self.nodes_prefix)?
                .with_max_request_bytes(self.max_request_bytes),
            output: self.output,
        })
    }
}

/// Every dwctl command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read and write regions (`region/<geo>`).
    #[command(subcommand)]
    Region(RegionCommand),
    /// Read and write the global policy (`policy/global`).
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Make etcd match a desired-state file, in one transaction.
    #[command(after_help = "\
The file (JSON, or TOML when it ends in .toml) holds `policy` and/or `regions`:

  {\"policy\": {\"default\": \"DE\", \"failover\": [\"GB\"]},
   \"regions\": {\"DE\": {\"shard\": \"eu-1\", \"origins\": [\"fra-a\", \"fra-b\"],
                        \"weight\": {\"fra-a\": 50, \"fra-b\": 50}},
               \"GB\": {\"shard\": \"eu-1\", \"origins\": [\"fra-a\"],
                        \"weight\": {\"fra-a\": 100}}}}

Beside the regions, origins' capacities (answers/s) and the capacity guard's headroom may \
be kept: `\"capacities\": {\"fra-a\": 1200, \"fra-b\": 800}, \"capacity_headroom\": 0.8`. A \
file without `capacities` leaves every capacity alone; with one, each named capacity is set \
and --prune clears the capacities it does not name. The headroom changes only when the file \
names it.

Every value is validated first (exit 4 names each bad field, nothing is written). The diff \
is printed; the write is one transaction guarded on every touched key's revision. A \
policy whose default or failover names a geo with no region key is written with a \
warning note (countries without a key of their own would get the next geo, past the \
last the readers' fail-open route). Examples: /usr/share/doc/dwctl/examples/ \
(routing.json, routing.toml).

Examples:
  dwctl apply /usr/share/doc/dwctl/examples/routing.json --dry-run
  dwctl apply routing.toml --prune")]
    Apply(ApplyArgs),
    /// Take an origin out of every region (or some), renormalising weights to 100.
    #[command(after_help = "\
One transaction changes every affected region (each guarded on the revision it was read \
at) and records the drain under <control-prefix>drains/<origin> (what each region held \
before, who, why, when). Conflicts are retried automatically. A region is never left \
without an origin unless --force (then its key is deleted and `restore` recreates it).

A drain record that does not parse (or has a schema this dwctl does not read) blocks only \
`drain` and `restore` of its origin; `status` and `origin list` name it. `--repair` removes \
it (guarded on its revision) and writes an audit record with what it held under \
<control-prefix>audit/; the regions are not touched: check them with `dwctl region list`.

--spill (with traffic and capacities): where the origins left in a region cannot take the \
load within their guard, origins from the region's next steps in the chain (its \
country's, its continent bucket's, policy.default's, each failover's) that already serve \
the region's shard are added with the least weight that keeps every origin within its \
guard; the output names each. Refused (exit 4) without traffic or without any capacity. \
`restore` takes them out again.

Examples:
  dwctl drain fra-a --reason 'INC-123: 502s'
  dwctl drain fra-a --region DE --region AT --dry-run
  dwctl drain fra-a --spill --traffic traffic.json --dry-run
  dwctl drain --repair fra-a --reason 'INC-124: record truncated by hand'")]
    Drain(DrainArgs),
    /// Move about PERCENT % of an origin's predicted load to the other origins of its regions.
    #[command(after_help = SHED_HELP)]
    Shed(ShedArgs),
    /// Reverse a recorded drain or shed: a person's own part of it by default.
    #[command(after_help = "\
Each source that drained or shed an origin (a person with dwctl: cli; health; rebalance; \
the autopilot) keeps its own part of the origin's record, and a restore undoes one part: \
by default the person's (cli), with --source SOURCE another source's, with --all-sources \
every part. The other parts stay: each region gets its configured weights with the other \
parts re-applied (a drain wins over a shed, sheds multiply; /usr/share/doc/dwctl/dwctl.md, \"After the incident: restore\"). \
An origin with no part of the source asked is refused, naming the parts it has.

Regions the parts left untouched since get their exact weights back (spill origins go \
with them). A region that changed since gets the origin re-added (or, after a shed, set \
back) with its share, the others renormalised around it, and the output says so.

Examples:
  dwctl restore fra-a
  dwctl restore fra-a --source health
  dwctl restore fra-a --all-sources --dry-run")]
    Restore(RestoreArgs),
    /// Staged changes: a routing change served by a cohort of nodes first.
    #[command(
        subcommand,
        after_help = "\
A stage holds the keys of a desired-state file (apply's format) that differ from current \
routing; the nodes of its cohort (a share of the fleet by a stable hash of stage and node \
id, named nodes, labels) serve the staged values, every other node current routing. \
Widen it, then promote it (one transaction makes the staged values current) or abort it.

Examples:
  dwctl stage create eu-map.toml --cohort 5% --reason 'CHG-42 new EU map' --dry-run
  dwctl stage create eu-map.toml --cohort 5% --id eu-map --wait
  dwctl stage show eu-map
  dwctl stage widen eu-map --cohort 25%
  dwctl stage promote eu-map --wait
  dwctl stage abort eu-map"
    )]
    Stage(StageCommand),
    /// A stage advanced step by step, gated on node reports, probes and a check; promoted.
    #[command(after_help = crate::cli::rollout::AFTER_HELP)]
    Rollout(crate::cli::rollout::RolloutArgs),
    /// Register origins on leases, list them, forget them.
    #[command(subcommand)]
    Origin(OriginCommand),
    /// Long-running: drain origins whose lease expires, restore them when they return.
    #[command(after_help = "\
Watches <prefix>origin/. When the key of an origin that registered vanishes (its lease \
expired or was revoked), the origin is drained with reason `lease-expired`; when it \
registers again, that drain is restored. Origins that never registered are never touched. \
Drains made by people or by `health` are left alone. Survives etcd restarts (re-lists and \
reconciles). Safe to run more than one.

An origin is drained only once its key has been absent for --grace and the lease its \
registration record (<control-prefix>registered/<id>) names has ended: a key deleted, or \
put on another lease and revoked, by anyone else drains nothing while the origin's own \
`origin register` is alive (it puts the key back at once), and a put on a lease the \
record does not name restores nothing.

With --traffic FILE or a Prometheus (--prometheus, DWCTL_PROMETHEUS_URL) each drain's \
predicted load is recorded in its drain record (`predicted`); the drain proceeds whatever \
it says.

Example:
  dwctl rebalance --endpoints http://10.0.0.10:2379,http://10.0.0.11:2379")]
    Rebalance(RebalanceArgs),
    /// Long-running: drain origins that fail HTTP probes, restore them when they recover.
    #[command(after_help = "\
Each probe is an HTTP GET (plain http://); a 2xx or 3xx answer within --probe-timeout is a \
success. After --fail-after consecutive failures the origin is drained (reason \
`health-check`), or with --on-fail shed:PERCENT shed by that percent (the gentle \
alternative for origins that are slow rather than down); after --recover-after \
consecutive successes its health drain or shed is restored. Never more than --max-drained-fraction of the probed origins are drained at once \
(drains by anyone count), so a probe-side outage cannot empty the fleet.

With --traffic FILE or a Prometheus (--prometheus, DWCTL_PROMETHEUS_URL) each drain's \
predicted load is recorded in its drain record (`predicted`: the origins it puts above \
their capacity guard); the drain proceeds whatever it says.

Examples:
  dwctl health --probe fra-a=http://10.1.0.1/healthz --probe fra-b=http://10.1.0.2/healthz
  dwctl health --probe fra-a=http://10.1.0.1/healthz --on-fail shed:50 --traffic t.json")]
    Health(HealthArgs),
    /// Long-running: relieve origins measured over target within seconds, give the load
    /// back when it falls (load feedback from the counted answers).
    #[command(after_help = "\
Every --interval the answer rates of a short --window (Prometheus, or --traffic FILE) are \
read with the state; an origin measured above its target (headroom x capacity) for --for \
evaluations (above its capacity: at once) is shed, least harmed traffic first, onto origins \
that stay within their targets, aiming --trend-horizon ahead of a rising load; a relieved \
origin below --low-watermark of target for --restore-after gets its \
shed back in steps. One instance acts (a leader key on a --lease-ttl lease); every write is \
fenced on it and recorded with source `autopilot`. A missing or implausible source moves \
nothing. --dry-run logs each decision and writes nothing. /usr/share/doc/dwctl/autopilot.md

Examples:
  dwctl autopilot --prometheus http://127.0.0.1:9090 --dry-run
  dwctl autopilot --prometheus http://127.0.0.1:9090 --metrics 127.0.0.1:9467")]
    Autopilot(AutopilotArgs),
    /// The etcd roles and users each component needs (least privilege); --apply makes them.
    #[command(after_help = AUTH_HELP)]
    Auth(AuthArgs),
    /// The fleet: which revision each edge node routes from.
    #[command(after_help = "\
One line per node that reports under --nodes-prefix: id, labels, the revision it applied, \
its lag in revisions and seconds, the age of its last report and its state (ok, stale with \
why, rejected with the keys it left out). Nodes whose lease expired are listed as gone for \
10 minutes. Exit code 0 when every live node is at the routing revision, 5 otherwise.

Example:
  dwctl status --labels dc=fra --output json")]
    Status(StatusArgs),
    /// A key's past values from etcd's history (until compaction).
    #[command(after_help = "\
KEY is relative to --prefix (region/DE, policy/global), capacity/<origin> and \
capacity-headroom relative to --control-prefix, or absolute (/dw/control/drains/fra-a).

Example:
  dwctl history region/DE")]
    History(HistoryArgs),
    /// Put a routing key or a capacity back to its value at a past revision (guarded).
    #[command(after_help = "\
Routing keys (region/<geo>, policy/global) and capacities (capacity/<origin>, \
capacity-headroom, both relative to --control-prefix): the value is validated and written as \
any other change (open stages and drain records kept in step). A region or a capacity that \
did not exist at that revision is deleted; policy/global is never deleted. Other keys are \
refused (exit 2) with the command that owns them.

Example:
  dwctl history region/DE
  dwctl rollback region/DE --to-revision 1234
  dwctl rollback capacity/fra-a --to-revision 1250")]
    Rollback(RollbackArgs),
    /// Where does this visitor go? The routing chain walked, with why each step was skipped.
    #[command(after_help = "\
GEO is what the front controller passes to resolve(): a country code (CF-IPCountry, e.g. PT), \
a subdivision (PT-11, with cf-region-code), or anything else (an opaque geo). The chain: \
region/CC-SUB, region/CC, the continent bucket region/continent/<CODE> of CC, policy.default, \
each policy.failover geo, then the fail-open route (each node's ini, which etcd does not know). \
The answer is computed by dw-routing, the code the edge nodes run (/usr/share/doc/dwctl/routing.md).

Sources: etcd's current routing (default); with --node, etcd read at the revision that node \
reports (until compaction); with --snapshot, a snapshot file (a node's routing.json).

Examples:
  dwctl route PT
  dwctl route US-CA --sticky session-42
  dwctl route DE --node web-1 --output json
  dwctl route KE --snapshot /run/dw-router/routing.json")]
    Route(RouteArgs),
    /// Where the answers go: per origin answers/s, share, geos, keys, nodes and its etcd state.
    #[command(after_help = traffic::AFTER_HELP)]
    Traffic(TrafficArgs),
}

/// `dwctl rebalance`'s flags.
#[derive(Debug, Clone, Args)]
pub struct RebalanceArgs {
    /// How long an origin's key must stay absent (and its lease ended) before it is
    /// drained (e.g. 3s, 500ms; at most 10 minutes).
    #[arg(long, default_value = "3s", value_parser = parse_grace)]
    pub grace: Duration,
    /// Where the predicted load of each drain (recorded in its drain record) reads its
    /// traffic; none: drains are recorded without a prediction.
    #[command(flatten)]
    pub traffic: Box<TrafficSourceArgs>,
}

/// The longest `rebalance --grace`.
pub const MAX_GRACE: Duration = Duration::from_secs(600);

/// `--grace`: a duration of at most ten minutes.
fn parse_grace(text: &str) -> Result<Duration, String> {
    let grace = dw_etcd::parse_duration(text)?;
    if grace > MAX_GRACE {
        return Err(format!("at most {}s", MAX_GRACE.as_secs()));
    }
    Ok(grace)
}

#[derive(Debug, Args)]
pub struct RouteArgs {
    /// The visitor's geo, e.g. PT or US-CA (one starting with `-`, such as -CA, is a geo
    /// too: any geo resolve() may be given; `--` before it works as well).
    #[arg(allow_hyphen_values = true)]
    pub geo: String,
    /// The sticky key resolve() is given (the hash key of the pick).
    #[arg(long)]
    pub sticky: Option<String>,
    /// The visitor bucket resolve() is given (the `dw_bucket` cookie). Precedence: a
    /// sticky key wins, then a bucket below policy/global's `buckets` (the answering
    /// region's assignment), then the country; a bucket while buckets are off, or at or
    /// past N, answers as without one (the explanation says why).
    #[arg(long, value_name = "B")]
    pub bucket: Option<u64>,
    /// Read etcd at the revision this node reports (`dwctl status` lists the nodes).
    #[arg(long, value_name = "ID", conflicts_with = "snapshot")]
    pub node: Option<String>,
    /// Explain from a snapshot file instead of etcd (at most 64 MiB).
    #[arg(long, value_name = "FILE")]
    pub snapshot: Option<std::path::PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum RegionCommand {
    /// Show one region.
    Get {
        /// The geo (country code or bucket), e.g. DE.
        geo: String,
    },
    /// Show every region, invalid ones flagged.
    List,
    /// Write one region (validated; `updated` is set to now).
    #[command(after_help = "\
Give the value as JSON, as a file, or with flags:

  dwctl region set DE '{\"shard\":\"eu-1\",\"origins\":[\"fra-a\",\"fra-b\"],\"weight\":{\"fra-a\":50,\"fra-b\":50}}'
  dwctl region set DE --file de.json
  dwctl region set DE --shard eu-1 --origin fra-a=50 --origin fra-b=50")]
    Set(RegionSetArgs),
    /// Delete one region (guarded).
    Delete {
        geo: String,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        predict: Box<PredictArgs>,
    },
}

/// `--wait[=TIMEOUT]` and `--quorum` of every command that writes routing.
#[derive(Debug, Clone, Args)]
pub struct WaitArgs {
    /// After the commit, wait until the live nodes report it (default time-out 10s); exit 5
    /// listing the lagging nodes on time-out.
    #[arg(long, value_name = "TIMEOUT", num_args = 0..=1, default_missing_value = "10s", value_parser = parse_wait)]
    pub wait: Option<Duration>,
    /// Percent of the live nodes --wait waits for.
    #[arg(long, value_name = "PERCENT", default_value_t = 100, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub quorum: u8,
}

impl WaitArgs {
    /// What to wait for after the write; `None` without `--wait`.
    pub fn get(&self) -> Option<Wait> {
        self.wait.map(|timeout| Wait {
            timeout,
            quorum: self.quorum,
        })
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Only nodes with these labels (k=v,k2=v2).
    #[arg(long, default_value = "")]
    pub labels: String,
    /// Run as the fleet's Prometheus exporter: serve what `status` shows at
    /// http://ADDR/metrics (OpenMetrics text) until SIGTERM, reading etcd every --interval.
    /// Needs read access only (the dw-viewer role of `dwctl auth`). Example: 127.0.0.1:9466
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// With --serve: seconds between readings of the fleet (0.5 to 3600).
    #[arg(long, default_value_t = 5.0, requires = "serve")]
    pub interval: f64,
}

#[derive(Debug, Args)]
pub struct RegionSetArgs {
    /// The geo, e.g. DE.
    pub geo: String,
    /// The value as JSON.
    pub value: Option<String>,
    /// Read the value from a file (`-` for stdin).
    #[arg(long, conflicts_with = "value")]
    pub file: Option<String>,
    #[command(flatten)]
    pub wait: WaitArgs,
    /// The shard (with --origin).
    #[arg(long, conflicts_with_all = ["value", "file"], requires = "origin")]
    pub shard: Option<String>,
    /// An origin and its weight, NAME=WEIGHT; repeat in routing order.
    #[arg(long = "origin", value_name = "NAME=WEIGHT", requires = "shard")]
    pub origin: Vec<String>,
    #[command(flatten)]
    pub predict: Box<PredictArgs>,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Show the policy.
    Get,
    /// Write the policy (validated; `updated` is set to now).
    #[command(after_help = "\
A default or failover geo with no region key is written with a warning note: countries \
without a key of their own get the next geo, past the last the readers' fail-open route.

Example:
  dwctl policy set '{\"default\":\"US\",\"failover\":[\"GB\",\"US\"],\"pick\":\"rendezvous\"}'")]
    Set {
        /// The value as JSON.
        value: Option<String>,
        /// Read the value from a file (`-` for stdin).
        #[arg(long, conflicts_with = "value")]
        file: Option<String>,
        #[command(flatten)]
        wait: WaitArgs,
        #[command(flatten)]
        predict: Box<PredictArgs>,
    },
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// The desired state (JSON, or TOML by extension; `-` reads JSON from stdin).
    #[arg(value_hint = clap::ValueHint::FilePath)]
    pub file: String,
    /// Print the diff, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Delete regions that are not in the file (and, when the file has a `capacities`
    /// section, clear the capacities it does not name).
    #[arg(long)]
    pub prune: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub predict: PredictArgs,
}

#[derive(Debug, Args)]
pub struct DrainArgs {
    /// The origin to drain.
    pub origin: String,
    /// Only these regions (repeat, or comma-separate).
    #[arg(long = "region", value_name = "GEO", value_delimiter = ',')]
    pub regions: Vec<String>,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Why, for the drain record (incident id, symptom).
    #[arg(long, default_value = "manual drain")]
    pub reason: String,
    /// Drain even a region's last origin (its key is deleted; restore recreates it).
    #[arg(long)]
    pub force: bool,
    /// Remove the origin's malformed drain record (with an audit record); drains nothing.
    #[arg(long, conflicts_with_all = ["regions", "force", "dry_run", "spill"])]
    pub repair: bool,
    /// Add origins from the next steps of the chain where the others cannot take the load
    /// within their guard (needs traffic and capacities).
    #[arg(long)]
    pub spill: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub predict: PredictArgs,
}

const SHED_HELP: &str = "\
A shed lowers the origin's weight in its regions instead of taking it out. Every weight \
change rehashes a region's non-sticky geos (legacy pick), so with traffic (--traffic FILE \
or --prometheus URL) dwctl searches the weights, with the routing code the nodes run, \
whose predicted load comes closest to PERCENT % of the origin's load from the selected \
regions, and says what it achieves (plain geos move whole, so the achieved percent may \
differ by up to the largest geo's share). Without traffic each region's share of the \
origin is lowered by PERCENT % (exact for sticky traffic under rendezvous), and the \
output says no load was predicted. The capacity guard judges where the load lands (exit \
9, nothing written; --allow-overload commits anyway, audited; --spill adds origins).

What it changed is kept in the origin's drain record (<control-prefix>drains/<origin>, \
schema 3): `dwctl restore ORIGIN` gives every region back its exact weights from before \
the first shed. A second shed sheds from what the first left (30 then 30 is 51 %); a \
drain after a shed keeps the values from before the shed. A write to a shed region \
meanwhile does not take it out of the record. `dwctl origin list` shows `shed N%`. \
PERCENT is above 0 and at most 100 (`40`, `12.5`, `40%`); 100 is exactly `dwctl drain`. \
Regions an open stage stages are refused (exit 4).

Examples:
  dwctl shed fra-a 40 --traffic traffic.json --dry-run
  dwctl shed fra-a 40 --reason 'INC-7: fra-a slow' --prometheus http://prometheus:9090
  dwctl shed fra-a 30 --region DE --region AT
  dwctl shed fra-a 60 --spill --dry-run
  dwctl restore fra-a";

#[derive(Debug, Args)]
pub struct ShedArgs {
    /// The origin whose load to lower.
    pub origin: String,
    /// Percent of its predicted load to move: above 0, at most 100 (100 is a drain).
    #[arg(value_parser = crate::plan::shed_record::parse_percent, allow_hyphen_values = true)]
    pub percent: f64,
    /// Only these regions (repeat, or comma-separate); PERCENT is of their load.
    #[arg(long = "region", value_name = "GEO", value_delimiter = ',')]
    pub regions: Vec<String>,
    /// Show what would change and the predicted load, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Why, for the record (incident id, symptom).
    #[arg(long, default_value = "manual shed")]
    pub reason: String,
    /// Add origins from the next steps of the chain where the others cannot take the load
    /// within their guard (needs traffic and capacities).
    #[arg(long)]
    pub spill: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub predict: PredictArgs,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// The drained origin.
    pub origin: String,
    /// Undo this source's part instead of the person's (`cli`): health, rebalance or
    /// autopilot.
    #[arg(long, value_parser = ["cli", "health", "rebalance", "autopilot"], conflicts_with = "all_sources")]
    pub source: Option<String>,
    /// Undo every source's part: the origin's configured weights come back whole.
    #[arg(long)]
    pub all_sources: bool,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub predict: PredictArgs,
}

impl Command {
    /// Long-running commands stop cleanly on SIGTERM/SIGINT (exit 0); the others die on
    /// them (exit 130/143).
    pub fn is_daemon(&self) -> bool {
        matches!(
            self,
            Command::Origin(OriginCommand::Register { .. })
                | Command::Rebalance(_)
                | Command::Health(_)
                | Command::Autopilot(_)
                | Command::Rollout(_)
        ) || matches!(self, Command::Status(args) if args.serve.is_some())
    }
}

#[derive(Debug, Subcommand)]
pub enum OriginCommand {
    /// Long-running: keep <prefix>origin/<ID> alive on a lease until SIGTERM/SIGINT.
    #[command(after_help = "\
The key lives on a lease of --ttl seconds, kept alive about every ttl/3. On SIGTERM or \
SIGINT the lease is revoked (the key vanishes at once). If the lease is lost (etcd \
unreachable for longer than the ttl), the origin registers again. The key is watched: if \
anyone else deletes it, or puts it on another lease, it is put back on this lease at once \
(event `key-changed`, naming the revision of the change). The record \
<control-prefix>registered/<ID> names the lease, which is the only one `rebalance` believes.

Example:
  dwctl origin register fra-a --ttl 10 --meta '{\"addr\":\"10.1.0.1:443\"}'")]
    Register {
        /// The origin id, as regions list it.
        id: String,
        /// Lease time-to-live in seconds.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(1..=3600))]
        ttl: i64,
        /// Metadata: a JSON object stored as the key's value (at most 4096 bytes)
        #[arg(long, default_value = "{}")]
        meta: String,
    },
    /// Show live origins, registered origins that are down, and drained origins.
    List,
    /// Stop tracking an origin that registered once (rebalance will not drain it again).
    #[command(after_help = "\
Deletes <control-prefix>registered/<ID> in one transaction guarded on the record as read, \
and writes an audit record <control-prefix>audit/<at>-origin-forget-<ID> (who, when, \
--reason, the record deleted); `dwctl history` shows both. It moves no load: no capacity \
guard applies.

Example:
  dwctl origin forget fra-old --reason 'CHG-77 decommissioned' --dry-run")]
    Forget {
        /// The origin.
        id: String,
        /// Why, kept in the audit record.
        #[arg(long)]
        reason: Option<String>,
        /// Show what would be deleted, write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Set or clear an origin's capacity (answers/s), or the capacity guard's headroom.
    #[command(after_help = CAPACITY_HELP)]
    Capacity(CapacityArgs),
    /// Set or clear an origin's home geos: the ones the autopilot moves last.
    #[command(after_help = HOME_HELP)]
    Home(HomeArgs),
}

const HOME_HELP: &str = "\
When `dwctl autopilot` relieves an origin above its target, it moves the least harmed \
traffic first: bucketed shares, then geos answered by a continent bucket, the default or \
the failover, then a geo's own key, and an origin's home geos last (a subdivision such as \
DE-BY is home when its country is). Name the geos whose visitors the origin should keep \
longest: its own country, the neighbours it is closest to.

Each GEO is a region key's geo (DE, DE-BY, continent/EU); at most 64 geos, 1024 bytes \
joined with commas. They are kept in the origin's capacity record \
(<control-prefix>capacity/<ORIGIN>, field `home`), so the origin needs a capacity first \
(`dwctl origin capacity ORIGIN N`), and clearing the capacity clears them too. A write is \
one guarded transaction like any change; it moves no load, so the capacity guard does not \
judge it. `dwctl history capacity/ORIGIN` shows who set which home geos when, and why; \
`dwctl origin list` shows them. The autopilot reads them with the capacities on every \
evaluation.

Examples:
  dwctl origin home fra-a DE,AT --reason 'CHG-12: fra-a is our DACH origin'
  dwctl origin home fra-a DE,AT,CH --dry-run
  dwctl origin home fra-a --clear";

/// `dwctl origin home`'s arguments.
#[derive(Debug, Args)]
pub struct HomeArgs {
    /// The origin (as regions list it); it must have a capacity.
    pub origin: String,
    /// Its home geos, separated by commas: DE,AT (at most 64, 1024 bytes).
    #[arg(value_name = "GEO[,GEO...]", required_unless_present = "clear")]
    pub geos: Option<String>,
    /// Remove the origin's home geos (its capacity stays).
    #[arg(long, conflicts_with = "geos")]
    pub clear: bool,
    /// Why, kept in the record (at most 1024 bytes).
    #[arg(long)]
    pub reason: Option<String>,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

const CAPACITY_HELP: &str = "\
An origin's capacity is the answers per second it takes, as `dw_router_answers_total` counts \
them (answers of resolve(): a page served from LSCache never reaches PHP and is not \
counted, so relate it to the origin's own request rate through the cache's hit ratio). It \
is kept under <control-prefix>capacity/<ORIGIN>, never under the agents' prefix: no edge \
node reloads for it. The headroom (<control-prefix>capacity-headroom, 0.8 when not set) is \
the share of its capacity a planned change may put on an origin: `dwctl origin list` and \
`dwctl traffic` show both. Each write is one guarded transaction like any change (--dry-run \
previews it; `dwctl history capacity/ORIGIN` lists past values; `dwctl rollback \
capacity/ORIGIN --to-revision N` puts one back).

Examples:
  dwctl origin capacity fra-a 1200 --reason 'CHG-7: load test 2026-12'
  dwctl origin capacity fra-a --clear
  dwctl origin capacity --headroom 0.9 --dry-run
  dwctl origin capacity --clear-headroom";

/// `dwctl origin capacity`'s arguments.
#[derive(Debug, Args)]
pub struct CapacityArgs {
    /// The origin (as regions list it).
    #[arg(required_unless_present_any = ["headroom", "clear_headroom"])]
    pub origin: Option<String>,
    /// Answers per second it takes: above 0, at most 1e9 (e.g. 1200, 85.5).
    #[arg(value_name = "ANSWERS_PER_S", required_unless_present_any = ["clear", "headroom", "clear_headroom"], requires = "origin")]
    pub answers_per_s: Option<String>,
    /// Remove the origin's capacity (no capacity: the guard does not judge it).
    #[arg(long, conflicts_with = "answers_per_s", requires = "origin")]
    pub clear: bool,
    /// The share of capacity a planned change may use: above 0, at most 1 (0.8 = 80 %).
    #[arg(long, value_name = "SHARE", conflicts_with = "clear_headroom")]
    pub headroom: Option<String>,
    /// Remove the headroom record: the default (0.8) applies again.
    #[arg(long)]
    pub clear_headroom: bool,
    /// Why, kept in the record (at most 1024 bytes).
    #[arg(long)]
    pub reason: Option<String>,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct HealthArgs {
    /// ORIGIN=URL to probe (repeat).
    #[arg(long = "probe", value_name = "ORIGIN=URL", required = true)]
    pub probes: Vec<String>,
    /// Seconds between probe rounds.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// Seconds a probe may take.
    #[arg(long, default_value_t = 2.0)]
    pub probe_timeout: f64,
    /// Consecutive failures before an origin is drained.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub fail_after: u32,
    /// Consecutive successes before its drain is restored.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub recover_after: u32,
    /// Most of the probed origins that may be drained at once (0..1; sheds count).
    #[arg(long, default_value_t = 0.5)]
    pub max_drained_fraction: f64,
    /// What a failing origin gets: `drain`, or `shed:PERCENT` (e.g. shed:50) to move that
    /// share of its load and keep it serving the rest.
    #[arg(long, value_name = "drain|shed:PERCENT", default_value = "drain", value_parser = crate::plan::shed_record::parse_on_fail)]
    pub on_fail: crate::plan::shed_record::OnFail,
    /// Where the predicted load of each drain (recorded in its drain record) reads its
    /// traffic; none: drains are recorded without a prediction.
    #[command(flatten)]
    pub traffic: Box<TrafficSourceArgs>,
}

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The routing key (region/DE, policy/global, or absolute).
    #[arg(value_name = "KEY")]
    pub etcd_key: String,
}

#[derive(Debug, Args)]
pub struct RollbackArgs {
    /// The routing key (region/DE, policy/global, or absolute).
    #[arg(value_name = "KEY")]
    pub etcd_key: String,
    /// The revision whose value to put back (see `dwctl history KEY`).
    #[arg(long)]
    pub to_revision: i64,
    /// Show what would change, write nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub predict: PredictArgs,
}

impl Command {
    /// The `--wait` of a command that writes routing, when given.
    pub fn wait(&self) -> Option<Wait> {
        match self {
            Command::Region(RegionCommand::Set(args)) => args.wait.get(),
            Command::Region(RegionCommand::Delete { wait, .. }) => wait.get(),
            Command::Policy(PolicyCommand::Set { wait, .. }) => wait.get(),
            Command::Apply(args) => args.wait.get(),
            Command::Drain(args) => args.wait.get(),
            Command::Shed(args) => args.wait.get(),
            Command::Restore(args) => args.wait.get(),
            Command::Rollback(args) => args.wait.get(),
            Command::Stage(
                StageCommand::Create { wait, .. }
                | StageCommand::Widen { wait, .. }
                | StageCommand::Promote { wait, .. }
                | StageCommand::Abort { wait, .. },
            ) => wait.get(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests;
