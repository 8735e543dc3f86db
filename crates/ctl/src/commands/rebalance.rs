//! `rebalance`: drains origins whose registration lapsed and restores them when they are
//! back; the loop is `daemons::rebalance`.

use serde_json::json;

use crate::cli::RebalanceArgs;
use crate::context::Context;
use crate::daemons::rebalance::{self, RebalanceConfig};
use crate::error::Error;
use crate::output::Outcome;
use crate::plan::clock::operator;
use crate::shutdown::Shutdown;

/// Runs `dwctl rebalance` until `shutdown`.
pub async fn run(
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
    rebalance::run(&config, context.reporter(), shutdown).await?;
    Ok(Outcome {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
