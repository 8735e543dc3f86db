//! `rebalance [--grace D]`: the flags turned into a [`RebalanceConfig`], then the daemon
//! (`crate::daemons::rebalance`) runs until stopped.

use serde_json::json;

use crate::cli::RebalanceArgs;
use crate::context::Context;
use crate::daemons::rebalance::{RebalanceConfig, run};
use crate::error::Error;
use crate::output::Outcome;
use crate::plan::clock::operator;
use crate::shutdown::Shutdown;

/// Runs `dwctl rebalance`.
pub async fn command(
    context: &Context,
    args: RebalanceArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let config = RebalanceConfig {
        etcd: context.etcd.clone(),
        layout: context.layout.clone(),
        retry: context.retry.clone(),
        by: format!("rebalance:{}", operator()),
        grace: args.grace,
        traffic: args.traffic.to_source(),
    };
    run(&config, context.reporter(), shutdown).await?;
    Ok(Outcome {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
