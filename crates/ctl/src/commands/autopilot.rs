//! `autopilot`: the flags checked into an [`AutopilotConfig`], then the daemon
//! (`crate::daemons::autopilot`) runs until stopped.

use std::net::SocketAddr;
use std::time::Duration;

use serde_json::json;

use crate::cli::AutopilotArgs;
use crate::context::Context;
use crate::daemons::autopilot::{AutopilotConfig, run};
use crate::error::Error;
use crate::ops::traffic_source::TrafficSource;
use crate::output::{Outcome, Shown};
use crate::plan::autopilot::Settings;
use crate::plan::capacity::DEFAULT_HEADROOM;
use crate::plan::clock::operator;
use crate::shutdown::Shutdown;

/// The shortest and the longest `--interval`, seconds.
pub const INTERVAL_SECONDS: std::ops::RangeInclusive<f64> = 0.5..=600.0;

/// Runs `dwctl autopilot`: malformed flags are a usage error (exit 2), then the daemon.
pub async fn command(
    context: &Context,
    args: AutopilotArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let settings = Settings {
        band: args.band,
        over_for: args.over_for,
        low_watermark: args.low_watermark,
        restore_after: args.restore_after,
        min_interval: args.min_interval,
        max_moved_per_minute: args.max_moved_per_minute,
        ceiling: args.ceiling,
        give_back_step: args.give_back_step,
        trend_horizon: args.trend_horizon,
    };
    // The ceiling is checked against the default headroom here and against the stored
    // headroom at each evaluation (a lower stored one only widens the room).
    settings.check(DEFAULT_HEADROOM.min(args.ceiling))?;
    if !(args.interval.is_finite() && INTERVAL_SECONDS.contains(&args.interval)) {
        return Err(Error::Usage(format!(
            "--interval {}: 0.5 to 600 seconds",
            args.interval
        )));
    }
    let metrics = match &args.metrics {
        None => None,
        Some(text) => Some(text.parse::<SocketAddr>().map_err(|_| {
            Error::Usage(format!(
                "--metrics `{}`: expected an address such as 127.0.0.1:9467",
                Shown(text)
            ))
        })?),
    };
    let traffic = args.to_source();
    if matches!(traffic, TrafficSource::NotGiven) {
        return Err(Error::Usage(
            "the autopilot needs a rate source: --prometheus URL (DWCTL_PROMETHEUS_URL) or \
             --traffic FILE"
                .into(),
        ));
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_owned())
        .unwrap_or_default();
    let config = AutopilotConfig {
        etcd: context.etcd.clone(),
        layout: context.layout.clone(),
        retry: context.retry.clone(),
        by: format!("autopilot:{}", operator()),
        settings,
        interval: Duration::from_secs_f64(args.interval),
        traffic,
        dry_run: args.dry_run,
        lease_ttl: args.lease_ttl,
        identity: format!("{host}:{}", std::process::id()),
        metrics,
    };
    run(&config, context.reporter(), shutdown).await?;
    Ok(Outcome {
        text: String::new(),
        json: json!({"stopped": true}),
    })
}
