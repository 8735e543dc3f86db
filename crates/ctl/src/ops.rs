//! Doing it against etcd: every read and every transaction of dwctl, below the commands
//! (which parse arguments and print) and above the pure plans (`crate::plan`, the crate
//! dw-ctl-plan). Never a clap type here.
//!
//! - [`commit`]: the one write path. Reads the state at one revision, runs a plan (a pure
//!   function of it), follows up open stages and drain records, checks the request's size,
//!   commits in one guarded transaction, retries on conflict.
//! - [`run`]: previews or commits a plan and reports each key it changes (`--dry-run`);
//!   `run_checked` is that one branch for a command that words its own outcome.
//! - [`one_shot`]: `run_plan`, `run_checked` and the state read for a one-shot command,
//!   on a connection opened here from the context (no command holds an etcd client).
//! - [`stage`]: the stage operations (create, widen, promote, abort) from plain requests,
//!   for `dwctl stage` and the rollout driver.
//! - [`fleet`] and [`revision`]: the node reports and the routing revision they are
//!   judged against (`status`, `--wait`).
//! - [`history`]: a key's changes in etcd's history, and `rollback`'s read of a past value.
//! - [`route`]: the routing prefix read in pages, as a node compiles it (`route`).
//! - [`origin`]: origins as etcd knows them (`origin list`, `traffic`, `rebalance`).
//! - [`key`]: one key read on its own; [`region`]: `region get|list|set|delete`;
//!   [`repair`]: `drain --repair`.
//! - [`rollout`]: a rollout's progress record and reads, for its driver.
//! - [`auth`]: etcd's roles and users made to match dwctl's (`auth --apply`).
//! - [`lease`]: whether a lease lives, for every reader that believes a key by its lease.
//! - [`registration`]: `origin forget`, a registration record deleted through the write
//!   path, audited.
//! - [`probe`] and [`bake_checks`]: the HTTP health probe and a rollout bake's checks.
//! - [`traffic`]: `traffic`'s etcd read (the state and the origins' listing).
//! - [`traffic_source`]: the traffic a plan's load prediction reads (a file, Prometheus).
//! - [`prometheus`]: the client of Prometheus' HTTP API (`traffic`, the load prediction);
//!   [`answer_counters`]: the counters' names, the PromQL over them, which rates are usable.

pub(crate) mod answer_counters;
pub(crate) mod auth;
pub(crate) mod autopilot_status;
pub(crate) mod bake_checks;
pub(crate) mod commit;
pub(crate) mod fleet;
pub(crate) mod history;
pub(crate) mod key;
pub(crate) mod lease;
pub(crate) mod one_shot;
pub(crate) mod origin;
pub(crate) mod probe;
pub(crate) mod prometheus;
pub(crate) mod region;
pub(crate) mod registration;
pub(crate) mod repair;
pub(crate) mod revision;
pub(crate) mod rollout;
pub(crate) mod route;
pub(crate) mod run;
pub(crate) mod stage;
pub(crate) mod traffic;
pub(crate) mod traffic_source;
