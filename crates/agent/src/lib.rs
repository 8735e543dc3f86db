//! dw-agent: the per-node etcd watcher that keeps the routing snapshot file current.
//!
//! One agent runs on every edge node and is the only thing there that talks to etcd. It
//! lists the prefix (default `/dw/routing/`) at one revision, publishes the snapshot file
//! (format in `docs/snapshot-format.md`) by atomic rename, then watches from the next
//! revision and publishes once per watch response that changes a key (responses within
//! `--coalesce-window` of a publication wait and go together). PHP never waits on
//! it: readers only ever see a complete published file.
//!
//! Guarantees, and where they come from:
//! - *Never torn*: a new file is written, fsynced and renamed over the old one; a
//!   published file is never written in place (readers mmap it).
//! - *Never backwards, never twice*: a state is published only if its revision is above
//!   the published file's, including the file left by a previous run.
//! - *Transactions land whole*: etcd delivers a revision's events in one watch response,
//!   and one response makes at most one write.
//! - *Last known good*: while etcd is unreachable nothing is written; a state without
//!   region keys never replaces one with them unless `--allow-empty`.
//! - *No silent hangs*: require-leader, HTTP/2 keepalive and a progress-request watchdog;
//!   any failure backs off (full jitter) and re-lists from another endpoint.
//!
//! Use [`run`] (or [`Agent::start`] then [`Agent::run`] to get at the status and the
//! publications); `main.rs` only parses flags, sets up logging and handles signals.
//!
//! ```no_run
//! # async fn example() -> Result<(), dw_agent::Error> {
//! let endpoints = vec!["http://127.0.0.1:2379".to_string()];
//! let config = dw_agent::Config::new(endpoints, "/run/dw-router/routing.json");
//! // Publishes, and keeps the file current, until Ctrl-C.
//! let shutdown = async {
//!     let _ = tokio::signal::ctrl_c().await;
//! };
//! dw_agent::run(config, shutdown).await
//! # }
//! ```

#![deny(missing_docs)]

mod agent;
mod config;
mod error;
mod etcd;
mod metrics;
mod publish;
mod purge;
mod report;

use std::future::Future;

pub use crate::agent::Agent;
pub use crate::config::purge::{
    DEFAULT_PURGE_REPEAT_AFTER, MAX_PURGE_REPEAT_AFTER, PurgeConfig, PurgeUrl,
};
pub use crate::config::{
    Cli, Config, DEFAULT_METRICS_ADDR, DEFAULT_SNAPSHOT_PATH, LogFormat, ReportConfig, Timing,
    check_node_id, host_name, parse_labels,
};
pub use crate::error::Error;
pub use crate::metrics::{State, Status, StatusHandle};
pub use crate::publish::Publication;
pub use dw_etcd::{Credentials, EtcdOptions, TlsFiles, parse_duration};
pub use dw_routing::keys::{DEFAULT_NODES_PREFIX, seen_prefix};

/// Runs an agent until `shutdown` completes. Returns an error only for problems retrying
/// cannot fix (bad flags, unusable snapshot directory, metrics address in use); etcd being
/// away is not one of them.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
    Agent::start(config).await?.run(shutdown).await
}
