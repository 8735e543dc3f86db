//! [`Context`]: what every command is given, built from the global flags.

use crate::cli::GlobalArgs;
use crate::error::Error;
use crate::ops::commit::RetryPolicy;
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
    /// The context the global flags describe; a usage error for a malformed one.
    pub fn from_args(global: &GlobalArgs) -> Result<Context, Error> {
        let etcd = global.etcd.clone().into_options()?;
        Ok(Context {
            retry: RetryPolicy {
                attempts: global.retries,
                reconnect: Some(std::sync::Arc::new(etcd.clone())),
                ..RetryPolicy::default()
            },
            etcd,
            layout: Layout::new(&global.prefix, &global.control_prefix)?
                .with_nodes(&global.nodes_prefix)?
                .with_max_request_bytes(global.max_request_bytes),
            output: global.output,
        })
    }

    /// The printer of a long-running command's events, in the `--output` format.
    pub fn reporter(&self) -> Reporter {
        Reporter {
            format: self.output,
        }
    }
}
