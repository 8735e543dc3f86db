//! The judgments of a rollout step (`crate::rollout` has the rules): does every live node
//! of the cohort serve the stage, does a node reject a staged key ([`judge`]), and is a
//! probed origin unhealthy by the health checker's rules ([`Streaks`]). `stage show` and
//! `stage create --dry-run` use the same [`judge`] and [`is_member`], so that a node
//! `stage show` calls serving is one a rollout step would pass.

use std::collections::BTreeMap;

use dw_routing::stage::{Node, Stage};

use crate::node_report::NodeReport;
use crate::streak::Streak;

/// What one look at the node reports says about a step.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gate {
    /// The live nodes of the cohort.
    pub members: Vec<String>,
    /// The members that serve the stage at its current revision, believably.
    pub serving: Vec<String>,
    /// The members that do not, with why.
    pub blocking: Vec<(String, String)>,
    /// `(node, key)`: a node that applies the stage reports a staged key rejected.
    pub rejected: Vec<(String, String)>,
}

impl Gate {
    /// Whether every live cohort node serves the stage (and there are some).
    pub fn all_serving(&self, min_nodes: usize) -> bool {
        self.blocking.is_empty() && self.members.len() >= min_nodes.max(1)
    }
}

/// Whether a node's report says it applies stage `id` at `revision` or later.
pub fn applies(node: &NodeReport, id: &str, revision: i64) -> bool {
    node.report.applies(id, revision)
}

fn applies_any(node: &NodeReport, id: &str) -> bool {
    applies(node, id, 0)
}

/// Whether the node is in the stage's cohort (by its id and labels; liveness aside).
pub fn is_member(stage: &Stage, node: &NodeReport) -> bool {
    stage.cohort.contains(
        &stage.id,
        &Node {
            id: &node.id,
            labels: &node.labels,
        },
    )
}

/// Judges the cohort of `stage` (its key at `revision`, under `prefix`) from `nodes`.
pub fn judge(stage: &Stage, revision: i64, prefix: &str, nodes: &[NodeReport]) -> Gate {
    let mut gate = Gate::default();
    let stage_key = format!("{prefix}stage/{}", stage.id);
    for node in nodes.iter().filter(|node| node.live) {
        // A staged key rejected by a node that applies the stage, or the stage key itself
        // rejected by any node (an agent that cannot read it applies it nowhere).
        let applier = applies_any(node, &stage.id);
        for rejected in &node.report.rejected {
            let Some(key) = rejected.key.as_deref() else {
                continue;
            };
            let staged = key
                .strip_prefix(prefix)
                .is_some_and(|relative| stage.kvs.contains_key(relative));
            if (applier && staged) || key == stage_key {
                gate.rejected.push((node.id.clone(), key.to_owned()));
            }
        }
        if !is_member(stage, node) {
            continue;
        }
        gate.members.push(node.id.clone());
        let why = if let Some(why) = &node.untrusted {
            let state = if node.state == "missing" {
                "missing"
            } else {
                "untrusted"
            };
            Some(format!("{state}: {why}"))
        } else if matches!(node.state.as_str(), "missing" | "conflict" | "stale") {
            Some(match &node.reason {
                Some(reason) => format!("{}: {reason}", node.state),
                None => node.state.clone(),
            })
        } else if !applies(node, &stage.id, revision) {
            Some(match node.revision {
                Some(at) if at >= revision => format!(
                    "at revision {at} but does not apply the stage (an agent without stages?)"
                ),
                Some(at) => format!("routes from revision {at}, before the stage's {revision}"),
                None => "reports an invalid revision".to_owned(),
            })
        } else {
            None
        };
        match why {
            Some(why) => gate.blocking.push((node.id.clone(), why)),
            None => gate.serving.push(node.id.clone()),
        }
    }
    gate
}

/// The probed origins' streaks, judged by the health checker's rule ([`Streak`]).
#[derive(Debug, Clone, Default)]
pub struct Streaks {
    fail_after: u32,
    /// origin → its streak.
    streaks: BTreeMap<String, Streak>,
}

impl Streaks {
    /// Streaks that call an origin unhealthy after `fail_after` failures in a row.
    pub fn new(fail_after: u32) -> Streaks {
        Streaks {
            fail_after: fail_after.max(1),
            streaks: BTreeMap::new(),
        }
    }

    /// Records one probe; `Some(reason)` once the origin is unhealthy.
    pub fn record(&mut self, origin: &str, result: Result<u16, String>) -> Option<String> {
        let streak = self.streaks.entry(origin.to_owned()).or_default();
        streak.record(result);
        streak.unhealthy(self.fail_after).then(|| {
            format!(
                "probe of {origin} failed {} time(s) in a row: {}",
                streak.failures,
                streak.last_error.as_deref().unwrap_or_default()
            )
        })
    }

    /// Whether every origin's last probe succeeded.
    pub fn all_healthy(&self) -> bool {
        self.streaks.values().all(|streak| streak.failures == 0)
    }

    /// Forgets every streak (a bake that starts over).
    pub fn reset(&mut self) {
        self.streaks.clear();
    }
}

/// A stage `s1` of `points` (of 10,000) moving DE to fra-a and ams-a, for unit tests here
/// and in `crate::rollout`.
#[cfg(test)]
pub(crate) fn sample_stage(points: u16) -> Stage {
    Stage::parse(
        "s1",
        &serde_json::json!({"schema": 1, "id": "s1", "cohort": {"points": points},
            "kvs": {"region/DE": r#"{"shard":"eu-9","origins":["fra-a","ams-a"]}"#},
            "base": {}, "created_by": "t", "created_at": "", "reason": ""})
        .to_string(),
    )
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stage(points: u16) -> Stage {
        sample_stage(points)
    }
    #[test]
    fn every_not_current_cohort_node_blocks_and_rejected_staged_keys_are_found() {
        let all = stage(10_000);
        let serving =
            json!({"revision": 9, "state": "ok", "stages": [{"id": "s1", "revision": 9}]});
        let old = json!({"revision": 9, "state": "ok", "stages": [{"id": "s1", "revision": 5}]});
        let mut missing = node("d", serving.clone());
        missing.state = "missing".into();
        missing.untrusted = Some("its report is gone".into());
        let mut conflict = node("e", serving.clone());
        conflict.state = "conflict".into();
        let mut gone = node("f", json!({}));
        gone.live = false;
        let nodes = vec![
            node("a", serving.clone()),
            node("b", old),
            node(
                "c",
                json!({"revision": 9, "state": "stale", "reason": "disk full", "stages": [{"id": "s1", "revision": 9}]}),
            ),
            missing,
            conflict,
            gone,
        ];
        let gate = judge(&all, 9, "/dw/routing/", &nodes);
        assert_eq!(gate.members, ["a", "b", "c", "d", "e"]);
        assert_eq!(gate.serving, ["a"]);
        let blocking: Vec<&str> = gate.blocking.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(blocking, ["b", "c", "d", "e"]);
        assert!(
            gate.blocking[2].1.starts_with("missing"),
            "{:?}",
            gate.blocking
        );
        assert!(!gate.all_serving(1));
        assert!(gate.rejected.is_empty());

        let only_a = judge(&all, 9, "/dw/routing/", &nodes[..1]);
        assert!(only_a.all_serving(1));
        assert!(!only_a.all_serving(2), "fewer than --min-nodes");
        assert!(
            !judge(&all, 9, "/dw/routing/", &[]).all_serving(1),
            "empty cohort"
        );

        let rejecting = node(
            "a",
            json!({"revision": 9, "state": "rejected", "stages": [{"id": "s1", "revision": 9}],
                "rejected": [{"key": "/dw/routing/region/DE", "error": "bad"},
                             {"key": "/dw/routing/region/XX", "error": "old"}]}),
        );
        let gate = judge(&all, 9, "/dw/routing/", &[rejecting]);
        assert_eq!(
            gate.rejected,
            [("a".into(), "/dw/routing/region/DE".into())]
        );
        // A node that does not apply the stage rejecting DE says nothing about the stage.
        let outsider = node(
            "a",
            json!({"revision": 9, "state": "rejected", "stages": [],
                "rejected": [{"key": "/dw/routing/region/DE", "error": "bad"}]}),
        );
        assert!(
            judge(&stage(0), 9, "/dw/routing/", &[outsider])
                .rejected
                .is_empty()
        );
        // The stage key itself rejected: the node could not read it, so it applies nowhere.
        let unreadable = node(
            "b",
            json!({"revision": 9, "state": "rejected", "stages": [],
                "rejected": [{"key": "/dw/routing/stage/s1", "error": "bad"}]}),
        );
        let gate = judge(&stage(0), 9, "/dw/routing/", &[unreadable]);
        assert_eq!(gate.rejected, [("b".into(), "/dw/routing/stage/s1".into())]);
    }

    #[test]
    fn an_origin_is_unhealthy_after_fail_after_failures_in_a_row() {
        let mut streaks = Streaks::new(2);
        assert!(streaks.record("a", Err("x".into())).is_none());
        assert!(!streaks.all_healthy());
        assert!(streaks.record("a", Ok(200)).is_none());
        assert!(streaks.all_healthy());
        assert!(streaks.record("a", Err("x".into())).is_none());
        assert!(
            streaks
                .record("a", Err("y".into()))
                .unwrap()
                .contains("2 time(s)")
        );
    }
    fn node(id: &str, report: serde_json::Value) -> NodeReport {
        NodeReport {
            id: id.into(),
            live: true,
            revision: report["revision"].as_i64(),
            state: report["state"].as_str().unwrap_or("ok").into(),
            reason: report["reason"].as_str().map(str::to_owned),
            labels: BTreeMap::new(),
            published_at_ms: None,
            reported_at_ms: None,
            report: dw_node_report::NodeReport::from_value(&report),
            raw: report,
            untrusted: None,
        }
    }
}
