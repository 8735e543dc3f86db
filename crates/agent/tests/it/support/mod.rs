//! Test and benchmark harness of the agent, one file per concern: the agent in this
//! process and as a binary (`agent`), `dwctl` and reporting agents (`fleet`), what etcd and the snapshot hold (`state`), a file
//! watcher that checks every snapshot it sees (`watcher`), a TCP proxy that can freeze or
//! cut connections (`proxy`), and a writer that keeps etcd busy (`storm`). The etcd
//! members themselves come from `dw-etcd-testkit`, shared with dwctl's tests.
#![allow(dead_code)]

mod agent;
mod fleet;
mod proxy;
mod state;
mod storm;
mod watcher;

use std::time::Duration;

// Each test file uses a part of the harness: the rest is unused there, not dead.
#[allow(unused_imports)]
pub use {
    agent::*,
    dw_etcd_testkit::{Cluster, Etcd, TestTls, free_port, signal},
    fleet::*,
    proxy::*,
    state::*,
    storm::*,
    watcher::*,
};

pub const PREFIX: &str = dw_routing::DEFAULT_PREFIX;

/// A valid region value with one origin.
pub const REGION: &str = r#"{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":1}}"#;

/// How long "eventually" may take. Generous: the suite shares two cores with others.
pub const EVENTUALLY: Duration = Duration::from_secs(60);
