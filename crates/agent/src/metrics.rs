//! The agent's counters and state, shared between the watch loop (which updates them) and
//! the HTTP endpoint (which renders them as Prometheus text and as a health verdict).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::metric_help::single_valued_help;

/// What the agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Started, no connection attempted yet.
    Starting,
    /// Connecting to an endpoint.
    Connecting,
    /// Reading the whole prefix at one revision.
    Listing,
    /// Following the watch; the snapshot is current.
    Watching,
    /// Waiting before the next attempt after a failure.
    BackingOff,
}

impl State {
    /// The state's name in `/metrics` (`dw_agent_state{state=...}`) and the logs.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Connecting => "connecting",
            State::Listing => "listing",
            State::Watching => "watching",
            State::BackingOff => "backing_off",
        }
    }

    const ALL: [State; 5] = [
        State::Starting,
        State::Connecting,
        State::Listing,
        State::Watching,
        State::BackingOff,
    ];
}

/// A point-in-time copy of the agent's status.
#[derive(Debug, Clone)]
pub struct Status {
    /// What the agent is doing.
    pub state: State,
    /// The endpoint of the current (or last) session.
    pub endpoint: Option<String>,
    /// Revision of the published snapshot file, if there is one.
    pub published_revision: Option<u64>,
    /// Revision the in-memory state reflects.
    pub mirror_revision: u64,
    /// Snapshot files published (renamed into place) since start.
    pub snapshot_writes: u64,
    /// Failed attempts to publish the snapshot file since start.
    pub write_errors: u64,
    /// Sessions with etcd that ended and were retried since start.
    pub reconnects: u64,
    /// Watch restarts by cause (`connect`, `list`, `compacted`, `no_leader`, `watch`, `stalled`).
    pub restarts: BTreeMap<&'static str, u64>,
    /// `Ok` when connected and current, otherwise why not (what `/healthz` says).
    pub health: Result<(), String>,
}

/// A handle on the running agent's status; cheap to clone.
#[derive(Debug, Clone)]
pub struct StatusHandle(pub(crate) Arc<Metrics>);

impl StatusHandle {
    /// The status as it is now.
    pub fn get(&self) -> Status {
        self.0.status()
    }

    /// The Prometheus text `/metrics` serves.
    pub fn render_metrics(&self) -> String {
        self.0.render()
    }
}

#[derive(Debug)]
struct Condition {
    state: State,
    endpoint: Option<String>,
    /// Why the current state is not being published (rules), if it is not.
    hold: Option<String>,
    /// The last write error, until a write succeeds.
    write_error: Option<String>,
    /// Why the readers (dw_router) refuse the published file under their trust rules,
    /// while they do.
    refused_by_readers: Option<String>,
    /// The error that ended the last session.
    last_error: Option<String>,
    /// Another agent instance writes this node's report, while it does (see `heal.rs`).
    report_conflict: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Metrics {
    started: Instant,
    stall_timeout: Duration,
    /// Published revision plus one; zero when nothing is published.
    published_revision: AtomicU64,
    mirror_revision: AtomicU64,
    keys: AtomicU64,
    unrepresentable_keys: AtomicU64,
    snapshot_writes: AtomicU64,
    write_errors: AtomicU64,
    reconnects: AtomicU64,
    stale_events: AtomicU64,
    silent_watch_checks: AtomicU64,
    untrusted_replaced: AtomicU64,
    metrics_evicted: AtomicU64,
    metrics_refused: AtomicU64,
    coalesced: AtomicU64,
    /// Milliseconds since `started` plus one; zero for never.
    last_event: AtomicU64,
    last_response: AtomicU64,
    report_writes: AtomicU64,
    report_failures: AtomicU64,
    pub(crate) purge: Arc<crate::purge_counters::PurgeCounters>,
    report_heals: AtomicU64,
    report_conflicts: AtomicU64,
    /// Watch event received → snapshot renamed: microseconds, total and last.
    event_to_rename_micros_sum: AtomicU64,
    event_to_rename_count: AtomicU64,
    event_to_rename_last_micros: AtomicU64,
    restarts: Mutex<BTreeMap<&'static str, u64>>,
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

impl Metrics {
    pub(crate) fn new(stall_timeout: Duration, published_revision: Option<u64>) -> Metrics {
        Metrics {
            started: Instant::now(),
            stall_timeout,
            published_revision: AtomicU64::new(published_revision.map_or(0, |r| r + 1)),
            mirror_revision: AtomicU64::new(0),
            keys: AtomicU64::new(0),
            unrepresentable_keys: AtomicU64::new(0),
            snapshot_writes: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            stale_events: AtomicU64::new(0),
            silent_watch_checks: AtomicU64::new(0),
            untrusted_replaced: AtomicU64::new(0),
            metrics_evicted: AtomicU64::new(0),
            metrics_refused: AtomicU64::new(0),
            coalesced: AtomicU64::new(0),
            last_event: AtomicU64::new(0),
            last_response: AtomicU64::new(0),
            report_writes: AtomicU64::new(0),
            report_failures: AtomicU64::new(0),
            purge: Arc::default(),
            report_heals: AtomicU64::new(0),
            report_conflicts: AtomicU64::new(0),
            event_to_rename_micros_sum: AtomicU64::new(0),
            event_to_rename_count: AtomicU64::new(0),
            event_to_rename_last_micros: AtomicU64::new(0),
            restarts: Mutex::new(CAUSES.iter().map(|c| (*c, 0)).collect()),
            condition: Mutex::new(Condition {
                state: State::Starting,
                endpoint: None,
                hold: None,
                refused_by_readers: None,
                write_error: None,
                last_error: None,
                report_conflict: None,
            }),
        }
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

    pub(crate) fn set_state(&self, state: State) {
        lock(&self.condition).state = state;
    }

    pub(crate) fn set_endpoint(&self, endpoint: &str) {
        lock(&self.condition).endpoint = Some(endpoint.to_owned());
    }

    /// Why readers refuse the published file (None: they take it).
    pub(crate) fn set_refused_by_readers(&self, reason: Option<String>) {
        lock(&self.condition).refused_by_readers = reason;
    }

    pub(crate) fn set_hold(&self, hold: Option<String>) {
        lock(&self.condition).hold = hold;
    }

    pub(crate) fn session_ended(&self, cause: &'static str, error: String) {
        *lock(&self.restarts).entry(cause).or_insert(0) += 1;
        self.reconnects.fetch_add(1, Ordering::Relaxed);
        lock(&self.condition).last_error = Some(error);
    }

    pub(crate) fn published(&self, revision: u64) {
        self.published_revision
            .store(revision + 1, Ordering::Relaxed);
        self.snapshot_writes.fetch_add(1, Ordering::Relaxed);
        lock(&self.condition).write_error = None;
    }

    pub(crate) fn report_written(&self) {
        self.report_writes.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn report_failed(&self) {
        self.report_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// The report was written again after someone else deleted or overwrote it.
    pub(crate) fn report_healed(&self) {
        self.report_heals.fetch_add(1, Ordering::Relaxed);
    }

    /// Another agent instance wrote this node's report.
    pub(crate) fn report_conflict_seen(&self) {
        self.report_conflicts.fetch_add(1, Ordering::Relaxed);
    }

    /// The conflict over this node's report, while there is one (`/healthz` names it).
    pub(crate) fn set_report_conflict(&self, conflict: Option<String>) {
        lock(&self.condition).report_conflict = conflict;
    }

    /// The time from receiving a watch response to renaming its snapshot into place.
    pub(crate) fn event_to_rename(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.event_to_rename_micros_sum
            .fetch_add(micros, Ordering::Relaxed);
        self.event_to_rename_count.fetch_add(1, Ordering::Relaxed);
        self.event_to_rename_last_micros
            .store(micros, Ordering::Relaxed);
    }

    /// The last session error and the reason the state is not published, for the report.
    pub(crate) fn stale_reason(&self) -> Option<String> {
        let condition = lock(&self.condition);
        if let Some(error) = &condition.write_error {
            return Some(format!("cannot write the snapshot: {error}"));
        }
        if let Some(reason) = &condition.refused_by_readers {
            return Some(format!("readers refuse the snapshot: {reason}"));
        }
        condition.hold.clone()
    }

    pub(crate) fn write_failed(&self, error: String) {
        self.write_errors.fetch_add(1, Ordering::Relaxed);
        lock(&self.condition).write_error = Some(error);
    }

    pub(crate) fn mirrored(&self, revision: u64, keys: usize, unrepresentable: usize) {
        self.mirror_revision.store(revision, Ordering::Relaxed);
        self.keys.store(keys as u64, Ordering::Relaxed);
        self.unrepresentable_keys
            .store(unrepresentable as u64, Ordering::Relaxed);
    }

    pub(crate) fn untrusted_snapshot_replaced(&self) {
        self.untrusted_replaced.fetch_add(1, Ordering::Relaxed);
    }

    /// An idle metrics connection closed to make room for a new one.
    pub(crate) fn metrics_connection_evicted(&self) {
        self.metrics_evicted.fetch_add(1, Ordering::Relaxed);
    }

    /// A metrics connection closed at once: every slot was busy answering.
    pub(crate) fn metrics_connection_refused(&self) {
        self.metrics_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// A watch response's change waits for the coalescing window's end.
    pub(crate) fn coalesced(&self) {
        self.coalesced.fetch_add(1, Ordering::Relaxed);
    }

    /// A silent watch was checked with a read, which showed nothing it had missed.
    pub(crate) fn silent_watch_confirmed(&self) {
        self.silent_watch_checks.fetch_add(1, Ordering::Relaxed);
        self.response_received();
    }

    pub(crate) fn stale_events(&self, count: usize) {
        self.stale_events.fetch_add(count as u64, Ordering::Relaxed);
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

    pub(crate) fn health(&self) -> Result<(), String> {
        let condition = lock(&self.condition);
        if let Some(error) = &condition.write_error {
            return Err(format!("cannot write the snapshot: {error}"));
        }
        if let Some(reason) = &condition.refused_by_readers {
            return Err(format!("readers refuse the snapshot: {reason}"));
        }
        if let Some(conflict) = &condition.report_conflict {
            return Err(conflict.clone());
        }
        if let Some(hold) = &condition.hold {
            return Err(hold.clone());
        }
        let endpoint = condition.endpoint.as_deref().unwrap_or("-");
        match condition.state {
            State::Watching => match self.since(&self.last_response) {
                Some(silence) if silence <= self.stall_timeout => Ok(()),
                _ => Err(format!("watch at {endpoint} has been silent for too long")),
            },
            State::Starting => Err("starting".into()),
            State::Connecting => Err(format!("connecting to {endpoint}")),
            State::Listing => Err(format!("listing the prefix at {endpoint}")),
            State::BackingOff => Err(format!(
                "backing off after: {}",
                condition.last_error.as_deref().unwrap_or("an error")
            )),
        }
    }

    pub(crate) fn status(&self) -> Status {
        let condition = lock(&self.condition);
        let status = Status {
            state: condition.state,
            endpoint: condition.endpoint.clone(),
            published_revision: self
                .published_revision
                .load(Ordering::Relaxed)
                .checked_sub(1),
            mirror_revision: self.mirror_revision.load(Ordering::Relaxed),
            snapshot_writes: self.snapshot_writes.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            reconnects: self.reconnects.load(Ordering::Relaxed),
            restarts: lock(&self.restarts).clone(),
            health: Ok(()),
        };
        drop(condition);
        Status {
            health: self.health(),
            ..status
        }
    }

    /// The Prometheus text exposition of every metric.
    pub(crate) fn render(&self) -> String {
        let status = self.status();
        let mut out = String::with_capacity(2048);
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed).to_string();
        let micros = |atomic: &AtomicU64| atomic.load(Ordering::Relaxed) as f64 / 1e6;
        let seconds = |mark: &AtomicU64| {
            self.since(mark)
                .unwrap_or_else(|| self.started.elapsed())
                .as_secs_f64()
                .to_string()
        };
        let published = status
            .published_revision
            .map_or("-1".to_owned(), |r| r.to_string());
        let last_event_to_rename = micros(&self.event_to_rename_last_micros).to_string();
        let connected = matches!(status.state, State::Listing | State::Watching);
        let single_valued = [
            ("dw_agent_published_revision", published),
            (
                "dw_agent_mirror_revision",
                status.mirror_revision.to_string(),
            ),
            ("dw_agent_keys", load(&self.keys)),
            (
                "dw_agent_unrepresentable_keys",
                load(&self.unrepresentable_keys),
            ),
            (
                "dw_agent_snapshot_writes_total",
                status.snapshot_writes.to_string(),
            ),
            (
                "dw_agent_snapshot_write_errors_total",
                status.write_errors.to_string(),
            ),
            ("dw_agent_reconnects_total", status.reconnects.to_string()),
            ("dw_agent_stale_events_total", load(&self.stale_events)),
            (
                "dw_agent_silent_watch_checks_total",
                load(&self.silent_watch_checks),
            ),
            (
                "dw_agent_untrusted_snapshot_replaced_total",
                load(&self.untrusted_replaced),
            ),
            (
                "dw_agent_metrics_connections_evicted_total",
                load(&self.metrics_evicted),
            ),
            (
                "dw_agent_metrics_connections_refused_total",
                load(&self.metrics_refused),
            ),
            ("dw_agent_coalesced_changes_total", load(&self.coalesced)),
            ("dw_agent_report_writes_total", load(&self.report_writes)),
            (
                "dw_agent_report_failures_total",
                load(&self.report_failures),
            ),
            ("dw_agent_report_heals_total", load(&self.report_heals)),
            (
                "dw_agent_report_conflicts_total",
                load(&self.report_conflicts),
            ),
            (
                "dw_agent_report_conflict",
                u8::from(lock(&self.condition).report_conflict.is_some()).to_string(),
            ),
            (
                "dw_agent_last_event_to_rename_seconds",
                last_event_to_rename,
            ),
            (
                "dw_agent_seconds_since_last_event",
                seconds(&self.last_event),
            ),
            (
                "dw_agent_seconds_since_last_response",
                seconds(&self.last_response),
            ),
            ("dw_agent_connected", u8::from(connected).to_string()),
            (
                "dw_agent_healthy",
                u8::from(status.health.is_ok()).to_string(),
            ),
        ];
        for (name, value) in single_valued {
            let (kind, help) = single_valued_help(name);
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            );
        }
        self.purge.render(&mut out);
        out.push_str(
            "# HELP dw_agent_watch_restarts_total Sessions ended, by cause.\n\
             # TYPE dw_agent_watch_restarts_total counter\n",
        );
        for (cause, count) in &status.restarts {
            let _ = writeln!(
                out,
                "dw_agent_watch_restarts_total{{cause=\"{cause}\"}} {count}"
            );
        }
        out.push_str(
            "# HELP dw_agent_state The agent's current state (1 for the current one).\n\
             # TYPE dw_agent_state gauge\n",
        );
        for state in State::ALL {
            let value = u8::from(state == status.state);
            let _ = writeln!(
                out,
                "dw_agent_state{{state=\"{}\"}} {value}",
                state.as_str()
            );
        }
        let _ = write!(
            out,
            "# HELP dw_agent_event_to_rename_seconds From a watch response's arrival to the rename of its snapshot.\n\
             # TYPE dw_agent_event_to_rename_seconds summary\n\
             dw_agent_event_to_rename_seconds_sum {}\n\
             dw_agent_event_to_rename_seconds_count {}\n",
            micros(&self.event_to_rename_micros_sum),
            self.event_to_rename_count.load(Ordering::Relaxed)
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric_help::SINGLE_VALUED;

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
        metrics.published(7);
        assert_eq!(metrics.health(), Ok(()));
        metrics.session_ended("stalled", "silence".into());
        metrics.set_state(State::BackingOff);
        assert!(metrics.health().unwrap_err().contains("silence"));
    }

    #[test]
    fn renders_every_series() {
        let metrics = Metrics::new(Duration::from_secs(60), Some(41));
        metrics.published(42);
        metrics.session_ended("compacted", "x".into());
        let text = metrics.render();
        for line in [
            "dw_agent_published_revision 42",
            "dw_agent_snapshot_writes_total 1",
            "dw_agent_snapshot_write_errors_total 0",
            "dw_agent_reconnects_total 1",
            "dw_agent_watch_restarts_total{cause=\"compacted\"} 1",
            "dw_agent_watch_restarts_total{cause=\"stalled\"} 0",
            "dw_agent_connected 0",
            "dw_agent_state{state=\"starting\"} 1",
            "dw_agent_report_writes_total 0",
            "dw_agent_report_failures_total 0",
            "dw_agent_report_heals_total 0",
            "dw_agent_report_conflicts_total 0",
            "dw_agent_report_conflict 0",
            "dw_agent_event_to_rename_seconds_count 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing {line:?} in\n{text}"
            );
        }
        assert!(text.contains("dw_agent_seconds_since_last_event "));
        let fresh = Metrics::new(Duration::from_secs(60), None);
        assert!(fresh.render().contains("dw_agent_published_revision -1\n"));
    }

    #[test]
    fn every_single_valued_metric_has_its_help_and_type() {
        let text = Metrics::new(Duration::from_secs(60), None).render();
        for line in SINGLE_VALUED.lines() {
            let (name, rest) = line.split_once(' ').unwrap();
            let (kind, help) = rest.split_once(' ').unwrap();
            assert!(
                text.contains(&format!(
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} "
                )),
                "{name}"
            );
        }
        assert_eq!(
            text.matches("# TYPE ").count(),
            SINGLE_VALUED.lines().count() + 3
        );
    }
}
