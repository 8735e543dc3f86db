//! The node report: what each dw-agent writes to `<nodes prefix><id>` (default
//! `/dw/nodes/<id>`, on a short lease) and `<nodes prefix>-seen/<id>`, and what `dwctl`
//! reads to judge the fleet (`status`, `--wait`, the rollout gate, the fleet exporter).
//! One type for both sides, so that the writer and the readers cannot drift apart
//! (docs/agent.md, "Node reports", is its reference).
//!
//! The report is a wire format that outlives any one build: a fleet mid-upgrade holds
//! reports of older agents, and anyone with write access to the nodes prefix can put
//! anything there. So [`NodeReport::parse`] reads every schema (0, before the field
//! existed, to [`SCHEMA`]) and never fails on a field: a field of the wrong type reads
//! as absent (its default), exactly as the field-by-field reader it replaces did. Only a
//! report that is not JSON at all is an [`Error`].
//!
//! This crate is pure (no I/O) and is not linked into the PHP extension.
//!
//! ```
//! use dw_node_report::{NodeReport, SCHEMA};
//!
//! let report = NodeReport {
//!     node: Some("edge-1".into()),
//!     revision: Some(42),
//!     state: Some("ok".into()),
//!     ..NodeReport::new()
//! };
//! let text = report.to_json();
//! let read = NodeReport::parse(text.as_bytes()).unwrap();
//! assert_eq!(read, report);
//! assert_eq!(read.schema, Some(SCHEMA));
//! // A hostile field reads as absent; the rest of the report stays readable.
//! let odd = NodeReport::parse(br#"{"revision":"x","state":"ok"}"#).unwrap();
//! assert_eq!((odd.revision, odd.state.as_deref()), (None, Some("ok")));
//! ```
#![deny(missing_docs)]

use std::collections::BTreeMap;
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

/// The version of the report's layout, its `schema` field. Fields are only ever added; a
/// reader ignores the ones it does not know. A change that removes or redefines a field
/// bumps it: 1 added `lease` and `instance`; 2 added the state `conflict` (and the
/// `conflict` field), which a reader must not count as current.
pub const SCHEMA: u64 = 2;

/// The state an agent reports while another agent instance writes its report too (two
/// agents with one node id, schema 2): never current, whatever its revision says.
pub const CONFLICT: &str = "conflict";

/// One node's report, as written and as read.
///
/// Every field is optional on the wire (older schemas lack some, a hostile writer may
/// put anything in any of them); the writer fills every one it knows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeReport {
    /// The layout's version ([`SCHEMA`]); absent in reports before schema 1.
    #[serde(deserialize_with = "lenient")]
    pub schema: Option<u64>,
    /// The agent process that wrote it (a random id per start): two agents with one
    /// node id are told apart by it (schema 1 on).
    #[serde(deserialize_with = "lenient")]
    pub instance: Option<String>,
    /// The lease the live report is put on (schema 1 on): a report on another lease was
    /// not put by its agent.
    #[serde(deserialize_with = "lenient")]
    pub lease: Option<i64>,
    /// The node id (the key under the nodes prefix).
    #[serde(deserialize_with = "lenient")]
    pub node: Option<String>,
    /// The routing revision the node routes from; a negative one is no etcd revision.
    #[serde(deserialize_with = "lenient")]
    pub revision: Option<i64>,
    /// The revision recorded in the published snapshot file.
    #[serde(deserialize_with = "lenient")]
    pub published_revision: Option<i64>,
    /// When the agent last renamed a snapshot into place, Unix milliseconds.
    #[serde(deserialize_with = "lenient")]
    pub published_at_ms: Option<u64>,
    /// When the agent wrote this report, Unix milliseconds.
    #[serde(deserialize_with = "lenient")]
    pub reported_at_ms: Option<u64>,
    /// The snapshot file's path on the node.
    #[serde(deserialize_with = "lenient")]
    pub snapshot: Option<String>,
    /// The agent's version.
    #[serde(deserialize_with = "lenient")]
    pub version: Option<String>,
    /// `ok`, `stale`, `rejected` or [`CONFLICT`] (older agents wrote others, such as
    /// `watching`; a reader shows what it does not know).
    #[serde(deserialize_with = "lenient")]
    pub state: Option<String>,
    /// Why the node is not `ok`, when it says.
    #[serde(deserialize_with = "lenient")]
    pub reason: Option<String>,
    /// The first keys left out of routing (the count is in `reason`).
    #[serde(deserialize_with = "lenient_items")]
    pub rejected: Vec<RejectedKey>,
    /// The node's labels (`--label k=v`); a label whose value is not text reads as "".
    #[serde(deserialize_with = "lenient_labels")]
    pub labels: BTreeMap<String, String>,
    /// The stages the published snapshot applies.
    #[serde(deserialize_with = "lenient_items")]
    pub stages: Vec<ReportedStage>,
    /// The conflict with another agent instance, when the state is [`CONFLICT`].
    #[serde(deserialize_with = "lenient")]
    pub conflict: Option<Conflict>,
    /// Purge requests to the node's page cache that did not land since the agent started.
    #[serde(deserialize_with = "lenient")]
    pub purge_failures: u64,
    /// The first regions whose stored `buckets` assignment routers ignore for the
    /// policy's N (their default assignment answers; the value still routes), as key and
    /// why; absent when there are none (and in reports of agents before issue 41).
    #[serde(
        deserialize_with = "lenient_items",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub ignored_assignments: Vec<RejectedKey>,
    /// How many regions' stored assignments are ignored (all of them, listed or not).
    #[serde(deserialize_with = "lenient", skip_serializing_if = "is_zero")]
    pub ignored_assignments_total: u64,
    /// The report was over its size cap: `stages`, `rejected` and `ignored_assignments`
    /// were left out.
    #[serde(deserialize_with = "lenient", skip_serializing_if = "is_false")]
    pub truncated: bool,
}

/// A key left out of routing, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RejectedKey {
    /// The full key.
    #[serde(deserialize_with = "lenient")]
    pub key: Option<String>,
    /// Why routers leave it out.
    #[serde(deserialize_with = "lenient")]
    pub error: Option<String>,
}

/// A stage the node's snapshot applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReportedStage {
    /// The stage id.
    #[serde(deserialize_with = "lenient")]
    pub id: Option<String>,
    /// The `mod_revision` of the stage's key the node applied (0 when unreadable).
    #[serde(deserialize_with = "lenient")]
    pub revision: i64,
}

/// Another agent instance writing this node's report.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Conflict {
    /// The other instance's id.
    #[serde(deserialize_with = "lenient")]
    pub instance: Option<String>,
    /// The revision of its last write seen.
    #[serde(deserialize_with = "lenient")]
    pub revision: Option<i64>,
    /// What the agent says about it.
    #[serde(deserialize_with = "lenient")]
    pub reason: Option<String>,
}

/// A report that is not JSON.
#[derive(Debug)]
pub struct Error(serde_json::Error);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the report is not JSON: {}", self.0)
    }
}

impl std::error::Error for Error {}

impl NodeReport {
    /// An empty report of the current [`SCHEMA`] (fill in the rest).
    pub fn new() -> NodeReport {
        NodeReport {
            schema: Some(SCHEMA),
            ..NodeReport::default()
        }
    }

    /// Reads a report as stored: any schema; a field of the wrong type reads as absent,
    /// and JSON that is not an object as an empty report. Only text that is not JSON is
    /// an error.
    pub fn parse(bytes: &[u8]) -> Result<NodeReport, Error> {
        let value: Value = serde_json::from_slice(bytes).map_err(Error)?;
        Ok(NodeReport::from_value(&value))
    }

    /// [`NodeReport::parse`] of a value already read.
    pub fn from_value(value: &Value) -> NodeReport {
        // Only an object is a report: serde would also fill a struct from a list, field by
        // field in order (`[1]` would read as schema 1).
        if !value.is_object() {
            return NodeReport::default();
        }
        NodeReport::deserialize(value).unwrap_or_default()
    }

    /// The report as written (every field, absent ones as `null`).
    pub fn to_json(&self) -> String {
        // A struct of strings, numbers, maps and lists always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Whether the agent says another agent instance writes this node's report too.
    pub fn in_conflict(&self) -> bool {
        self.state.as_deref() == Some(CONFLICT)
    }

    /// Whether the report says the node applies stage `id` at `revision` or later.
    pub fn applies(&self, id: &str, revision: i64) -> bool {
        self.stages
            .iter()
            .any(|stage| stage.id.as_deref() == Some(id) && stage.revision >= revision)
    }
}

/// Unix milliseconds of `at` (0 before 1970, `u64::MAX` past it): the clock of
/// `published_at_ms` and `reported_at_ms`, shared by the agent that writes them and dwctl,
/// which ages them against its own `unix_ms(SystemTime::now())`.
pub fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A field of the wrong type reads as its default (absent), not as an error.
fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(T::deserialize(value).unwrap_or_default())
}

/// A list: an entry that is not what it should be is left out, the others are kept.
fn lenient_items<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned,
{
    let value = Value::deserialize(deserializer)?;
    Ok(match value {
        Value::Array(items) => items
            .into_iter()
            .filter_map(|item| T::deserialize(item).ok())
            .collect(),
        _ => Vec::new(),
    })
}

/// Labels: a value that is not text reads as "" (the key is kept, as before the type).
fn lenient_labels<'de, D>(deserializer: D) -> Result<BTreeMap<String, String>, D::Error>
where
    D: Deserializer<'de>,
{
    let value = Value::deserialize(deserializer)?;
    Ok(match value {
        Value::Object(labels) => labels
            .into_iter()
            .map(|(key, value)| (key, value.as_str().unwrap_or_default().to_owned()))
            .collect(),
        _ => BTreeMap::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn full() -> NodeReport {
        NodeReport {
            instance: Some("0123456789abcdef".into()),
            lease: Some(77),
            node: Some("edge-1".into()),
            revision: Some(42),
            published_revision: Some(40),
            published_at_ms: Some(1_700_000_000_000),
            reported_at_ms: Some(1_700_000_000_005),
            snapshot: Some("/run/dw-router/routing.json".into()),
            version: Some("0.1.0".into()),
            state: Some("rejected".into()),
            reason: Some("1 key(s) left out of routing".into()),
            rejected: vec![RejectedKey {
                key: Some("/dw/routing/region/XX".into()),
                error: Some("bad".into()),
            }],
            labels: [("dc".to_string(), "fra".to_string())].into(),
            stages: vec![ReportedStage {
                id: Some("eu-map".into()),
                revision: 39,
            }],
            conflict: None,
            purge_failures: 3,
            ..NodeReport::new()
        }
    }

    #[test]
    fn the_clock_is_unix_milliseconds() {
        let at = UNIX_EPOCH + std::time::Duration::from_millis(1_700_000_000_123);
        assert_eq!(unix_ms(at), 1_700_000_000_123);
        assert_eq!(unix_ms(UNIX_EPOCH - std::time::Duration::from_secs(1)), 0);
    }

    #[test]
    fn a_report_reads_back_as_written() {
        let report = full();
        let text = report.to_json();
        assert_eq!(NodeReport::parse(text.as_bytes()).unwrap(), report);
        let value: Value = serde_json::from_str(&text).unwrap();
        // The writer spells out absent fields as null, and leaves `truncated` out.
        assert_eq!(value["conflict"], Value::Null);
        assert!(value.get("truncated").is_none());
        assert_eq!(value["schema"], SCHEMA);
        assert_eq!(value["stages"], json!([{"id": "eu-map", "revision": 39}]));
        let conflict = NodeReport {
            state: Some(CONFLICT.into()),
            conflict: Some(Conflict {
                instance: Some("other".into()),
                revision: Some(9),
                reason: Some("two agents".into()),
            }),
            truncated: true,
            ..full()
        };
        let read = NodeReport::parse(conflict.to_json().as_bytes()).unwrap();
        assert_eq!(read, conflict);
        assert!(read.in_conflict());
    }

    /// Hand-written: reports of agents before schema 1 (no schema, lease or instance) and
    /// of schema 1 (no conflict, no purge_failures), which a fleet mid-upgrade still holds.
    #[test]
    fn older_schemas_are_read() {
        let zero = NodeReport::parse(
            br#"{"node":"n","revision":7,"state":"watching","labels":{"dc":"fra"}}"#,
        )
        .unwrap();
        assert_eq!(zero.schema, None);
        assert_eq!(zero.lease, None);
        assert_eq!(zero.revision, Some(7));
        assert_eq!(zero.state.as_deref(), Some("watching"));
        assert_eq!(zero.labels["dc"], "fra");
        let one = NodeReport::parse(
            br#"{"schema":1,"instance":"test","lease":5,"node":"n","revision":9,
                "state":"ok","labels":{},"stages":[{"id":"s","revision":3}]}"#,
        )
        .unwrap();
        assert_eq!((one.schema, one.lease), (Some(1), Some(5)));
        assert_eq!(one.purge_failures, 0);
        assert!(one.applies("s", 3) && !one.applies("s", 4) && !one.applies("t", 0));
        // A later schema's unknown fields are ignored.
        let later = NodeReport::parse(br#"{"schema":3,"revision":1,"new_field":[1,2]}"#).unwrap();
        assert_eq!((later.schema, later.revision), (Some(3), Some(1)));
    }

    /// Hand-written: what anyone with write access to the nodes prefix can put there. Each
    /// wrong-typed field reads as absent, the report's other fields stay readable.
    #[test]
    fn hostile_fields_read_as_absent() {
        let odd = NodeReport::parse(
            br#"{"revision":"\u001b[2J","state":5,"lease":"x","purge_failures":-1,
                "labels":{"dc":7,"ok":"yes"},"stages":[5,{"id":"s","revision":"x"},{"id":"t","revision":2}],
                "rejected":[{"key":3},{"key":"/k","error":"e"},"x"],"conflict":"yes",
                "truncated":"no","reason":"why"}"#,
        )
        .unwrap();
        assert_eq!(odd.revision, None);
        assert_eq!(odd.state, None);
        assert_eq!(odd.lease, None);
        assert_eq!(odd.purge_failures, 0);
        assert_eq!(odd.labels["dc"], "");
        assert_eq!(odd.labels["ok"], "yes");
        assert_eq!(odd.stages.len(), 2);
        assert_eq!(odd.stages[0].revision, 0);
        assert!(odd.applies("t", 2));
        assert_eq!(odd.rejected.len(), 2);
        assert_eq!(odd.rejected[0].key, None);
        assert_eq!(odd.rejected[1].key.as_deref(), Some("/k"));
        assert_eq!(odd.conflict, None);
        assert!(!odd.truncated);
        assert_eq!(odd.reason.as_deref(), Some("why"));
        // JSON that is no object: an empty report; text that is no JSON: an error.
        assert_eq!(NodeReport::parse(b"[1]").unwrap(), NodeReport::default());
        assert_eq!(NodeReport::parse(b"null").unwrap(), NodeReport::default());
        let error = NodeReport::parse(b"{").unwrap_err();
        assert!(error.to_string().starts_with("the report is not JSON"));
        // A revision past i64 is no etcd revision.
        let huge = NodeReport::parse(br#"{"revision":18446744073709551615}"#).unwrap();
        assert_eq!(huge.revision, None);
    }
}
