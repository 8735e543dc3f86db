//! The agent's counters and state, shared between the watch loop (which updates them) and
//! the HTTP endpoint (which renders them as Prometheus text and as a health verdict).
//! The series themselves, and how to add one, are in [`series`].

mod answers;
pub(crate) mod http;
mod label_value;
pub(crate) mod purge_counters;
pub(crate) mod series;
mod status;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub(crate) use self::series::CONTENT_TYPE;
use self::series::Series;
use self::status::Condition;
pub use self::status::{State, Status, StatusHandle};
use crate::config::bounds::MAX_RENDER_BYTES;

#[derive(Debug)]
pub(crate) struct Metrics {
    started: Instant,
    stall_timeout: Duration,
    /// Milliseconds since `started` plus one; zero for never.
    last_event: AtomicU64,
    last_response: AtomicU64,
    /// What `/metrics` serves; the counters in it are the status's too.
    pub(crate) series: Series,
    /// The purge task's handles on its two counters (in `series`).
    pub(crate) purge: Arc<crate::metrics::purge_counters::PurgeCounters>,
    condition: Mutex<Condition>,
}

/// Every restart cause, so each series exists from the start (a counter that appears only
/// after its first increment makes `rate()` miss that increment).
const CAUSES: [&str; 6] = [
    "connect",
    "list",
    "compacted",
    "no_leader",
    "watch",
    "stalled",
];

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep serving it.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A count as a gauge's value.
fn level(count: usize) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl Metrics {
    pub(crate) fn new(stall_timeout: Duration, published_revision: Option<u64>) -> Metrics {
        let series = Series::new(&CAUSES, &State::ALL.map(State::as_str));
        let purge = Arc::new(crate::metrics::purge_counters::PurgeCounters::new(
            series.single.purge_requests.clone(),
            series.single.purge_failures.clone(),
        ));
        let metrics = Metrics {
            started: Instant::now(),
            stall_timeout,
            last_event: AtomicU64::new(0),
            last_response: AtomicU64::new(0),
            series,
            purge,
            condition: Mutex::new(Condition {
                state: State::Starting,
                endpoint: None,
                hold: None,
                refused_by_readers: None,
                write_error: None,
                last_error: None,
                report_conflict: None,
            }),
        };
        metrics.set_published_revision(published_revision);
        metrics.set_state(State::Starting);
        metrics
    }

    fn now_mark(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1
    }

    fn since(&self, mark: &AtomicU64) -> Option<Duration> {
        match mark.load(Ordering::Relaxed) {
            0 => None,
            mark => Some(
                self.started
                    .elapsed()
                    .saturating_sub(Duration::from_millis(mark - 1)),
            ),
        }
    }

    fn set_published_revision(&self, revision: Option<u64>) {
        let value = revision.map_or(-1, |r| i64::try_from(r).unwrap_or(i64::MAX));
        self.series.single.published_revision.set(value);
    }

    pub(crate) fn set_state(&self, state: State) {
        lock(&self.condition).state = state;
        for each in State::ALL {
            let value = i64::from(each == state);
            self.series
                .state
                .get_or_create(&[("state", each.as_str())])
                .set(value);
        }
        let connected = matches!(state, State::Listing | State::Watching);
        self.series.single.connected.set(i64::from(connected));
    }

    pub(crate) fn session_ended(&self, cause: &'static str, error: String) {
        self.series
            .watch_restarts
            .get_or_create(&[("cause", cause)])
            .inc();
        self.series.single.reconnects.inc();
        lock(&self.condition).last_error = Some(error);
    }

    /// A snapshot was renamed into place; `took` from the start of building it.
    pub(crate) fn published(&self, revision: u64, took: Duration) {
        self.set_published_revision(Some(revision));
        self.series.single.snapshot_writes.inc();
        self.series.publication_duration.observe(took.as_secs_f64());
        lock(&self.condition).write_error = None;
    }

    pub(crate) fn report_written(&self) {
        self.series.single.report_writes.inc();
    }

    pub(crate) fn report_failed(&self) {
        self.series.single.report_failures.inc();
    }

    /// The report was written again after someone else deleted or overwrote it.
    pub(crate) fn report_healed(&self) {
        self.series.single.report_heals.inc();
    }

    /// Another agent instance wrote this node's report.
    pub(crate) fn report_conflict_seen(&self) {
        self.series.single.report_conflicts.inc();
    }

    /// The conflict over this node's report, while there is one (`/healthz` names it).
    pub(crate) fn set_report_conflict(&self, conflict: Option<String>) {
        let value = i64::from(conflict.is_some());
        lock(&self.condition).report_conflict = conflict;
        self.series.single.report_conflict.set(value);
    }

    /// The time from receiving a watch response to renaming its snapshot into place.
    pub(crate) fn event_to_rename(&self, took: Duration) {
        self.series.event_to_rename.observe(took.as_secs_f64());
        self.series
            .single
            .last_event_to_rename
            .set(took.as_secs_f64());
    }

    pub(crate) fn write_failed(&self, error: String) {
        self.series.single.snapshot_write_errors.inc();
        lock(&self.condition).write_error = Some(error);
    }

    pub(crate) fn mirrored(&self, revision: u64, keys: usize, unrepresentable: usize) {
        let single = &self.series.single;
        single
            .mirror_revision
            .set(i64::try_from(revision).unwrap_or(i64::MAX));
        single.keys.set(level(keys));
        single.unrepresentable_keys.set(level(unrepresentable));
    }

    pub(crate) fn untrusted_snapshot_replaced(&self) {
        self.series.single.untrusted_snapshot_replaced.inc();
    }

    /// An idle metrics connection closed to make room for a new one.
    pub(crate) fn metrics_connection_evicted(&self) {
        self.series.single.metrics_connections_evicted.inc();
    }

    /// A metrics connection closed at once: every slot was busy answering.
    pub(crate) fn metrics_connection_refused(&self) {
        self.series.single.metrics_connections_refused.inc();
    }

    /// A watch response's change waits for the coalescing window's end.
    pub(crate) fn coalesced(&self) {
        self.series.single.coalesced_changes.inc();
    }

    /// A silent watch was checked with a read, which showed nothing it had missed.
    pub(crate) fn silent_watch_confirmed(&self) {
        self.series.single.silent_watch_checks.inc();
        self.response_received();
    }

    pub(crate) fn stale_events(&self, count: usize) {
        self.series.single.stale_events.inc_by(count as u64);
    }

    /// Any response from etcd on the watch (events or progress): the watch is alive.
    pub(crate) fn response_received(&self) {
        self.last_response.store(self.now_mark(), Ordering::Relaxed);
    }

    /// New state from etcd (a list, or a watch response with events).
    pub(crate) fn event_received(&self) {
        let mark = self.now_mark();
        self.last_event.store(mark, Ordering::Relaxed);
        self.last_response.store(mark, Ordering::Relaxed);
    }

    /// These metrics, serving the answer counters of `dir` under `node` as well
    /// (`--answers-dir`; docs/traffic.md).
    pub(crate) fn with_answers(mut self, dir: std::path::PathBuf, node: String) -> Metrics {
        self.series.add_answers(dir, node);
        self
    }

    /// The Prometheus text of every series, at most [`MAX_RENDER_BYTES`] (the rest cut and
    /// counted); the ones that follow the clock are set first.
    pub(crate) fn render(&self) -> String {
        let single = &self.series.single;
        let seconds = |mark: &AtomicU64| {
            self.since(mark)
                .unwrap_or_else(|| self.started.elapsed())
                .as_secs_f64()
        };
        single
            .seconds_since_last_event
            .set(seconds(&self.last_event));
        single
            .seconds_since_last_response
            .set(seconds(&self.last_response));
        single.healthy.set(i64::from(self.health().is_ok()));
        let (text, cut) = self.series.encode(MAX_RENDER_BYTES);
        if cut {
            single.metrics_render_cuts.inc();
        }
        text
    }

    /// A scrape was answered with the newest render again (`metrics/http.rs`).
    pub(crate) fn render_reused(&self) {
        self.series.single.metrics_renders_reused.inc();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn health_follows_state_holds_and_write_errors() {
        let metrics = Metrics::new(Duration::from_secs(60), None);
        assert_eq!(metrics.health(), Err("starting".into()));
        metrics.set_endpoint("http://e1");
        metrics.set_state(State::Watching);
        assert!(metrics.health().unwrap_err().contains("silent"));
        metrics.response_received();
        assert_eq!(metrics.health(), Ok(()));
        metrics.set_hold(Some("no regions".into()));
        assert_eq!(metrics.health(), Err("no regions".into()));
        metrics.set_hold(None);
        metrics.write_failed("disk full".into());
        assert!(metrics.health().unwrap_err().contains("disk full"));
        metrics.published(7, Duration::ZERO);
        assert_eq!(metrics.health(), Ok(()));
        metrics.session_ended("stalled", "silence".into());
        metrics.set_state(State::BackingOff);
        assert!(metrics.health().unwrap_err().contains("silence"));
    }

    #[test]
    fn renders_every_series() {
        let metrics = Metrics::new(Duration::from_secs(60), Some(41));
        metrics.published(42, Duration::from_millis(3));
        metrics.session_ended("compacted", "x".into());
        metrics.set_report_conflict(Some("node report conflict".into()));
        let text = metrics.render();
        for line in [
            "# TYPE dw_agent_published_revision gauge",
            "dw_agent_published_revision 42",
            "# TYPE dw_agent_snapshot_writes_total counter",
            "dw_agent_snapshot_writes_total 1",
            "dw_agent_snapshot_write_errors_total 0",
            "dw_agent_reconnects_total 1",
            "dw_agent_watch_restarts_total{cause=\"compacted\"} 1",
            "dw_agent_watch_restarts_total{cause=\"stalled\"} 0",
            "dw_agent_connected 0",
            "dw_agent_healthy 0",
            "dw_agent_state{state=\"starting\"} 1",
            "dw_agent_report_writes_total 0",
            "dw_agent_report_failures_total 0",
            "dw_agent_report_heals_total 0",
            "dw_agent_report_conflicts_total 0",
            "dw_agent_report_conflict 1",
            "# TYPE dw_agent_event_to_rename_seconds histogram",
            "dw_agent_event_to_rename_seconds_count 0",
            "dw_agent_publication_duration_seconds_count 1",
            "dw_agent_publication_duration_seconds_bucket{le=\"0.0025\"} 0",
            "dw_agent_publication_duration_seconds_bucket{le=\"0.005\"} 1",
            "dw_agent_publication_duration_seconds_bucket{le=\"+Inf\"} 1",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(text.contains("\ndw_agent_seconds_since_last_event "));
        let fresh = Metrics::new(Duration::from_secs(60), None);
        assert!(
            fresh
                .render()
                .contains("\ndw_agent_published_revision -1\n")
        );
        metrics.set_state(State::Watching);
        metrics.response_received();
        metrics.set_report_conflict(None);
        let text = metrics.render();
        for line in [
            "dw_agent_state{state=\"starting\"} 0",
            "dw_agent_state{state=\"watching\"} 1",
            "dw_agent_connected 1",
            "dw_agent_healthy 1",
            "dw_agent_report_conflict 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    /// A quiet agent has every labelled series, at zero: dashboards and `rate()` need them.
    #[test]
    fn every_label_value_is_served_from_the_start() {
        let text = Metrics::new(Duration::from_secs(60), None).render();
        for cause in CAUSES {
            let line = format!("dw_agent_watch_restarts_total{{cause=\"{cause}\"}} 0");
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        for state in State::ALL {
            let value = u8::from(state == State::Starting);
            let line = format!("dw_agent_state{{state=\"{}\"}} {value}", state.as_str());
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
    }

    /// `(name, type, label names)` of every metric in the text: from its `# TYPE` line and
    /// the labels of its samples (a histogram's `le` left out).
    fn served(text: &str) -> BTreeSet<(String, String, String)> {
        let mut served = BTreeSet::new();
        for line in text.lines() {
            let Some(typed) = line.strip_prefix("# TYPE ") else {
                continue;
            };
            let (name, kind) = typed.split_once(' ').unwrap();
            let mut labels = BTreeSet::new();
            for sample in text.lines().filter(|l| !l.starts_with('#')) {
                let series = sample.split(' ').next().unwrap();
                let (sample_name, rest) = series.split_once('{').unwrap_or((series, ""));
                let base = sample_name
                    .strip_suffix("_bucket")
                    .or_else(|| sample_name.strip_suffix("_sum"))
                    .or_else(|| sample_name.strip_suffix("_count"))
                    .filter(|_| kind == "histogram")
                    .unwrap_or(sample_name);
                if base != name {
                    continue;
                }
                for pair in rest
                    .trim_end_matches('}')
                    .split(',')
                    .filter(|p| !p.is_empty())
                {
                    let key = pair.split_once('=').unwrap().0;
                    if key != "le" {
                        labels.insert(key.to_owned());
                    }
                }
            }
            let labels = labels.into_iter().collect::<Vec<_>>().join(",");
            served.insert((name.to_owned(), kind.to_owned(), labels));
        }
        served
    }

    /// docs/agent.md's table of metrics is exactly what `/metrics` serves: names, types
    /// and label names.
    #[test]
    fn the_docs_table_lists_every_metric_served() {
        let docs = include_str!("../../../docs/agent.md");
        let table = docs
            .split("\n## Metrics (`GET /metrics`)\n")
            .nth(1)
            .expect("docs/agent.md has its Metrics section")
            .split("\n## ")
            .next()
            .unwrap();
        let documented: BTreeSet<(String, String, String)> = table
            .lines()
            .filter_map(|row| row.strip_prefix("| `"))
            .map(|row| {
                let (metric, rest) = row.split_once("` | ").unwrap();
                let kind = rest.split(" | ").next().unwrap();
                let (name, labels) = metric.split_once('{').unwrap_or((metric, ""));
                let labels = labels.trim_end_matches('}');
                (name.to_owned(), kind.to_owned(), labels.to_owned())
            })
            .collect();
        let served = served(&Metrics::new(Duration::from_secs(60), None).render());
        assert!(served.len() > 20, "{served:?}");
        let undocumented: Vec<_> = served.difference(&documented).collect();
        let not_served: Vec<_> = documented.difference(&served).collect();
        assert!(
            undocumented.is_empty() && not_served.is_empty(),
            "served but not in docs/agent.md: {undocumented:?}\n\
             in docs/agent.md but not served: {not_served:?}"
        );
    }
}
