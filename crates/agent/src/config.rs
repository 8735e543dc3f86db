//! What the agent is told: the command line (with `DW_AGENT_*` fallbacks) and the
//! validated [`Config`] that `run` takes.

pub(crate) mod bounds;
pub(crate) mod node_identity;
pub(crate) mod purge;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use dw_etcd::{EtcdArgs, EtcdOptions, parse_duration};
use dw_routing::DEFAULT_PREFIX;
use dw_routing::keys::{DEFAULT_NODES_PREFIX, seen_prefix};

use crate::Error;
pub use crate::config::bounds::DEFAULT_METRICS_MAX_CONNECTIONS;
use crate::config::bounds::{
    DEFAULT_HEARTBEAT_INTERVAL, MAX_COALESCE_WINDOW, MAX_HEARTBEAT_INTERVAL,
};
use crate::config::node_identity::check_label;
pub use crate::config::node_identity::{check_node_id, host_name, parse_labels};
use crate::config::purge::PurgeConfig;

/// Where the snapshot goes when `--snapshot` is not given: a directory of the agent's own
/// on tmpfs (systemd's `RuntimeDirectory=dw-router`), read by every PHP worker.
pub const DEFAULT_SNAPSHOT_PATH: &str = "/run/dw-router/routing.json";

/// dw_router's default `dw_router.answers_dir` (docs/traffic.md).
pub const DEFAULT_ANSWERS_DIR: &str = "/run/dw-router-answers";

/// Where `/metrics` and `/healthz` listen when `--metrics-addr` is not given.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9731";

/// The etcd endpoint when neither --endpoints nor DW_AGENT_ENDPOINTS is set (as dwctl).
pub const DEFAULT_ENDPOINTS: &str = "http://127.0.0.1:2379";

/// Everything `run` needs. Build it with [`Cli::into_config`] or by hand (tests do).
#[derive(Debug, Clone)]
pub struct Config {
    /// How to reach etcd: endpoints (tried in turn), credentials, TLS, connect and
    /// request timeouts.
    pub etcd: EtcdOptions,
    /// The etcd prefix mirrored into the snapshot.
    pub prefix: String,
    /// The snapshot file.
    pub snapshot: PathBuf,
    /// Where `/metrics` and `/healthz` listen; `None` serves neither.
    pub metrics_addr: Option<SocketAddr>,
    /// Connections the metrics port holds at once (each costs a descriptor).
    pub metrics_max_connections: usize,
    /// Publish a snapshot without region keys over one that has some.
    pub allow_empty: bool,
    /// Whose snapshot files the readers trust: their `dw_router.trusted_owner` (empty:
    /// root or the directory's owner). The agent checks its file by the readers' rules.
    pub trusted_owner: String,
    /// Timeouts, intervals and backoff.
    pub timing: Timing,
    /// Keys per page when listing the prefix.
    pub page_size: i64,
    /// Node reports (`<nodes prefix><node id>`); `None` writes none.
    pub report: Option<ReportConfig>,
    /// How often `<snapshot>.heartbeat` is rewritten (zero: never; at most 60 s).
    pub heartbeat_interval: Duration,
    /// Purging the page cache after each publication; `None` purges nothing.
    pub purge: Option<PurgeConfig>,
    /// Where dw_router's workers count their answers (`dw_router.answers_dir`), served
    /// on `/metrics` (docs/traffic.md); `None` serves none.
    pub answers_dir: Option<PathBuf>,
    /// This node's id as given (`--node-id`), whether reports are written or not: the
    /// `node` label of the answer counters. `None`: the report's id, else the host name.
    pub node_id: Option<String>,
}

/// The node report: who this node is and where and how often it says what it published.
#[derive(Debug, Clone)]
pub struct ReportConfig {
    /// The node's id (default: the host name).
    pub node_id: String,
    /// Free-form `key=value` labels, shown and filtered on by `dwctl status`.
    pub labels: BTreeMap<String, String>,
    /// Where live reports go: `<prefix><node id>`, on a lease of `ttl`. The last report is
    /// also kept at `<prefix without its trailing slash>-seen/<node id>` on a lease of
    /// `seen_ttl`, so that a node whose lease expired is shown as gone for that long.
    pub prefix: String,
    /// Lease of the live report: the node counts as gone this long after it stops.
    pub ttl: Duration,
    /// Lease of the `-seen/` record.
    pub seen_ttl: Duration,
    /// At most one report write per this interval (plus one when a burst ends).
    pub min_interval: Duration,
}

impl ReportConfig {
    /// Reports for `node_id` with every default.
    pub fn new(node_id: impl Into<String>) -> ReportConfig {
        ReportConfig {
            node_id: node_id.into(),
            labels: BTreeMap::new(),
            prefix: DEFAULT_NODES_PREFIX.to_owned(),
            ttl: Duration::from_secs(10),
            seen_ttl: Duration::from_secs(600),
            min_interval: Duration::from_secs(1),
        }
    }

    /// The live report's key.
    pub fn key(&self) -> String {
        format!("{}{}", self.prefix, self.node_id)
    }

    /// The last-seen record's key.
    pub fn seen_key(&self) -> String {
        format!("{}{}", seen_prefix(&self.prefix), self.node_id)
    }

    fn validate(&self, routing_prefix: &str) -> Result<(), Error> {
        check_node_id(&self.node_id).map_err(Error::Config)?;
        for (key, value) in &self.labels {
            check_label(key, value).map_err(Error::Config)?;
        }
        if !self.prefix.starts_with('/') || !self.prefix.ends_with('/') {
            return Err(Error::Config(format!(
                "--nodes-prefix {:?} must start and end with /",
                self.prefix
            )));
        }
        for key in [self.key(), self.seen_key()] {
            if key.starts_with(routing_prefix) || routing_prefix.starts_with(&key) {
                return Err(Error::Config(format!(
                    "node report key {key} lies inside the routing prefix {routing_prefix}: \
                     every agent would be woken by every report"
                )));
            }
        }
        if self.ttl < Duration::from_secs(2) || self.seen_ttl < self.ttl {
            return Err(Error::Config(
                "the report lease must be at least 2s, and the seen record's no shorter".into(),
            ));
        }
        if self.min_interval.is_zero() {
            return Err(Error::Config(
                "the report interval must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

/// The agent's clocks. The defaults suit production; tests shorten them.
#[derive(Debug, Clone)]
pub struct Timing {
    /// HTTP/2 ping interval. etcd refuses pings more often than every 5 s by default.
    pub keepalive_interval: Duration,
    /// How long a ping may go unanswered before the connection is dropped.
    pub keepalive_timeout: Duration,
    /// How often the watchdog asks etcd for a progress notification.
    pub progress_interval: Duration,
    /// Silence on the watch (no events, no progress) after which it is restarted.
    pub stall_timeout: Duration,
    /// First backoff ceiling after a failure.
    pub backoff_initial: Duration,
    /// Backoff ceiling cap.
    pub backoff_max: Duration,
    /// A watch that stayed up this long resets the backoff.
    pub healthy_after: Duration,
    /// Changes within this long after a publication wait and are published together at
    /// its end; the first change after a quiet spell goes at once. Zero: every change at
    /// once. At most 10 s.
    pub coalesce_window: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            keepalive_interval: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(5),
            progress_interval: Duration::from_secs(5),
            stall_timeout: Duration::from_secs(15),
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(10),
            healthy_after: Duration::from_secs(30),
            coalesce_window: Duration::from_millis(10),
        }
    }
}

impl Config {
    /// A configuration with every default, for the given endpoints and snapshot path.
    pub fn new(endpoints: Vec<String>, snapshot: impl Into<PathBuf>) -> Config {
        Config {
            etcd: EtcdOptions::new(endpoints),
            prefix: DEFAULT_PREFIX.to_owned(),
            snapshot: snapshot.into(),
            metrics_addr: None,
            metrics_max_connections: DEFAULT_METRICS_MAX_CONNECTIONS,
            allow_empty: false,
            trusted_owner: String::new(),
            timing: Timing::default(),
            page_size: 1000,
            report: None,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            purge: None,
            answers_dir: None,
            node_id: None,
        }
    }

    /// Checks what can be checked without touching etcd or the file system.
    pub(crate) fn validate(&self) -> Result<(), Error> {
        self.etcd.validate()?;
        if let Some(id) = &self.node_id {
            check_node_id(id).map_err(Error::Config)?;
        }
        if self.prefix.is_empty() {
            return Err(Error::Config("--prefix must not be empty".into()));
        }
        if self.snapshot.file_name().is_none() {
            return Err(Error::Config(format!(
                "--snapshot {} does not name a file",
                self.snapshot.display()
            )));
        }
        if self.page_size < 1 {
            return Err(Error::Config(
                "the list page size must be at least 1".into(),
            ));
        }
        let t = &self.timing;
        for (name, value) in [
            ("--keepalive-interval", t.keepalive_interval),
            ("--keepalive-timeout", t.keepalive_timeout),
            ("--progress-interval", t.progress_interval),
            ("--stall-timeout", t.stall_timeout),
            ("--backoff-initial", t.backoff_initial),
            ("--backoff-max", t.backoff_max),
        ] {
            if value.is_zero() {
                return Err(Error::Config(format!("{name} must be greater than zero")));
            }
        }
        if t.stall_timeout <= t.progress_interval {
            return Err(Error::Config(
                "--stall-timeout must be longer than --progress-interval".into(),
            ));
        }
        if t.coalesce_window > MAX_COALESCE_WINDOW {
            return Err(Error::Config(
                "--coalesce-window must be at most 10s".into(),
            ));
        }
        if self.heartbeat_interval > MAX_HEARTBEAT_INTERVAL {
            return Err(Error::Config(
                "--heartbeat-interval must be at most 60s".into(),
            ));
        }
        if let Some(report) = &self.report {
            report.validate(&self.prefix)?;
        }
        if let Some(purge) = &self.purge {
            purge.validate().map_err(Error::Config)?;
        }
        Ok(())
    }
}

/// How log lines are written to stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines with `key=value` fields (journald adds the timestamp).
    Text,
    /// One JSON object per line.
    Json,
}

/// The command line of `dw-agent`. Every flag falls back to a `DW_AGENT_*` variable.
#[derive(Debug, Parser)]
#[command(mut_args(EtcdArgs::env("DW_AGENT_")))]
// A local etcd by default, as `dwctl` (the shipped /etc/default/dw-agent relies on it).
#[command(mut_arg("endpoints", |arg| arg.required(false).default_value(DEFAULT_ENDPOINTS)))]
#[command(
    name = "dw-agent",
    version,
    about = "Mirror an etcd prefix into the routing snapshot file read by dw_router",
    long_about = "Mirror an etcd prefix into the routing snapshot file read by dw_router.\n\n\
        Lists the prefix at one revision, publishes the snapshot atomically, then watches \
        from the next revision. While etcd is unreachable the last snapshot stays as it is.",
    after_help = "Unit: dw-agent.service, its environment in /etc/default/dw-agent. \
        Guide: /usr/share/doc/dw-agent/agent.md."
)]
pub struct Cli {
    /// How to reach etcd (the flags `dwctl` takes too).
    #[command(flatten)]
    pub etcd: EtcdArgs,

    /// etcd prefix to mirror
    #[arg(long, env = "DW_AGENT_PREFIX", default_value = DEFAULT_PREFIX)]
    pub prefix: String,

    /// Snapshot file to publish (replaced atomically, never modified in place)
    #[arg(long, env = "DW_AGENT_SNAPSHOT", default_value = DEFAULT_SNAPSHOT_PATH)]
    pub snapshot: PathBuf,

    /// Address for GET /metrics and GET /healthz; "off" serves neither
    #[arg(long, env = "DW_AGENT_METRICS_ADDR", default_value = DEFAULT_METRICS_ADDR)]
    pub metrics_addr: String,

    /// Allow replacing a snapshot that has region keys with one that has none
    #[arg(long, env = "DW_AGENT_ALLOW_EMPTY")]
    pub allow_empty: bool,

    /// The readers' dw_router.trusted_owner (a user name or a numeric uid; empty: not
    /// set). The agent checks, at start and after each publication, that PHP will take the
    /// file by the readers' trust rules (/usr/share/doc/dw-agent/snapshot-trust.md), and
    /// reports `stale` and /healthz 503 while it would not
    #[arg(long, env = "DW_AGENT_TRUSTED_OWNER", default_value = "")]
    pub trusted_owner: String,

    /// Log format on stderr
    #[arg(long, env = "DW_AGENT_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Log filter (tracing EnvFilter syntax, e.g. "info" or "dw_agent=debug")
    #[arg(long, env = "DW_AGENT_LOG", default_value = "info")]
    pub log: String,

    /// HTTP/2 keepalive ping interval (etcd enforces at least 5s by default)
    #[arg(long, env = "DW_AGENT_KEEPALIVE_INTERVAL", default_value = "10s", value_parser = parse_duration)]
    pub keepalive_interval: Duration,

    /// HTTP/2 keepalive ping timeout
    #[arg(long, env = "DW_AGENT_KEEPALIVE_TIMEOUT", default_value = "5s", value_parser = parse_duration)]
    pub keepalive_timeout: Duration,

    /// How often the watchdog requests a progress notification
    #[arg(long, env = "DW_AGENT_PROGRESS_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub progress_interval: Duration,

    /// Restart a watch that has been silent this long
    #[arg(long, env = "DW_AGENT_STALL_TIMEOUT", default_value = "15s", value_parser = parse_duration)]
    pub stall_timeout: Duration,

    /// First backoff ceiling after a failure (full jitter, doubling)
    #[arg(long, env = "DW_AGENT_BACKOFF_INITIAL", default_value = "250ms", value_parser = parse_duration)]
    pub backoff_initial: Duration,

    /// Backoff ceiling cap
    #[arg(long, env = "DW_AGENT_BACKOFF_MAX", default_value = "10s", value_parser = parse_duration)]
    pub backoff_max: Duration,

    /// A watch that stays up this long resets the backoff
    #[arg(long, env = "DW_AGENT_HEALTHY_AFTER", default_value = "30s", value_parser = parse_duration)]
    pub healthy_after: Duration,

    /// Changes arriving within this long after a publication wait and are published
    /// together at its end; the first change after a quiet spell is published at once.
    /// 0 publishes every change at once; at most 10s
    #[arg(long, env = "DW_AGENT_COALESCE_WINDOW", default_value = "10ms", value_parser = parse_duration)]
    pub coalesce_window: Duration,

    /// Keys per page when listing the prefix
    #[arg(long, env = "DW_AGENT_PAGE_SIZE", default_value_t = 1000)]
    pub page_size: i64,

    /// Connections the metrics port holds at once; beyond it the oldest one still
    /// waiting for its request, or not reading its answer, is closed
    #[arg(long, env = "DW_AGENT_METRICS_MAX_CONNECTIONS", default_value_t = DEFAULT_METRICS_MAX_CONNECTIONS,
          value_parser = clap::builder::TypedValueParser::map(clap::value_parser!(u16).range(1..=4096), usize::from))]
    pub metrics_max_connections: usize,

    /// The directory of dw_router's answer counters (its dw_router.answers_dir), served
    /// on /metrics as dw_router_answers_total; "off" serves none
    #[arg(long, env = "DW_AGENT_ANSWERS_DIR", default_value = DEFAULT_ANSWERS_DIR)]
    pub answers_dir: String,

    /// This node's id: in its report, and the node label of dw_router_answers_total
    /// (default: the host name)
    #[arg(long, env = "DW_AGENT_NODE_ID")]
    pub node_id: Option<String>,

    /// Labels for the node report, k=v,k2=v2 (dwctl status --labels filters on them)
    #[arg(long, env = "DW_AGENT_LABELS", default_value = "")]
    pub labels: String,

    /// Where node reports go, outside --prefix; "off" writes none
    #[arg(long, env = "DW_AGENT_NODES_PREFIX", default_value = DEFAULT_NODES_PREFIX)]
    pub nodes_prefix: String,

    /// Lease of the node report: the node counts as gone this long after it stops
    #[arg(long, env = "DW_AGENT_REPORT_TTL", default_value = "10s", value_parser = parse_duration)]
    pub report_ttl: Duration,

    /// How often <snapshot>.heartbeat (the agent's verdict, for php/status.php) is
    /// rewritten; 0 writes none; at most 60s
    #[arg(long, env = "DW_AGENT_HEARTBEAT_INTERVAL", default_value = "5s", value_parser = parse_duration)]
    pub heartbeat_interval: Duration,

    /// After each publication, POST what changed to this page-cache purge endpoint on the
    /// node (http://HOST:PORT/PATH, e.g. php/purge.php behind LiteSpeed), with a secret
    /// whose SHA-256 goes to <snapshot>.purge-sha256; off by default
    /// (/usr/share/doc/dw-agent/agent.md)
    #[arg(long, env = "DW_AGENT_PURGE_URL")]
    pub purge_url: Option<String>,

    /// Send every purge again this long after it landed, for pages cached from the old
    /// table after the first one (at most 60s; 0: no repeat)
    #[arg(long, env = "DW_AGENT_PURGE_REPEAT_AFTER", default_value = "1s", value_parser = parse_duration)]
    pub purge_repeat_after: Duration,
}

impl Cli {
    /// Turns the parsed command line into a validated [`Config`], reading the password file.
    pub fn into_config(self) -> Result<Config, Error> {
        let metrics_addr = match self.metrics_addr.trim() {
            "off" | "" => None,
            addr => Some(addr.parse::<SocketAddr>().map_err(|e| {
                Error::Config(format!(
                    "--metrics-addr {addr:?} is not an ip:port address: {e}"
                ))
            })?),
        };
        let report = if self.nodes_prefix.trim() == "off" {
            None
        } else {
            let node_id = match &self.node_id {
                Some(id) => id.trim().to_owned(),
                None => host_name().ok_or_else(|| {
                    Error::Config("cannot read the host name: give --node-id".into())
                })?,
            };
            let mut report = ReportConfig::new(node_id);
            report.labels = parse_labels(&self.labels).map_err(Error::Config)?;
            report.prefix = self.nodes_prefix.trim().to_owned();
            report.ttl = self.report_ttl;
            Some(report)
        };
        let purge = match self.purge_url.as_deref().map(str::trim) {
            None | Some("" | "off") => None,
            Some(url) => Some(PurgeConfig {
                repeat_after: self.purge_repeat_after,
                ..PurgeConfig::new(url).map_err(Error::Config)?
            }),
        };
        let config = Config {
            etcd: self.etcd.into_options()?,
            prefix: self.prefix,
            snapshot: self.snapshot,
            metrics_addr,
            metrics_max_connections: self.metrics_max_connections,
            allow_empty: self.allow_empty,
            trusted_owner: self.trusted_owner,
            timing: Timing {
                keepalive_interval: self.keepalive_interval,
                keepalive_timeout: self.keepalive_timeout,
                progress_interval: self.progress_interval,
                stall_timeout: self.stall_timeout,
                backoff_initial: self.backoff_initial,
                backoff_max: self.backoff_max,
                healthy_after: self.healthy_after,
                coalesce_window: self.coalesce_window,
            },
            page_size: self.page_size,
            report,
            heartbeat_interval: self.heartbeat_interval,
            purge,
            answers_dir: match self.answers_dir.trim() {
                "" | "off" => None,
                dir => Some(PathBuf::from(dir)),
            },
            node_id: self.node_id.map(|id| id.trim().to_owned()),
        };
        config.validate()?;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_become_a_config() {
        let cli = Cli::try_parse_from([
            "dw-agent",
            "--endpoints",
            "http://10.0.0.1:2379, 10.0.0.2:2379",
            "--snapshot",
            "/tmp/x.json",
            "--allow-empty",
            "--stall-timeout",
            "30s",
        ])
        .unwrap();
        let config = cli.into_config().unwrap();
        assert_eq!(
            config.etcd.endpoints,
            ["http://10.0.0.1:2379", "10.0.0.2:2379"]
        );
        assert_eq!(config.prefix, DEFAULT_PREFIX);
        assert_eq!(config.metrics_addr, Some("127.0.0.1:9731".parse().unwrap()));
        assert!(config.allow_empty);
        assert!(config.etcd.credentials.is_none());
        assert_eq!(config.timing.stall_timeout, Duration::from_secs(30));
    }

    /// The configuration `dw-agent --endpoints 127.0.0.1:2379 ARGS` gives, or its error.
    fn parse(args: &[&str]) -> Result<Config, String> {
        let mut argv = vec!["dw-agent", "--endpoints", "127.0.0.1:2379"];
        argv.extend_from_slice(args);
        Cli::try_parse_from(argv)
            .map_err(|e| e.to_string())
            .and_then(|cli| cli.into_config().map_err(|e| e.to_string()))
    }

    #[test]
    fn node_ids_and_labels_are_checked() {
        let config = parse(&["--node-id", "edge-1", "--labels", "dc=fra, tier=edge"]).unwrap();
        let report = config.report.unwrap();
        assert_eq!(report.key(), "/dw/nodes/edge-1");
        assert_eq!(report.seen_key(), "/dw/nodes-seen/edge-1");
        assert_eq!(report.labels["dc"], "fra");
        assert_eq!(report.labels["tier"], "edge");
        assert!(parse(&["--node-id", "a/b"]).unwrap_err().contains("'/'"));
        assert!(parse(&["--node-id", ""]).unwrap_err().contains("--node-id"));
        let refused: [(&[&str], &str); 5] = [
            (&["--labels", "dc"], "key=value"),
            (&["--labels", "=x"], "label name"),
            (&["--labels", "a=1,a=2"], "twice"),
            (&["--labels", "a=x y"], "value of a"),
            (
                &["--node-id", "n", "--nodes-prefix", "/dw/routing/nodes/"],
                "inside the routing prefix",
            ),
        ];
        for (args, why) in refused {
            let error = parse(args).unwrap_err();
            assert!(error.contains(why), "{args:?}: {error}");
        }
        assert!(parse(&["--nodes-prefix", "off"]).unwrap().report.is_none());
        // Without reports the id is kept all the same (the answer counters' node label),
        // and checked.
        let unreported = parse(&["--nodes-prefix", "off", "--node-id", "edge-2"]).unwrap();
        assert_eq!(unreported.node_id.as_deref(), Some("edge-2"));
        assert!(
            parse(&["--nodes-prefix", "off", "--node-id", "a b"])
                .unwrap_err()
                .contains("--node-id")
        );
        assert_eq!(parse(&[]).unwrap().node_id, None);
        // The default id is the host name.
        assert_eq!(parse(&[]).unwrap().report.map(|r| r.node_id), host_name());
    }

    #[test]
    fn inconsistent_flags_are_refused() {
        assert!(
            parse(&["--user", "root"])
                .unwrap_err()
                .contains("--password")
        );
        assert!(parse(&["--password", "x"]).unwrap_err().contains("--user"));
        assert!(parse(&["--cert", "/c.pem"]).is_err());
        assert!(
            parse(&["--metrics-addr", "localhost"])
                .unwrap_err()
                .contains("--metrics-addr")
        );
        assert!(parse(&["--stall-timeout", "1s", "--progress-interval", "2s"]).is_err());
        assert!(parse(&["--prefix", ""]).is_err());
        assert_eq!(
            parse(&[]).unwrap().timing.coalesce_window,
            Duration::from_millis(10)
        );
        assert!(parse(&["--coalesce-window", "0"]).is_ok());
        assert!(parse(&["--coalesce-window", "10s"]).is_ok());
        let too_long = parse(&["--coalesce-window", "10001ms"]).unwrap_err();
        assert!(too_long.contains("at most 10s"), "{too_long}");
        assert_eq!(
            parse(&["--metrics-addr", "off"]).unwrap().metrics_addr,
            None
        );
        let local = Cli::try_parse_from(["dw-agent"]).expect("no flag is required");
        assert_eq!(
            local.etcd.endpoints,
            [DEFAULT_ENDPOINTS],
            "a local etcd by default"
        );
    }
}
