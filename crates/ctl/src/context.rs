//! [`Context`]: what every command is given, built from the global flags (by
//! `cli::GlobalArgs::to_context`: this module knows no clap type).

use std::time::Duration;

use crate::output::{OutputFormat, Reporter};
use crate::plan::keys::Layout;

/// What every command needs: how to reach etcd, where the keys are, how to retry.
#[derive(Debug, Clone)]
pub struct Context {
    /// How to reach etcd (the global connection flags).
    pub etcd: dw_etcd::EtcdOptions,
    /// Where the routing, control and node keys are.
    pub layout: Layout,
    /// How often a guarded write is retried after a conflict.
    pub retry: RetryPolicy,
    /// `--output`.
    pub output: OutputFormat,
}

impl Context {
    /// The printer of a long-running command's events, in the `--output` format.
    pub fn reporter(&self) -> Reporter {
        Reporter {
            format: self.output,
        }
    }
}

/// How often and how patiently a guarded write is retried.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// How many times to try before exit code 3.
    pub attempts: u32,
    /// The first pause's bound.
    pub base: Duration,
    /// The largest pause's bound.
    pub cap: Duration,
    /// How to reach another member when the one in use fails (unreachable, no leader, a
    /// leader change, a timeout): `ops::commit::transact` connects again through these options,
    /// which pick a member that answers and knows a leader. `None`: try the same client
    /// again.
    pub reconnect: Option<std::sync::Arc<dw_etcd::EtcdOptions>>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 10,
            base: Duration::from_millis(20),
            cap: Duration::from_secs(1),
            reconnect: None,
        }
    }
}

impl RetryPolicy {
    /// "Full jitter": a random pause up to an exponentially growing bound, so that writers
    /// that collided once do not collide again in lockstep.
    pub fn pause(&self, attempt: u32) -> Duration {
        let bound = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        bound.mul_f64(fastrand::f64())
    }
}
