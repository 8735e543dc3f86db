//! One node as dwctl judges it from its report (`dw_node_report::NodeReport`): live or
//! gone, believed or not, serving a revision or not. Pure: dwctl's `ops::fleet` reads the
//! reports and their leases from etcd and fills in what only etcd knows.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::Error;
use crate::shown::Shown;

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
    /// The node `id` as its report's bytes say, `live` when the report itself (not only
    /// its `-seen/` record) is there; a report that is no JSON is the state `unreadable`,
    /// with why in `reason`.
    pub fn parse(id: &str, live: bool, value: &[u8]) -> NodeReport {
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
    pub fn named_lease(&self) -> Option<i64> {
        self.report.lease
    }

    /// Whether the node counts as serving `revision`: live, trustworthy, not in conflict
    /// with another agent over its report, and at it.
    pub fn serves(&self, revision: i64) -> bool {
        self.live && self.untrusted.is_none() && self.state != CONFLICT && is_at(self, revision)
    }

    /// The state shown: `gone`, `missing`, `untrusted`, or what the node reported.
    pub fn shown_state(&self) -> &str {
        match (&self.untrusted, self.live) {
            (_, false) => "gone",
            (Some(_), _) if self.state == MISSING => MISSING,
            (Some(_), _) => "untrusted",
            (None, true) => &self.state,
        }
    }

    /// Whether the node carries every label of `selector` ([`parse_selector`]).
    pub fn matches(&self, selector: &BTreeMap<String, String>) -> bool {
        selector
            .iter()
            .all(|(k, v)| self.labels.get(k).is_some_and(|have| have == v))
    }

    /// Its labels as `k=v,k2=v2` (each shown escaped), `-` when it has none.
    pub fn labels_text(&self) -> String {
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
pub const MISSING: &str = "missing";

/// Parses `k=v,k2=v2` (`--labels`) into a label selector; empty items are skipped. A
/// usage error (exit 2) naming the item when one has no `=` or an empty label name.
pub fn parse_selector(text: &str) -> Result<BTreeMap<String, String>, Error> {
    let mut selector = BTreeMap::new();
    for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(Error::Usage(format!(
                "--labels {item:?}: expected key=value"
            )));
        };
        if key.trim().is_empty() {
            return Err(Error::Usage(format!("--labels {item:?}: empty label name")));
        }
        selector.insert(key.trim().to_owned(), value.trim().to_owned());
    }
    Ok(selector)
}

/// The state an agent reports while another agent instance writes its report too (two
/// agents with one node id, schema 2): lagging, whatever its revision says.
const CONFLICT: &str = dw_node_report::CONFLICT;

/// Whether `node` routes from `revision` or later (never with an invalid revision).
fn is_at(node: &NodeReport, revision: i64) -> bool {
    node.revision.is_some_and(|at| at >= revision)
}
