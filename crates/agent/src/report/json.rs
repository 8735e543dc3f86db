//! The node report's content and size limits (docs/agent.md, "Node reports"): what the
//! reporter (`report.rs`) writes to `/dw/nodes/<id>` and `/dw/nodes-seen/<id>`, as the
//! shared type `dw_node_report::NodeReport` that dwctl reads.

use serde_json::json;

use crate::config::ReportConfig;
use crate::report::heal::instance_id;

/// What the node reports (the write adds `reported_at_ms`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    /// The revision of the state the node routes from: the published file is that state.
    pub(crate) revision: u64,
    /// The revision recorded in the published file.
    pub(crate) published_revision: Option<u64>,
    /// When this agent last renamed a snapshot into place (unix ms), if it did.
    pub(crate) published_at_ms: Option<u64>,
    pub(crate) condition: Condition,
    /// The stages the published file applies (id and the revision of each).
    pub(crate) stages: Vec<dw_routing::stage::AppliedStage>,
    /// Purge requests to `--purge-url` that did not land since start (0 without one).
    pub(crate) purge_failures: u64,
    /// The regions whose stored assignment routers ignore (listed within the same caps as
    /// the rejected keys: [`MAX_REJECTED_LISTED`], [`MAX_REJECTED_BYTES`]).
    pub(crate) ignored_assignments: Rejected,
}

/// `ok`, `stale` (the file is not etcd's state, and why) or `rejected` (published, but
/// some keys cannot be used: they are left out of routing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Condition {
    Ok,
    Stale(String),
    Rejected(Rejected),
}

/// The most rejected keys one report lists (the count is always complete).
pub(crate) const MAX_REJECTED_LISTED: usize = 50;
/// The most bytes the listed rejected keys take in a report, as JSON (`{"key":..,
/// "error":..},` each); the keys past it are counted, not listed.
pub(crate) const MAX_REJECTED_BYTES: usize = 16 * 1024;
/// A rejected key, or its error, longer than this is cut (on a character boundary) and
/// ends with `…`.
pub(crate) const MAX_REJECTED_FIELD_BYTES: usize = 256;
/// The most bytes a whole report takes; a larger one (many stages) is written without its
/// `stages` and `rejected` lists and with `"truncated": true`.
pub(crate) const MAX_REPORT_BYTES: usize = 64 * 1024;
/// The most bytes of the `reason` text.
const MAX_REASON_BYTES: usize = 1024;

/// The keys left out of routing: every one counted, the first listed within the caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub(crate) listed: Vec<(String, String)>,
    /// Bytes the listed entries take as JSON.
    bytes: usize,
    /// Once one entry did not fit, later ones are not listed either (the list stays the
    /// first keys, in order).
    full: bool,
    pub(crate) total: usize,
}

impl Rejected {
    pub(crate) fn push(&mut self, key: &str, error: &str) {
        self.total += 1;
        if !self.lists_more() {
            return;
        }
        let (key, error) = (
            clip(key, MAX_REJECTED_FIELD_BYTES),
            clip(error, MAX_REJECTED_FIELD_BYTES),
        );
        let cost = entry_bytes(&key, &error);
        if self.bytes + cost > MAX_REJECTED_BYTES {
            self.full = true;
            return;
        }
        self.bytes += cost;
        self.listed.push((key, error));
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// Whether a further entry may still be listed.
    fn lists_more(&self) -> bool {
        !self.full && self.listed.len() < MAX_REJECTED_LISTED
    }
}

/// The bytes one listed entry takes in the report: `{"key":K,"error":E},`.
pub(crate) fn entry_bytes(key: &str, error: &str) -> usize {
    json!({"key": key, "error": error}).to_string().len() + 1
}

/// `text` cut to at most `max` bytes on a character boundary, `…` (3 bytes) included.
pub(crate) fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

pub(crate) use dw_node_report::unix_ms;

impl Report {
    /// The report as written: `lease` is the id of the lease the live key is put on (the
    /// seen record carries the same value, so it names that lease too).
    /// `conflict`: the conflict (`heal.rs`), which then is the state.
    pub(crate) fn to_json(
        &self,
        config: &ReportConfig,
        snapshot: &str,
        now_ms: u64,
        lease: i64,
        conflict: Option<dw_node_report::Conflict>,
    ) -> String {
        let (mut state, mut reason, rejected) = match &self.condition {
            Condition::Ok => ("ok", None, Vec::new()),
            Condition::Stale(why) => ("stale", Some(why.clone()), Vec::new()),
            Condition::Rejected(keys) => (
                "rejected",
                Some(format!("{} key(s) left out of routing", keys.total)),
                keys.listed
                    .iter()
                    .map(|(key, error)| dw_node_report::RejectedKey {
                        key: Some(key.clone()),
                        error: Some(error.clone()),
                    })
                    .collect(),
            ),
        };
        if let Some(why) = conflict
            .as_ref()
            .and_then(|conflict| conflict.reason.as_ref())
        {
            state = dw_node_report::CONFLICT;
            reason = Some(why.clone());
        }
        let revision = |revision: u64| i64::try_from(revision).ok();
        let mut report = dw_node_report::NodeReport {
            instance: Some(instance_id().to_owned()),
            lease: Some(lease),
            node: Some(config.node_id.clone()),
            revision: revision(self.revision),
            published_revision: self.published_revision.and_then(revision),
            published_at_ms: self.published_at_ms,
            reported_at_ms: Some(now_ms),
            snapshot: Some(snapshot.to_owned()),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            state: Some(state.to_owned()),
            reason: reason.map(|reason| clip(&reason, MAX_REASON_BYTES)),
            rejected,
            labels: config.labels.clone(),
            stages: self
                .stages
                .iter()
                .map(|stage| dw_node_report::ReportedStage {
                    id: Some(stage.id.clone()),
                    revision: revision(stage.revision).unwrap_or(0),
                })
                .collect(),
            conflict,
            purge_failures: self.purge_failures,
            ignored_assignments: self
                .ignored_assignments
                .listed
                .iter()
                .map(|(key, error)| dw_node_report::RejectedKey {
                    key: Some(key.clone()),
                    error: Some(error.clone()),
                })
                .collect(),
            ignored_assignments_total: self.ignored_assignments.total as u64,
            ..dw_node_report::NodeReport::new()
        };
        let text = report.to_json();
        if text.len() <= MAX_REPORT_BYTES {
            return text;
        }
        report.stages.clear();
        report.rejected.clear();
        report.ignored_assignments.clear();
        report.truncated = true;
        report.to_json()
    }
}

/// Rejected keys as `(key, reason)`, for a report.
pub(crate) fn rejected_keys(
    invalid: &[dw_routing::InvalidKey],
    unrepresentable: usize,
) -> Rejected {
    let mut keys = Rejected::default();
    for invalid in invalid {
        // Only the listed ones are formatted: 100,000 bad keys cost a count, not a copy.
        if keys.lists_more() {
            keys.push(&invalid.key, &invalid.error.to_string());
        } else {
            keys.total += 1;
        }
    }
    if unrepresentable > 0 {
        keys.push(
            "(non-UTF-8 keys)",
            &format!("{unrepresentable} key(s) whose key or value is not UTF-8"),
        );
    }
    keys
}

/// The regions of a published state whose stored assignment routers ignore for the
/// policy's N (`dw_routing::ignored_assignments`, one region at a time, no table), every
/// one counted, the first listed within the caps of [`Rejected`].
pub(crate) fn ignored_in(published: &dw_routing::Snapshot) -> Rejected {
    rejected_keys(&dw_routing::ignored_assignments(published), 0)
}

/// The keys of a published state that routers leave out, checked as routers will, one
/// at a time (a compiled table here doubled the agent's memory at 50,000 keys), and the
/// problems of the node's stages (a stage that applies nowhere counts as a rejected key).
pub(crate) fn rejected_in(
    published: &dw_routing::Snapshot,
    overlay: Option<&dw_routing::stage::Overlay>,
    unrepresentable: usize,
) -> Rejected {
    let mut rejected = rejected_keys(&dw_routing::invalid_keys(published), unrepresentable);
    for (key, problem) in overlay.iter().flat_map(|overlay| &overlay.problems) {
        rejected.push(key, problem);
    }
    rejected
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;
    use std::collections::BTreeMap;

    fn labels_json(labels: &BTreeMap<String, String>) -> Value {
        Value::Object(
            labels
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        )
    }

    #[test]
    fn a_report_is_json_with_every_field() {
        let mut config = ReportConfig::new("edge-1");
        config.labels.insert("dc".into(), "fra".into());
        let report = Report {
            revision: 42,
            published_revision: Some(40),
            published_at_ms: Some(1_700_000_000_000),
            condition: Condition::Rejected(rejected(&[("/dw/routing/region/XX", "bad")])),
            stages: vec![dw_routing::stage::AppliedStage {
                id: "eu-map".into(),
                revision: 39,
            }],
            purge_failures: 3,
            ignored_assignments: Rejected::default(),
        };
        let value: Value =
            serde_json::from_str(&report.to_json(&config, "/run/x.json", 5, 77, None)).unwrap();
        assert_eq!(value["schema"], dw_node_report::SCHEMA);
        assert_eq!(value["lease"], 77);
        assert_eq!(value["instance"], instance_id());
        assert_eq!(instance_id().len(), 16);
        assert_eq!(value["node"], "edge-1");
        assert_eq!(value["revision"], 42);
        assert_eq!(value["published_revision"], 40);
        assert_eq!(value["stages"], json!([{"id": "eu-map", "revision": 39}]));
        assert_eq!(value["reported_at_ms"], 5);
        assert_eq!(value["state"], "rejected");
        assert_eq!(value["rejected"][0]["key"], "/dw/routing/region/XX");
        assert_eq!(value["labels"], labels_json(&config.labels));
        assert_eq!(value["version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(value["purge_failures"], 3);
    }

    fn rejected(keys: &[(&str, &str)]) -> Rejected {
        let mut rejected = Rejected::default();
        for (key, error) in keys {
            rejected.push(key, error);
        }
        rejected
    }

    #[test]
    fn the_rejected_list_is_capped_in_bytes_at_its_edge() {
        // Entries of exactly 512 bytes as JSON: 32 of them fill the 16 KiB cap exactly.
        let error = "e".repeat(240);
        let key = |n: usize| {
            let base = format!("/k/{n:04}-");
            let pad = 512 - entry_bytes(&base, &error);
            format!("{base}{}", "x".repeat(pad))
        };
        assert_eq!(entry_bytes(&key(0), &error), 512);
        assert!(key(0).len() <= MAX_REJECTED_FIELD_BYTES);
        let mut list = Rejected::default();
        for n in 0..32 {
            list.push(&key(n), &error);
        }
        assert_eq!((list.listed.len(), list.bytes), (32, MAX_REJECTED_BYTES));
        // One byte more does not fit: counted, not listed, and nothing after it is.
        list.push("/k/y", "");
        list.push("", "");
        assert_eq!((list.listed.len(), list.total), (32, 34));
        let config = ReportConfig::new("edge-1");
        let report = Report {
            revision: 1,
            published_revision: None,
            published_at_ms: None,
            condition: Condition::Rejected(list),
            stages: Vec::new(),
            purge_failures: 0,
            ignored_assignments: Rejected::default(),
        };
        let text = report.to_json(&config, "/run/x.json", 5, 77, None);
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["rejected"].as_array().unwrap().len(), 32);
        assert_eq!(value["reason"], "34 key(s) left out of routing");
        // The listed entries as written: the cap, less the last comma, plus the brackets.
        assert_eq!(
            value["rejected"].to_string().len(),
            MAX_REJECTED_BYTES - 1 + 2
        );
        assert!(text.len() <= MAX_REPORT_BYTES);
    }

    #[test]
    fn long_keys_are_clipped_and_the_count_is_complete() {
        let at_edge = "k".repeat(MAX_REJECTED_FIELD_BYTES);
        assert_eq!(clip(&at_edge, MAX_REJECTED_FIELD_BYTES), at_edge);
        let over = format!("{at_edge}k");
        let clipped = clip(&over, MAX_REJECTED_FIELD_BYTES);
        assert_eq!(clipped.len(), MAX_REJECTED_FIELD_BYTES);
        assert!(clipped.ends_with('…'));
        let wide = "é".repeat(200);
        assert!(clip(&wide, MAX_REJECTED_FIELD_BYTES).len() <= MAX_REJECTED_FIELD_BYTES);
        // 100,000 keys: every one counted, at most 50 listed.
        let mut list = Rejected::default();
        for n in 0..100_000 {
            list.push(&format!("/k/{n}"), "bad");
        }
        assert_eq!(
            (list.listed.len(), list.total),
            (MAX_REJECTED_LISTED, 100_000)
        );
    }

    #[test]
    fn a_report_over_its_cap_drops_its_lists() {
        let config = ReportConfig::new("edge-1");
        let stage = |n: usize| dw_routing::stage::AppliedStage {
            id: format!("{n:063}"),
            revision: 1,
        };
        let report = |stages: usize| Report {
            revision: 1,
            published_revision: None,
            published_at_ms: None,
            condition: Condition::Rejected(rejected(&[("/k", "bad")])),
            stages: (0..stages).map(stage).collect(),
            purge_failures: 0,
            ignored_assignments: Rejected::default(),
        };
        let small = report(10).to_json(&config, "/s", 5, 7, None);
        assert!(!small.contains("truncated"));
        let text = report(2_000).to_json(&config, "/s", 5, 7, None);
        assert!(text.len() <= MAX_REPORT_BYTES, "{}", text.len());
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["truncated"], true);
        assert_eq!(value["stages"], json!([]));
        assert_eq!(value["reason"], "1 key(s) left out of routing");
    }

    #[test]
    fn a_conflict_is_the_state() {
        let config = ReportConfig::new("edge-1");
        let report = Report {
            revision: 1,
            published_revision: None,
            published_at_ms: None,
            condition: Condition::Ok,
            stages: Vec::new(),
            purge_failures: 0,
            ignored_assignments: Rejected::default(),
        };
        let conflict = dw_node_report::Conflict {
            instance: Some("other".into()),
            revision: Some(9),
            reason: Some("two agents".into()),
        };
        let value: Value =
            serde_json::from_str(&report.to_json(&config, "/s", 5, 7, Some(conflict))).unwrap();
        assert_eq!(value["state"], "conflict");
        assert_eq!(value["reason"], "two agents");
        assert_eq!(value["conflict"]["instance"], "other");
        let value: Value =
            serde_json::from_str(&report.to_json(&config, "/s", 5, 7, None)).unwrap();
        assert_eq!(
            (&value["state"], &value["conflict"]),
            (&json!("ok"), &Value::Null)
        );
    }

    #[test]
    fn ignored_assignments_are_listed_within_the_caps_and_all_counted() {
        let region = |n: usize| {
            format!(
                r#"{{"shard":"s","origins":["a","b"],"weight":{{"a":1,"b":1}},"buckets":"0:{n}"}}"#
            )
        };
        let mut published = dw_routing::Snapshot::new(9, dw_routing::DEFAULT_PREFIX);
        let mut put = |key: &str, value: String| {
            published
                .kvs
                .insert(format!("{}{key}", dw_routing::DEFAULT_PREFIX), value);
        };
        put("policy/global", r#"{"buckets":4}"#.to_owned());
        put("region/DE", region(4));
        // One past the listed cap: every one counted, the first 50 listed.
        for n in 0..=MAX_REJECTED_LISTED {
            put(&format!("region/X{n:03}"), region(8));
        }
        let ignored = ignored_in(&published);
        assert_eq!(
            (ignored.listed.len(), ignored.total),
            (MAX_REJECTED_LISTED, MAX_REJECTED_LISTED + 1)
        );
        assert_eq!(ignored.listed[0].0, "/dw/routing/region/X000");
        assert_eq!(
            ignored.listed[0].1,
            "region: field `buckets`: covers more than the policy's 4 buckets (at run 0)"
        );
        let report = Report {
            revision: 9,
            published_revision: Some(9),
            published_at_ms: None,
            condition: Condition::Ok,
            stages: Vec::new(),
            purge_failures: 0,
            ignored_assignments: ignored,
        };
        let config = ReportConfig::new("edge-1");
        let value: Value =
            serde_json::from_str(&report.to_json(&config, "/s", 5, 7, None)).unwrap();
        assert_eq!(value["state"], "ok", "the values still route");
        assert_eq!(
            value["ignored_assignments"].as_array().map(Vec::len),
            Some(MAX_REJECTED_LISTED)
        );
        assert_eq!(value["ignored_assignments_total"], MAX_REJECTED_LISTED + 1);
        let read = dw_node_report::NodeReport::from_value(&value);
        assert_eq!(read.ignored_assignments_total, 51);
        // None ignored: neither field is written (reports as before).
        let none = Report {
            ignored_assignments: Rejected::default(),
            ..report
        };
        let text = none.to_json(&config, "/s", 5, 7, None);
        assert!(!text.contains("ignored_assignments"), "{text}");
    }
}
