//! The agent's status, split from its series: what it is doing ([`State`]), why it is not
//! current (the condition behind `/healthz` and the heartbeat's `reason`), and the
//! [`Status`] copy handed out through [`StatusHandle`]. The counters the status shows are
//! the series' own (one value, two views).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::metrics::{CAUSES, Metrics, lock};

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

    pub(super) const ALL: [State; 5] = [
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
pub(super) struct Condition {
    pub(super) state: State,
    pub(super) endpoint: Option<String>,
    /// Why the current state is not being published (rules), if it is not.
    pub(super) hold: Option<String>,
    /// The last write error, until a write succeeds.
    pub(super) write_error: Option<String>,
    /// Why the readers (dw_router) refuse the published file under their trust rules,
    /// while they do.
    pub(super) refused_by_readers: Option<String>,
    /// The error that ended the last session.
    pub(super) last_error: Option<String>,
    /// Another agent instance writes this node's report, while it does (see `heal.rs`).
    pub(super) report_conflict: Option<String>,
}

impl Metrics {
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
        let single = &self.series.single;
        let (state, endpoint) = {
            let condition = lock(&self.condition);
            (condition.state, condition.endpoint.clone())
        };
        Status {
            state,
            endpoint,
            published_revision: u64::try_from(single.published_revision.get()).ok(),
            mirror_revision: u64::try_from(single.mirror_revision.get()).unwrap_or(0),
            snapshot_writes: single.snapshot_writes.get(),
            write_errors: single.snapshot_write_errors.get(),
            reconnects: single.reconnects.get(),
            restarts: CAUSES
                .iter()
                .map(|&cause| {
                    let count = self
                        .series
                        .watch_restarts
                        .get_or_create(&[("cause", cause)])
                        .get();
                    (cause, count)
                })
                .collect(),
            health: self.health(),
        }
    }
}
