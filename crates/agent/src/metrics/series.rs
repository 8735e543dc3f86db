//! Every series `/metrics` serves, registered once with a `prometheus-client` registry and
//! encoded in the Prometheus text format (version 0.0.4) by that crate.
//!
//! To add a metric with one value: one line in the `single_valued!` table below (field,
//! kind, name, help), then `metrics.series.single.FIELD.inc()` (or `.set(...)`) where it
//! happens, and its row in docs/agent.md (a test compares that table with what renders).
//! A counter's name is written without `_total`: the encoder appends it.
//!
//! Every label value a family can take is created at zero here, so a quiet agent has every
//! series (a counter that appears only at its first increment makes `rate()` miss it).
//!
//! Encoding never waits on publication for longer than a copy: counters and gauges are
//! atomics, the families are created up front (lookups then take only shared locks), and
//! a histogram's lock is held by `observe` for an addition.

use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The content type of [`Series::encode`]'s text.
pub(crate) const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// A counter.
pub(crate) type Count = Counter<u64, AtomicU64>;
/// A gauge with integer values.
type Level = Gauge<i64, AtomicI64>;
/// A gauge with fractional values (seconds).
type Seconds = Gauge<f64, AtomicU64>;
/// One label, for the families below.
pub(crate) type Label = [(&'static str, &'static str); 1];

/// Upper bounds of the latency histograms' buckets, in seconds: from a fast local rename
/// (half a millisecond) to a slow disk or a long `--coalesce-window` (10 s).
const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

macro_rules! single_valued {
    ($($field:ident: $kind:ty = $name:literal, $help:literal;)*) => {
        /// The metrics with one value each, in the order they are served.
        #[derive(Debug, Default)]
        pub(crate) struct SingleValued {
            $(
                #[doc = $help]
                pub(crate) $field: $kind,
            )*
        }

        impl SingleValued {
            fn register(&self, registry: &mut Registry) {
                $(registry.register($name, $help, self.$field.clone());)*
            }
        }
    };
}

// The encoder appends a full stop to each help text.
single_valued! {
    published_revision: Level = "dw_agent_published_revision",
        "etcd revision of the published snapshot file (-1 when there is none)";
    mirror_revision: Level = "dw_agent_mirror_revision",
        "etcd revision the agent's in-memory state reflects";
    keys: Level = "dw_agent_keys", "Keys under the prefix in the in-memory state";
    unrepresentable_keys: Level = "dw_agent_unrepresentable_keys",
        "Keys under the prefix left out because the key or value is not UTF-8";
    snapshot_writes: Count = "dw_agent_snapshot_writes",
        "Snapshot files published (renamed into place)";
    snapshot_write_errors: Count = "dw_agent_snapshot_write_errors",
        "Failed attempts to publish the snapshot file";
    reconnects: Count = "dw_agent_reconnects", "Sessions with etcd that ended and were retried";
    stale_events: Count = "dw_agent_stale_events",
        "Watch events at or below the state's revision, skipped";
    silent_watch_checks: Count = "dw_agent_silent_watch_checks",
        "Reads of the prefix that showed a silent watch had missed nothing (behind etcd grpc-proxy, which ignores progress requests)";
    untrusted_snapshot_replaced: Count = "dw_agent_untrusted_snapshot_replaced",
        "Files at the snapshot path the agent did not trust (not its own, a symlink or FIFO, another etcd cluster's, a revision beyond etcd's), replaced";
    metrics_connections_evicted: Count = "dw_agent_metrics_connections_evicted",
        "Idle or slow connections to the metrics port closed to make room (--metrics-max-connections reached)";
    metrics_connections_refused: Count = "dw_agent_metrics_connections_refused",
        "Connections to the metrics port closed at once: every slot was answering";
    metrics_render_cuts: Count = "dw_agent_metrics_render_cuts",
        "Renders of /metrics cut at their 8 MiB cap (the answer counters past it left out)";
    metrics_renders_reused: Count = "dw_agent_metrics_renders_reused",
        "Scrapes answered with the newest render again because every render the port may hold (4) was still being written to a client";
    coalesced_changes: Count = "dw_agent_coalesced_changes",
        "Watch responses with changes that waited for the end of --coalesce-window and were published together with later ones";
    purge_requests: Count = "dw_agent_purge_requests",
        "Requests to --purge-url (first sendings, repeats and retries)";
    purge_failures: Count = "dw_agent_purge_failures",
        "Requests to --purge-url that did not land (connect error, timeout, an answer other than 200); each is retried";
    report_writes: Count = "dw_agent_report_writes", "Node reports written to etcd";
    report_failures: Count = "dw_agent_report_failures",
        "Node report writes (or their leases) that etcd refused or did not answer";
    report_heals: Count = "dw_agent_report_heals",
        "Node reports written again because someone else deleted or overwrote them";
    report_conflicts: Count = "dw_agent_report_conflicts",
        "Writes of this node's report by another agent instance (two agents with one node id)";
    report_conflict: Level = "dw_agent_report_conflict",
        "1 while another agent instance writes this node's report (/healthz is 503)";
    last_event_to_rename: Seconds = "dw_agent_last_event_to_rename_seconds",
        "Last publication: from the watch response's arrival to the rename (etcd does not record commit times)";
    seconds_since_last_event: Seconds = "dw_agent_seconds_since_last_event",
        "Seconds since etcd last delivered state (a list or watch events); since start if never";
    seconds_since_last_response: Seconds = "dw_agent_seconds_since_last_response",
        "Seconds since the watch last answered (events or progress); since start if never";
    connected: Level = "dw_agent_connected",
        "1 while a session with etcd is up (listing or watching)";
    healthy: Level = "dw_agent_healthy", "1 when /healthz answers 200 (connected, current, publishing)";
}

/// The registry and a handle on each of its series.
#[derive(Debug)]
pub(crate) struct Series {
    registry: Registry,
    /// The metrics with one value each.
    pub(crate) single: SingleValued,
    /// `dw_agent_watch_restarts_total{cause}`.
    pub(crate) watch_restarts: Family<Label, Count>,
    /// `dw_agent_state{state}`.
    pub(crate) state: Family<Label, Level>,
    /// `dw_agent_event_to_rename_seconds`.
    pub(crate) event_to_rename: Histogram,
    /// `dw_agent_publication_duration_seconds`.
    pub(crate) publication_duration: Histogram,
}

impl Series {
    /// Registers every series, each family with every value of its label at zero.
    pub(crate) fn new(causes: &[&'static str], states: &[&'static str]) -> Series {
        let series = Series {
            registry: Registry::default(),
            single: SingleValued::default(),
            watch_restarts: Family::default(),
            state: Family::default(),
            event_to_rename: Histogram::new(LATENCY_BUCKETS),
            publication_duration: Histogram::new(LATENCY_BUCKETS),
        };
        for &cause in causes {
            drop(series.watch_restarts.get_or_create(&[("cause", cause)]));
        }
        for &state in states {
            drop(series.state.get_or_create(&[("state", state)]));
        }
        let mut registry = Registry::default();
        series.single.register(&mut registry);
        registry.register(
            "dw_agent_watch_restarts",
            "Sessions ended, by cause",
            series.watch_restarts.clone(),
        );
        registry.register(
            "dw_agent_state",
            "The agent's current state (1 for the current one)",
            series.state.clone(),
        );
        registry.register(
            "dw_agent_event_to_rename_seconds",
            "From a watch response's arrival to the rename of its snapshot",
            series.event_to_rename.clone(),
        );
        registry.register(
            "dw_agent_publication_duration_seconds",
            "From the start of building a snapshot to its rename (serialising, writing, fsync, rename)",
            series.publication_duration.clone(),
        );
        Series { registry, ..series }
    }

    /// Serves the answer counters of `dir` (dw_router's `dw_router.answers_dir`) with
    /// `node` as their `node` label.
    pub(crate) fn add_answers(&mut self, dir: std::path::PathBuf, node: String) {
        self.registry
            .register_collector(Box::new(super::answers::Answers { dir, node }));
    }

    /// The Prometheus text of every series, at most `cap` bytes: the series that do not
    /// fit are left out, the text ending with the last whole line that does (the agent's
    /// own series come first, the answer counters last). True when something was cut.
    pub(crate) fn encode(&self, cap: usize) -> (String, bool) {
        let mut text = Capped {
            text: String::with_capacity(cap.min(8 * 1024)),
            cap,
            cut: false,
        };
        // Only the cap makes writing into a String fail (or a collector that cannot read,
        // which serves what it wrote).
        let _ = prometheus_text::encode(&mut text, &self.registry);
        let Capped { mut text, cut, .. } = text;
        if cut {
            text.truncate(text.rfind('\n').map_or(0, |at| at + 1));
        }
        (text, cut)
    }

    /// Serves `collector` as well (tests: one that blocks, to see where a render runs).
    #[cfg(test)]
    pub(crate) fn add_collector(
        &mut self,
        collector: Box<dyn prometheus_client::collector::Collector>,
    ) {
        self.registry.register_collector(collector);
    }
}

/// A String that takes at most `cap` bytes: past it, writing fails.
struct Capped {
    text: String,
    cap: usize,
    cut: bool,
}

impl std::fmt::Write for Capped {
    /// The encoder hands over chunks of several lines: of one that does not fit, the
    /// whole lines that do are kept.
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let room = self.cap.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            return Ok(());
        }
        if let Some(end) = s.as_bytes()[..room].iter().rposition(|&b| b == b'\n') {
            // A '\n' is one byte: a character boundary.
            self.text.push_str(&s[..=end]);
        }
        self.cut = true;
        Err(std::fmt::Error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A render of exactly the cap is whole; one byte less cuts the last line off, and
    /// nothing but whole lines is served.
    #[test]
    fn a_render_is_cut_at_its_cap_on_a_line_s_end() {
        let series = Series::new(&["connect"], &["starting"]);
        let (full, cut) = series.encode(usize::MAX);
        assert!(!cut);
        assert!(full.len() > 1000 && full.ends_with('\n'));
        assert_eq!(series.encode(full.len()), (full.clone(), false));
        let (short, cut) = series.encode(full.len() - 1);
        assert!(cut);
        let last_line_starts = full[..full.len() - 1].rfind('\n').unwrap() + 1;
        assert_eq!(short, full[..last_line_starts]);
        assert_eq!(series.encode(0), (String::new(), true));
    }
}
