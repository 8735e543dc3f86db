//! What the autopilot holds, published: the leader's status value
//! (`<control>autopilot/status`, `Layout::autopilot_status`), which `dwctl traffic` and
//! `dwctl origin list` show beside each origin.
//!
//! The streaks and timers live in the leading process ([`super::law::Memory`]); this is
//! their visible part. The leader writes it on its lease (so it vanishes with the leader),
//! fenced on its leader key like every write, and only when it changes: every field is a
//! state and the time it began, never a figure that moves each evaluation (the measured
//! loads are on the daemon's `--metrics`). [`status`] builds it from an evaluation,
//! [`AutopilotStatus::parse`] reads it back, [`header_line`] and [`origin_line`] word it
//! (every value from etcd escaped).
//!
//! Bounded: at most [`STATUS_ORIGINS`] origins are listed (those held or over target
//! first), each text at most [`STATUS_TEXT_CHARS`] characters, and the value at most
//! [`STATUS_BYTES`] bytes; the origins left out are counted (`origins_left_out`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::law::{ActionKind, Decision, Memory, RecordOf};
use crate::clock::rfc3339_from_unix;
use crate::model::State;
use crate::shown::Shown;

/// The most origins a status lists.
pub const STATUS_ORIGINS: usize = 64;
/// The most bytes of a status value (its JSON text): origins are left out until it fits.
pub const STATUS_BYTES: usize = 16_384;
/// The most characters of one text in a status (an identity, a hold's why, an origin's
/// name: an origin whose name is longer is left out).
pub const STATUS_TEXT_CHARS: usize = 240;

/// The status value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutopilotStatus {
    /// The leader's identity (`--identity`).
    pub leader: String,
    /// When it began to lead, RFC 3339.
    pub leading_since: String,
    /// Why the rate source is unusable, when it is (fail static: nothing acts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blind: Option<Since>,
    /// Every origin that could take load is over target (`DwFleetOverTarget`).
    #[serde(default)]
    pub fleet_over_target: bool,
    /// By origin: only the origins with something to say.
    #[serde(default)]
    pub origins: BTreeMap<String, OriginStatus>,
    /// Origins with something to say that the bounds left out.
    #[serde(default)]
    pub origins_left_out: usize,
}

/// A state's text and when it began.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Since {
    /// What (a hold's why, a blind source's why).
    pub why: String,
    /// When it began, RFC 3339.
    pub since: String,
}

/// What the autopilot holds on one origin.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginStatus {
    /// Since when it holds a shed of its own on the origin (its drain record's `at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relieving_since: Option<String>,
    /// Why it does not act on the origin, since when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holding: Option<Since>,
    /// The hold's metric label (`min_interval`, `other_source`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_reason: Option<String>,
    /// Since when the origin is measured above target (the over-target streak).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub over_target_since: Option<String>,
    /// The earliest time of its next action (`--min-interval` after the last), when later
    /// than now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_action_at: Option<String>,
}

impl OriginStatus {
    fn is_empty(&self) -> bool {
        *self == OriginStatus::default()
    }

    /// Held or over target: listed before the rest when the bound bites.
    fn pressing(&self) -> bool {
        self.holding.is_some() || self.over_target_since.is_some()
    }
}

impl AutopilotStatus {
    /// Parses a stored status (`Err`: why it does not parse).
    pub fn parse(raw: &str) -> Result<AutopilotStatus, String> {
        serde_json::from_str(raw).map_err(|error| error.to_string())
    }

    /// The JSON text written.
    pub fn to_text(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One evaluation, as the leader saw it.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// The leader's identity.
    pub leader: &'a str,
    /// When it began to lead, RFC 3339.
    pub leading_since: &'a str,
    /// The Unix time (seconds) of the law's clock's zero: every time written is this plus
    /// a time on the law's clock, so that a time does not wobble by a second between two
    /// evaluations (and rewrite the status).
    pub clock_origin_unix: u64,
    /// Now on the law's clock ([`super::law::World::now`]).
    pub now: u64,
    /// `--min-interval`, seconds.
    pub min_interval: u64,
    /// The law's memory after the evaluation.
    pub memory: &'a Memory,
    /// The evaluation's decision.
    pub decision: &'a Decision,
    /// The drain records as the law read them.
    pub records: &'a BTreeMap<String, RecordOf>,
    /// The state read (for the autopilot's own records' `at`).
    pub state: &'a State,
}

/// `text` cut to [`STATUS_TEXT_CHARS`] characters (an ellipsis marks a cut).
fn bounded(text: &str) -> String {
    if text.chars().count() <= STATUS_TEXT_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(STATUS_TEXT_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// The status after an evaluation; `previous` (the last one published) keeps the `since`
/// of every state that has not changed, so that an unchanged fleet gives an equal value
/// and nothing is written.
pub fn status(observed: &Observed<'_>, previous: Option<&AutopilotStatus>) -> AutopilotStatus {
    let unix = |at: u64| rfc3339_from_unix(observed.clock_origin_unix.saturating_add(at));
    let now_text = unix(observed.now);
    let before = |origin: &str| previous.and_then(|status| status.origins.get(origin));
    let mut origins: BTreeMap<String, OriginStatus> = BTreeMap::new();
    let mut blind = None;
    for hold in &observed.decision.holds {
        let why = bounded(&hold.reason.to_string());
        if hold.origin.is_empty() {
            let since = previous
                .and_then(|status| status.blind.as_ref())
                .filter(|was| was.why == why)
                .map_or_else(|| now_text.clone(), |was| was.since.clone());
            blind = Some(Since { why, since });
            continue;
        }
        let entry = origins.entry(hold.origin.clone()).or_default();
        if entry.holding.is_some() {
            continue;
        }
        let since = before(&hold.origin)
            .and_then(|was| was.holding.as_ref())
            .filter(|was| was.why == why)
            .map_or_else(|| now_text.clone(), |was| was.since.clone());
        entry.holding = Some(Since { why, since });
        entry.hold_reason = Some(hold.reason.label().to_owned());
    }
    for origin in &observed.decision.over_target {
        let since = before(origin)
            .and_then(|was| was.over_target_since.clone())
            .unwrap_or_else(|| now_text.clone());
        origins.entry(origin.clone()).or_default().over_target_since = Some(since);
    }
    for (origin, record) in observed.records {
        if let RecordOf::Own(_) = record {
            let at = match observed.state.drain_record(origin) {
                Ok(Some(record)) => bounded(&record.at),
                _ => now_text.clone(),
            };
            origins.entry(origin.clone()).or_default().relieving_since = Some(at);
        }
    }
    // This evaluation's action, before its record is read back.
    if let Some(action) = &observed.decision.action {
        let entry = origins.entry(action.origin.clone()).or_default();
        match action.kind {
            ActionKind::Relieve | ActionKind::RelieveAtCeiling => {
                if entry.relieving_since.is_none() {
                    entry.relieving_since = Some(now_text.clone());
                }
            }
            ActionKind::GiveBackAll => entry.relieving_since = None,
            ActionKind::GiveBackStep => {}
        }
    }
    for (origin, memory) in &observed.memory.origins {
        let next = memory
            .last_action
            .map(|at| at.saturating_add(observed.min_interval))
            .filter(|next| *next > observed.now);
        if let Some(next) = next {
            origins.entry(origin.clone()).or_default().next_action_at = Some(unix(next));
        }
    }
    origins.retain(|_, entry| !entry.is_empty());
    let mut status = AutopilotStatus {
        leader: bounded(observed.leader),
        leading_since: bounded(observed.leading_since),
        blind,
        fleet_over_target: observed.decision.fleet_over_target,
        origins: BTreeMap::new(),
        origins_left_out: 0,
    };
    bound(&mut status, origins);
    status
}

/// Lists `origins` in `status` within the bounds: the held and over-target ones first,
/// then by name; those left out are counted.
fn bound(status: &mut AutopilotStatus, origins: BTreeMap<String, OriginStatus>) {
    let total = origins.len();
    let mut ranked: Vec<(String, OriginStatus)> = origins
        .into_iter()
        .filter(|(name, _)| name.chars().count() <= STATUS_TEXT_CHARS)
        .collect();
    ranked.sort_by(|(a, x), (b, y)| y.pressing().cmp(&x.pressing()).then_with(|| a.cmp(b)));
    ranked.truncate(STATUS_ORIGINS);
    status.origins = ranked.iter().cloned().collect();
    while status.to_text().len() > STATUS_BYTES {
        let Some((name, _)) = ranked.pop() else {
            break;
        };
        status.origins.remove(&name);
    }
    status.origins_left_out = total - status.origins.len();
}

/// What the commands read of the autopilot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum AutopilotView {
    /// No leader key: no autopilot acts.
    NoLeader,
    /// An instance leads.
    Leading {
        /// The leader key's value (its identity).
        leader: String,
        /// Its status; `None` when none is published yet.
        status: Option<AutopilotStatus>,
        /// Why the status value does not parse, when it does not.
        #[serde(skip_serializing_if = "Option::is_none")]
        malformed: Option<String>,
    },
    /// The keys could not be read (a role without the grant, etcd's error).
    Unreadable {
        /// Why.
        why: String,
    },
}

impl AutopilotView {
    /// From the leader key's and the status key's values, as read.
    pub fn from_values(leader: Option<&str>, status: Option<&str>) -> AutopilotView {
        let Some(leader) = leader else {
            return AutopilotView::NoLeader;
        };
        let (status, malformed) = match status.map(AutopilotStatus::parse) {
            None => (None, None),
            Some(Ok(status)) => (Some(status), None),
            Some(Err(why)) => (None, Some(why)),
        };
        AutopilotView::Leading {
            leader: leader.to_owned(),
            status,
            malformed,
        }
    }

    /// The status, when one is published and parses.
    pub fn status(&self) -> Option<&AutopilotStatus> {
        match self {
            AutopilotView::Leading { status, .. } => status.as_ref(),
            _ => None,
        }
    }
}

/// The one line saying who leads and what it sees; every value from etcd escaped.
pub fn header_line(view: &AutopilotView) -> String {
    match view {
        AutopilotView::NoLeader => "autopilot: no instance leads (no autopilot/leader key): \
                                    no origin is relieved automatically"
            .to_owned(),
        AutopilotView::Unreadable { why } => {
            format!("autopilot: its status could not be read: {}", Shown(why))
        }
        AutopilotView::Leading {
            leader,
            status: None,
            malformed,
        } => match malformed {
            Some(why) => format!(
                "autopilot: {} leads; its status does not parse: {}",
                Shown(leader),
                Shown(why)
            ),
            None => format!(
                "autopilot: {} leads; no status published yet",
                Shown(leader)
            ),
        },
        AutopilotView::Leading {
            status: Some(status),
            ..
        } => {
            let mut line = format!(
                "autopilot: {} leads since {}",
                Shown(&status.leader),
                Shown(&status.leading_since)
            );
            match &status.blind {
                Some(blind) => line.push_str(&format!(
                    "; BLIND since {}, nothing acts: {}",
                    Shown(&blind.since),
                    Shown(&blind.why)
                )),
                None if status.origins.is_empty() => line.push_str("; every origin is quiet"),
                None => {}
            }
            if status.fleet_over_target {
                line.push_str("; every origin that could take load is over target");
            }
            if status.origins_left_out > 0 {
                line.push_str(&format!(
                    "; {} origins not listed (at most {STATUS_ORIGINS}, {STATUS_BYTES} bytes)",
                    status.origins_left_out
                ));
            }
            line
        }
    }
}

/// What the autopilot holds on `origin` (`autopilot: relieving since ...; holding (...)
/// since ...`), when anything; every value from etcd escaped.
pub fn origin_line(view: &AutopilotView, origin: &str) -> Option<String> {
    let entry = view.status()?.origins.get(origin)?;
    let mut parts = Vec::new();
    if let Some(since) = &entry.relieving_since {
        parts.push(format!("relieving since {}", Shown(since)));
    }
    if let Some(holding) = &entry.holding {
        parts.push(format!(
            "holding ({}) since {}",
            Shown(&holding.why),
            Shown(&holding.since)
        ));
    }
    if let Some(since) = &entry.over_target_since {
        parts.push(format!("over target since {}", Shown(since)));
    }
    if let Some(at) = &entry.next_action_at {
        parts.push(format!("next action allowed at {}", Shown(at)));
    }
    (!parts.is_empty()).then(|| format!("autopilot: {}", parts.join("; ")))
}

#[cfg(test)]
mod tests;
