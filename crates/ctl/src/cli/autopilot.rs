//! `dwctl autopilot`'s flags (docs/autopilot.md): the control law's settings with their
//! defaults, the short window's rate source, the election and the metrics port.

use std::path::PathBuf;

use clap::Args;

use super::traffic::{PrometheusArgs, parse_node_ceiling, source_of};
use crate::ops::traffic_source::{TrafficSource, Window, parse_window};

/// `dwctl autopilot`.
#[derive(Debug, Clone, Args)]
pub struct AutopilotArgs {
    /// Log each decision with its figures and write nothing (never takes the leader key,
    /// so it can run beside the active instance).
    #[arg(long)]
    pub dry_run: bool,
    /// Seconds between evaluations.
    #[arg(long, default_value_t = 2.0)]
    pub interval: f64,
    /// A relief aims at target × (1 − band).
    #[arg(long, default_value_t = 0.05)]
    pub band: f64,
    /// Evaluations in a row above target before a relief.
    #[arg(long = "for", default_value_t = 2)]
    pub over_for: u32,
    /// The give-back watermark, a fraction of target.
    #[arg(long, default_value_t = 0.7)]
    pub low_watermark: f64,
    /// Seconds below the watermark before part of a shed is given back.
    #[arg(long, default_value_t = 600)]
    pub restore_after: u64,
    /// Seconds between two actions on one origin.
    #[arg(long, default_value_t = 30)]
    pub min_interval: u64,
    /// The most load moved in any minute, a fraction of the fleet's answers (0 to 1).
    #[arg(long, default_value_t = 0.1)]
    pub max_moved_per_minute: f64,
    /// What a receiver may reach when every origin is over target, a fraction of its
    /// capacity (between the headroom and 1).
    #[arg(long, default_value_t = 0.9)]
    pub ceiling: f64,
    /// The part of the remaining shed one give back returns (0 to 1).
    #[arg(long, default_value_t = 0.25)]
    pub give_back_step: f64,
    /// Seconds ahead a relief of a rising load aims: the load's slope over the last 8 s
    /// (under the table now) × this, at most a quarter of the target; 0 turns it off, at
    /// most 600. About --window / 2 + --min-interval + the propagation.
    #[arg(long, default_value_t = 40, value_name = "SECONDS")]
    pub trend_horizon: u64,
    /// The leader lease's TTL in seconds: a standby takes over within it.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(i64).range(2..=300))]
    pub lease_ttl: i64,
    /// Serve /metrics on this address (127.0.0.1:9467).
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<String>,
    /// Read the rates from a traffic file instead of Prometheus (tests, drills).
    #[arg(long = "traffic", value_name = "FILE", conflicts_with = "url")]
    pub traffic_file: Option<PathBuf>,
    /// The short window Prometheus' rates are taken over (10s to 1d).
    #[arg(long, default_value = "10s", value_parser = parse_window)]
    pub window: Window,
    /// The most answers per second one node can give (its rates are left out above it).
    #[arg(long, value_name = "PER_SECOND", default_value_t = dw_capacity::DEFAULT_NODE_CEILING, value_parser = parse_node_ceiling, env = "DWCTL_NODE_CEILING")]
    pub node_ceiling: f64,
    /// How to reach Prometheus.
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
}

impl AutopilotArgs {
    /// Where the rates come from.
    pub fn to_source(&self) -> TrafficSource {
        source_of(
            self.traffic_file.as_ref(),
            &self.prometheus,
            self.window,
            self.node_ceiling,
        )
    }
}
