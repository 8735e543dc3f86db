//! `dwctl traffic`'s flags, and the Prometheus connection flags ([`PrometheusArgs`]) that
//! any command reading Prometheus shares (the capacity planning reuses them).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::error::Error;
use crate::ops::prometheus::{PrometheusOptions, PrometheusSettings};
use crate::ops::run::{PredictInputs, WriteGuard};
use crate::ops::traffic_source::{PrometheusSource, TrafficSource};
pub use crate::ops::traffic_source::{Window, parse_window};
use crate::plan::guard::Guard;

/// The help after `dwctl traffic --help`'s flags.
pub const AFTER_HELP: &str = "\
Reads the answer counters every node's dw-agent serves (dw_router_answers_total: answers of \
resolve(), not requests; a page served from LSCache is not counted) from Prometheus' HTTP API, \
and etcd's routing state, and prints per origin:

  answers per second over --window, its share of all answers (of --geo's, with --geo),
  the geos and region keys that feed it (top --top), the chain steps that answered
  (country, continent, default, failover, fail_open, ...), per node with --by-node,
  and its state in etcd: in which regions and with what weight, registered (live, down,
  never), drained (by whom, why), in an open stage.

An origin with no answers gets `why no answers:` lines: not in any region, drained, weight 0 in all \
its regions, its regions answer no one, every answer of their geos without a sticky key hashed to \
another origin (\"the whole geo JP hashes to sjc-a\": a geo's plain answers all go to the one \
origin its hash picks, whatever the weights), or none of that (look at the nodes: dwctl status).

Prometheus must scrape every dw-agent's /metrics (/usr/share/doc/dwctl/traffic-ops.md, \"Scraping\"). The \
numbers are rates over --window: a change shows fully after one window; a window shorter \
than about four scrape intervals gives no rate at all.

No Prometheus URL (--prometheus or DWCTL_PROMETHEUS_URL): exit 2 saying how to give one. \
Prometheus unreachable, refusing the credentials or answering something that is not its \
API: exit 1 with what it said. A rate that cannot be used (NaN, infinite, below 0; never \
shown as 0): exit 1. etcd unreachable: exit 1.

Examples:
  export DWCTL_PROMETHEUS_URL=http://prometheus.internal:9090
  dwctl traffic
  dwctl traffic --origin fra-b --window 10m --by-node
  dwctl traffic --geo DE --output json
  dwctl traffic --prometheus https://prom.example.internal --prometheus-cacert ca.pem \\
      --prometheus-bearer-token-file /etc/dwctl/prom-token";

/// How to reach Prometheus: flags and `DWCTL_PROMETHEUS_*` environment variables.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Prometheus (where the answer counters are read)")]
pub struct PrometheusArgs {
    /// Prometheus' base URL (http:// or https://, a path prefix allowed), e.g.
    /// http://prometheus:9090.
    #[arg(long = "prometheus", value_name = "URL", env = "DWCTL_PROMETHEUS_URL")]
    pub url: Option<String>,
    /// Basic auth user; the password from DWCTL_PROMETHEUS_PASSWORD or
    /// --prometheus-password-file.
    #[arg(long, value_name = "USER", env = "DWCTL_PROMETHEUS_USER")]
    pub prometheus_user: Option<String>,
    /// A file holding the basic auth password (one trailing newline is dropped).
    #[arg(long, value_name = "FILE", env = "DWCTL_PROMETHEUS_PASSWORD_FILE")]
    pub prometheus_password_file: Option<PathBuf>,
    /// A file holding a bearer token (sent as `Authorization: Bearer`).
    #[arg(long, value_name = "FILE", env = "DWCTL_PROMETHEUS_BEARER_TOKEN_FILE")]
    pub prometheus_bearer_token_file: Option<PathBuf>,
    /// PEM CA bundle that signs Prometheus' certificate (https://; default: the system's).
    #[arg(long, value_name = "FILE", env = "DWCTL_PROMETHEUS_CACERT")]
    pub prometheus_cacert: Option<PathBuf>,
    /// PEM client certificate, for a Prometheus that asks for one (with --prometheus-key).
    #[arg(
        long,
        value_name = "FILE",
        env = "DWCTL_PROMETHEUS_CERT",
        requires = "prometheus_key"
    )]
    pub prometheus_cert: Option<PathBuf>,
    /// PEM private key of --prometheus-cert.
    #[arg(
        long,
        value_name = "FILE",
        env = "DWCTL_PROMETHEUS_KEY",
        requires = "prometheus_cert"
    )]
    pub prometheus_key: Option<PathBuf>,
    /// Do not verify Prometheus' TLS certificate (test setups only).
    #[arg(long)]
    pub prometheus_insecure: bool,
    /// How long one query may take (e.g. 10s).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = dw_etcd::parse_duration, env = "DWCTL_PROMETHEUS_TIMEOUT")]
    pub prometheus_timeout: Duration,
}

impl PrometheusArgs {
    /// These flags as plain settings (secrets named, not read).
    pub fn settings(&self) -> PrometheusSettings {
        PrometheusSettings {
            url: self.url.clone(),
            user: self.prometheus_user.clone(),
            password_file: self.prometheus_password_file.clone(),
            bearer_token_file: self.prometheus_bearer_token_file.clone(),
            cacert: self.prometheus_cacert.clone(),
            cert: self.prometheus_cert.clone(),
            key: self.prometheus_key.clone(),
            insecure: self.prometheus_insecure,
            timeout: self.prometheus_timeout,
        }
    }

    /// The client options these flags describe, secrets read; a usage error (exit 2)
    /// without a URL.
    pub fn options(&self) -> Result<PrometheusOptions, Error> {
        self.settings().options()
    }
}

/// Where a load prediction reads its traffic: a file, or Prometheus over a window.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Load prediction (docs: \"Capacity, prediction and shedding\")")]
pub struct TrafficSourceArgs {
    /// Predict from a traffic file instead of Prometheus (JSON: {"geos": {"DE": 120.5,
    /// "FR": {"plain": 10, "sticky": 5}}}, /usr/share/doc/dwctl/capacity.md; at most 32 MiB).
    #[arg(long = "traffic", value_name = "FILE", conflicts_with = "url")]
    pub traffic_file: Option<PathBuf>,
    /// The window Prometheus' rates are taken over (30s, 5m, 1h; 10s to 1d).
    #[arg(long, default_value = "5m", value_parser = parse_window)]
    pub window: Window,
    /// The most answers per second one node can give: a node whose rate over the window,
    /// or over its busiest minute (a counter that jumped), is above it is left out of the
    /// prediction and named (above 0, at most 1e12).
    #[arg(long, value_name = "PER_SECOND", default_value_t = dw_capacity::DEFAULT_NODE_CEILING, value_parser = parse_node_ceiling, env = "DWCTL_NODE_CEILING")]
    pub node_ceiling: f64,
    /// How to reach Prometheus (the answer counters the prediction reads).
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
}

/// The load prediction's flags, on every command that plans a routing change: where the
/// traffic comes from, and whether the capacity guard may be overridden.
#[derive(Debug, Clone, Args)]
pub struct PredictArgs {
    /// Commit even when the prediction puts an origin above its capacity guard (the
    /// override is kept in an audit record under <control-prefix>audit/).
    #[arg(long)]
    pub allow_overload: bool,
    /// Where the traffic comes from.
    #[command(flatten)]
    pub source: TrafficSourceArgs,
}

/// `dwctl traffic`'s flags.
#[derive(Debug, Args)]
pub struct TrafficArgs {
    /// The window the rates are taken over: a Prometheus duration (30s, 5m, 1h), 10s to 1d.
    #[arg(long, default_value = "5m", value_parser = parse_window)]
    pub window: Window,
    /// Only this origin (repeat for more).
    #[arg(long = "origin", value_name = "ID")]
    pub origins: Vec<String>,
    /// Only answers to this geo, as the counters label it (DE, PT-11, T1, empty, other).
    #[arg(long, value_name = "G")]
    pub geo: Option<String>,
    /// Each origin's answers per node too.
    #[arg(long)]
    pub by_node: bool,
    /// How many geos, keys and nodes to list per origin (1 to 100).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub top: u16,
    /// How to reach Prometheus.
    #[command(flatten)]
    pub prometheus: PrometheusArgs,
}

impl TrafficSourceArgs {
    /// The source these flags name (a Prometheus' secrets are read when it is asked).
    pub fn to_source(&self) -> TrafficSource {
        source_of(
            self.traffic_file.as_ref(),
            &self.prometheus,
            self.window,
            self.node_ceiling,
        )
    }
}

/// The rate source a command's flags name: the file when given, else the Prometheus of a
/// non-empty URL (its secrets read when it is asked), else none. Shared by every command
/// that reads rates (`TrafficSourceArgs`, `dwctl autopilot`).
pub fn source_of(
    traffic_file: Option<&PathBuf>,
    prometheus: &PrometheusArgs,
    window: Window,
    node_ceiling: f64,
) -> TrafficSource {
    if let Some(path) = traffic_file {
        return TrafficSource::File(path.clone());
    }
    let settings = prometheus.settings();
    match settings.url.as_deref().map(str::trim) {
        Some(url) if !url.is_empty() => TrafficSource::Prometheus(PrometheusSource {
            settings,
            window,
            node_ceiling,
        }),
        _ => TrafficSource::NotGiven,
    }
}

/// `--node-ceiling`: answers per second, above 0 and at most [`dw_capacity::MAX_RATE`].
pub fn parse_node_ceiling(text: &str) -> Result<f64, String> {
    let ceiling: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?}: answers per second, such as 50000"))?;
    dw_capacity::Limits {
        node_ceiling: ceiling,
        ..dw_capacity::Limits::default()
    }
    .check()
    .map_err(|error| format!("{text:?}: {error}"))?;
    Ok(ceiling)
}

impl PredictArgs {
    /// The prediction's inputs these flags give.
    pub fn to_inputs(&self) -> PredictInputs {
        PredictInputs {
            source: self.source.to_source(),
            allow_overload: self.allow_overload,
        }
    }

    /// The guard of a write predicted with these flags.
    pub fn to_guard(&self) -> WriteGuard {
        Guard::Predict(self.to_inputs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ceilings_are_positive_finite_and_bounded() {
        assert_eq!(parse_node_ceiling("50000"), Ok(50_000.0));
        assert_eq!(parse_node_ceiling("1e12"), Ok(1e12));
        assert_eq!(parse_node_ceiling("0.001"), Ok(0.001));
        for bad in ["0", "-1", "NaN", "inf", "1.0000001e12", "many", ""] {
            assert!(parse_node_ceiling(bad).is_err(), "{bad}");
        }
    }
}
