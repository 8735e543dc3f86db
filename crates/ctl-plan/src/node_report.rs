//! One node as dwctl judges it from its report (`dw_node_report::NodeReport`): live or
//! gone, believed or not, serving a revision or not. Pure: `crate::ops::fleet` reads the
//! reports and their leases from etcd and fills in what only etcd knows.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::output::Shown;

/// One node's last report.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeReport {
    /// The node id (the key under the nodes prefix).
    pub id: String,
    /// False when only the `-seen/` record is left: the node's lease expired.
    pub live: bool,
    /// The routing revision the node last published; `None` when the report holds none or
    /// one that is no etcd revision (negative, not an integer): shown as `invalid`, never
    /// counted as current.
    pub revision: Option<i64>,
    /// The agent's state (`watching`, `stale`, ...; `unreadable` for a bad report).
    pub state: String,
    /// Why the node is not current, when it says.
    pub reason: Option<String>,
    /// The node's labels, for `--labels`.
    pub labels: BTreeMap<String, String>,
    /// When the node last published, Unix milliseconds.
    pub published_at_ms: Option<u64>,
    /// When the node wrote this report, Unix milliseconds.
    pub reported_at_ms: Option<u64>,
    /// The report as read (`dw_node_report`: every schema, hostile fields as absent).
    pub report: dw_node_report::NodeReport,
    /// The report's JSON as written, echoed by `status --output json` (`reported_revision`,
    /// `rejected`, `version`, `stages`) so that what a node wrote is shown as it wrote it.
    pub raw: Value,
    /// Why this report cannot be believed, when it cannot: it lives on no lease, or on a
    /// lease other than the one it or its seen record names, or it vanished while that
    /// lease lives (`missing`). Such a node counts as lagging, whatever its revision says.
    pub untrusted: Option<String>,
}

impl NodeReport {
    pub(crate) fn parse(id: &str, live: bool, value: &[u8]) -> NodeReport {
        let (raw, report) = match serde_json::from_slice::<Value>(value) {
            Ok(raw) => {
                let report = dw_node_report::NodeReport::from_value(&raw);
                (raw, report)
            }
            Err(error) => {
                let why = dw_node_report::NodeReport::parse(value)
                    .err()
                    .map_or_else(|| error.to_string(), |error| error.to_string());
                let report = dw_node_report::NodeReport {
                    state: Some("unreadable".into()),
                    reason: Some(why),
                    ..dw_node_report::NodeReport::default()
                };
                let raw = json!({"state": report.state, "reason": report.reason});
                (raw, report)
            }
        };
        NodeReport {
            id: id.to_owned(),
            live,
            revision: report.revision.filter(|revision| *revision >= 0),
            state: report.state.clone().unwrap_or_else(|| "unknown".to_owned()),
            reason: report.reason.clone(),
            labels: report.labels.clone(),
            published_at_ms: report.published_at_ms,
            reported_at_ms: report.reported_at_ms,
            report,
            raw,
            untrusted: None,
        }
    }

    /// The lease the report says it lives on (schema 1 on; older reports name none).
    pub(crate) fn named_lease(&self) -> Option<i64> {
        self.report.lease
    }

    /// Whether the node counts as serving `revision`: live, trustworthy, not in conflict
    /// with another agent over its report, and at it.
    pub(crate) fn serves(&self, revision: i64) -> bool {
        self.live && self.untrusted.is_none() && self.state != CONFLICT && is_at(self, revision)
    }

    /// The state shown: `gone`, `missing`, `untrusted`, or what the node reported.
    pub(crate) fn shown_state(&self) -> &str {
        match (&self.untrusted, self.live) {
            (_, false) => "gone",
            (Some(_), _) if self.state == MISSING => MISSING,
            (Some(_), _) => "untrusted",
            (None, true) => &self.state,
        }
    }

    pub(crate) fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector
            .iter()
            .all(|(k, v)| self.labels.get(k).is_some_and(|have| have == v))
    }

    pub(crate) fn labels_text(&self) -> String {
        if self.labels.is_empty() {
            return "-".into();
        }
        self.labels
            .iter()
            .map(|(k, v)| format!("{}={}", Shown(k), Shown(v)))
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The state of a node whose report vanished while the lease its seen record names lives.
pub(crate) const MISSING: &str = "missing";

/// The state an agent reports while another agent instance writes its report too (two
/// agents with one node id, schema 2): lagging, whatever its revision says.
const CONFLICT: &str = dw_node_report::CONFLICT;

/// Whether `node` routes from `revision` or later (never with an invalid revision).
fn is_at(node: &NodeReport, revision: i64) -> bool {
    node.revision.is_some_and(|at| at >= revision)
}
