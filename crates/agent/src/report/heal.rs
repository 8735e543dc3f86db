//! Reports that heal: the reporter watches its own two keys (`/dw/nodes/<id>` and
//! `/dw/nodes-seen/<id>`) from just after its first write, so a delete or an overwrite by
//! anyone else is seen at once and the report is written again (within the report's
//! `min_interval`, a second by default).
//!
//! A write is ours when etcd committed it at a revision one of our transactions returned.
//! Any other change is someone else's:
//! - a delete, or a put whose value does not name another agent instance (a forgery, an
//!   operator's hand, a copy of our own report): *healed*, counted in
//!   `dw_agent_report_heals_total`;
//! - a put naming another agent instance: a *conflict* (two agents with one node id).
//!   Both agents see the other's writes, so both log it once, report `state: conflict`,
//!   turn `/healthz` 503, and back off: each write waits 1 s, then 2 s, ... up to 30 s after
//!   the other's last one, so the two never rewrite each other at etcd's pace. The conflict
//!   ends once no foreign write has been seen for [`CONFLICT_QUIET`].
//!
//! The predecessor's report an agent finds at its own start is not a conflict: the watch
//! starts after our first write, so only writes after ours count.

use std::collections::VecDeque;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions, WatchResponse, WatchStream};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::metrics::Metrics;

/// The first delay before writing again after another agent's write; doubled for each
/// further one, up to [`CONFLICT_MAX_DELAY`].
pub(crate) const CONFLICT_FIRST_DELAY: Duration = Duration::from_secs(1);
/// The longest delay between another agent's write and ours while in conflict.
pub(crate) const CONFLICT_MAX_DELAY: Duration = Duration::from_secs(30);
/// A conflict ends when no other agent has written the report for this long (three times
/// the longest delay: two agents in conflict each write at least every two delays).
pub(crate) const CONFLICT_QUIET: Duration = Duration::from_secs(90);
/// Heals logged: the first, then at most one line per this interval (with a count).
const HEAL_LOG_EVERY: Duration = Duration::from_secs(60);
/// Revisions of our own writes remembered (the watch may trail them by a few).
const OWN_REVISIONS: usize = 32;

/// This agent's instance id: random per start, so that a report another agent with the
/// same node id wrote can be told from ours.
pub(crate) fn instance_id() -> &'static str {
    use std::hash::{BuildHasher, Hasher};
    static INSTANCE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    INSTANCE.get_or_init(|| {
        // RandomState is seeded from the OS's randomness per process.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        format!("{:016x}", hasher.finish())
    })
}

/// A change of one of our keys by someone else.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// Deleted (by hand, or its lease revoked or expired).
    Deleted { key: String, revision: i64 },
    /// Put by a writer that is not another agent: forged, by hand, or a copy.
    Overwritten {
        key: String,
        revision: i64,
        lease: i64,
    },
    /// Put by another agent instance with this node id.
    Foreign {
        key: String,
        revision: i64,
        instance: String,
    },
}

impl Change {
    fn revision(&self) -> i64 {
        match self {
            Change::Deleted { revision, .. }
            | Change::Overwritten { revision, .. }
            | Change::Foreign { revision, .. } => *revision,
        }
    }
}

/// Sorts one event on one of our keys: `None` when it is our own write.
pub(crate) fn classify(
    event_type: EventType,
    key: &[u8],
    value: &[u8],
    lease: i64,
    revision: i64,
    own: &VecDeque<i64>,
) -> Option<Change> {
    if own.contains(&revision) {
        return None;
    }
    let key = String::from_utf8_lossy(key).into_owned();
    if event_type == EventType::Delete {
        return Some(Change::Deleted { key, revision });
    }
    let instance = dw_node_report::NodeReport::parse(value)
        .ok()
        .and_then(|report| report.instance)
        .filter(|instance| !instance.is_empty() && instance != instance_id());
    Some(match instance {
        Some(instance) => Change::Foreign {
            key,
            revision,
            instance,
        },
        None => Change::Overwritten {
            key,
            revision,
            lease,
        },
    })
}

/// The watch on our two keys, opened after the session's first write.
pub(crate) struct KeyWatch {
    stream: WatchStream,
    own: VecDeque<i64>,
}

impl KeyWatch {
    /// Watches `keys` from `from_revision` (just after our first write) and waits until
    /// etcd confirms each watch.
    pub(crate) async fn open(
        client: &Client,
        keys: [String; 2],
        from_revision: i64,
        timeout: Duration,
    ) -> Result<KeyWatch, String> {
        let options = || Some(WatchOptions::new().with_start_revision(from_revision));
        let [live, seen] = keys;
        let mut stream = crate::etcd::within(
            timeout,
            client.watch_client().watch(live.clone(), options()),
        )
        .await
        .map_err(|m| format!("watching the report: {m}"))?;
        crate::etcd::within(timeout, stream.watch(seen, options()))
            .await
            .map_err(|m| format!("watching the seen record: {m}"))?;
        let mut created = 0;
        while created < 2 {
            let response = crate::etcd::within(timeout, stream.message())
                .await
                .map_err(|m| format!("watching the report: {m}"))?
                .ok_or("watching the report: the stream closed")?;
            if response.canceled() {
                return Err(format!(
                    "watching the report: refused: {}",
                    response.cancel_reason()
                ));
            }
            created += usize::from(response.created());
        }
        Ok(KeyWatch {
            stream,
            own: VecDeque::new(),
        })
    }

    /// Our write committed at `revision`: its events are ours.
    pub(crate) fn own_write(&mut self, revision: i64) {
        if self.own.len() == OWN_REVISIONS {
            self.own.pop_front();
        }
        self.own.push_back(revision);
    }

    /// The next changes by someone else (possibly none: our own writes, progress).
    pub(crate) async fn next(&mut self) -> Result<Vec<Change>, String> {
        let response = self
            .stream
            .message()
            .await
            .map_err(|e| format!("report watch: {}", crate::etcd::describe(&e)))?
            .ok_or("report watch: the stream closed")?;
        if response.canceled() {
            return Err(format!(
                "report watch canceled by the server: {}",
                response.cancel_reason()
            ));
        }
        Ok(self.changes(&response))
    }

    fn changes(&self, response: &WatchResponse) -> Vec<Change> {
        let mut changes: Vec<Change> = Vec::new();
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let change = classify(
                event.event_type(),
                kv.key(),
                kv.value(),
                kv.lease(),
                kv.mod_revision(),
                &self.own,
            );
            // One transaction changes both keys at one revision: one change.
            if let Some(change) = change
                && !changes.iter().any(|c| c.revision() == change.revision())
            {
                changes.push(change);
            }
        }
        changes
    }
}

/// Another agent writing this node's report.
#[derive(Debug, Clone)]
struct Conflict {
    instance: String,
    revision: i64,
    last_seen: Instant,
    delay: Duration,
}

/// What the reporter knows about others writing its keys.
#[derive(Debug, Default)]
pub(crate) struct Healer {
    conflict: Option<Conflict>,
    /// The next write heals (counted when it succeeds).
    healing: bool,
    heal_logged_at: Option<Instant>,
    heals_unlogged: u64,
}

impl Healer {
    /// Takes a change by someone else: the report must be written again.
    pub(crate) fn changed(&mut self, change: Change, now: Instant, metrics: &Metrics) {
        match change {
            Change::Foreign {
                key,
                revision,
                instance,
            } => {
                metrics.report_conflict_seen();
                let delay = match &self.conflict {
                    Some(conflict) => (conflict.delay * 2).min(CONFLICT_MAX_DELAY),
                    None => CONFLICT_FIRST_DELAY,
                };
                let new = self
                    .conflict
                    .as_ref()
                    .is_none_or(|conflict| conflict.instance != instance);
                if new {
                    warn!(key, revision, other_instance = %instance, instance = instance_id(),
                        "node report: another agent writes this node's report (two agents with one \
                         node id?); reporting a conflict and backing off, not rewriting it at once");
                }
                let conflict = Conflict {
                    instance,
                    revision,
                    last_seen: now,
                    delay,
                };
                metrics.set_report_conflict(Some(describe(&conflict)));
                self.conflict = Some(conflict);
            }
            Change::Deleted { key, revision } => {
                self.heal_log(now, || {
                    warn!(
                        key,
                        revision, "node report: deleted by someone else; writing it again"
                    );
                });
            }
            Change::Overwritten {
                key,
                revision,
                lease,
            } => {
                self.heal_log(now, || {
                    warn!(
                        key,
                        revision,
                        lease = format!("{lease:x}"),
                        "node report: overwritten by someone else; writing it again"
                    );
                });
            }
        }
        self.healing = true;
    }

    fn heal_log(&mut self, now: Instant, log: impl FnOnce()) {
        if self
            .heal_logged_at
            .is_some_and(|at| now.duration_since(at) < HEAL_LOG_EVERY)
        {
            self.heals_unlogged += 1;
            return;
        }
        if self.heals_unlogged > 0 {
            info!(
                changes = self.heals_unlogged,
                "node report: more changes by someone else were healed since the last line"
            );
            self.heals_unlogged = 0;
        }
        log();
        self.heal_logged_at = Some(now);
    }

    /// No write before this (while in conflict).
    pub(crate) fn not_before(&self) -> Option<Instant> {
        self.conflict
            .as_ref()
            .map(|conflict| conflict.last_seen + conflict.delay)
    }

    /// A write succeeded: counts it if it healed.
    pub(crate) fn written(&mut self, metrics: &Metrics) {
        if std::mem::take(&mut self.healing) {
            metrics.report_healed();
        }
    }

    /// Ends a conflict nobody has renewed for [`CONFLICT_QUIET`]; true when it did (the
    /// report must be written again without it).
    pub(crate) fn expire(&mut self, now: Instant, metrics: &Metrics) -> bool {
        let quiet = self
            .conflict
            .as_ref()
            .is_some_and(|conflict| now.duration_since(conflict.last_seen) >= CONFLICT_QUIET);
        if quiet {
            self.conflict = None;
            metrics.set_report_conflict(None);
            info!("node report: no other agent has written it for a while; the conflict is over");
        }
        quiet
    }

    /// The report's `conflict` field (none when there is none).
    pub(crate) fn conflict(&self) -> Option<dw_node_report::Conflict> {
        self.conflict
            .as_ref()
            .map(|conflict| dw_node_report::Conflict {
                instance: Some(conflict.instance.clone()),
                revision: Some(conflict.revision),
                reason: Some(describe(conflict)),
            })
    }
}

fn describe(conflict: &Conflict) -> String {
    format!(
        "node report conflict: another agent (instance {}) wrote this node's report at revision \
         {} (this agent is instance {}): two agents with one node id?",
        conflict.instance.chars().take(64).collect::<String>(),
        conflict.revision,
        instance_id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn metrics() -> Metrics {
        Metrics::new(Duration::from_secs(60), None)
    }

    #[test]
    fn changes_are_sorted_by_who_made_them() {
        let own = VecDeque::from([10]);
        let put = |value: &str, revision| {
            classify(
                EventType::Put,
                b"/dw/nodes/n",
                value.as_bytes(),
                7,
                revision,
                &own,
            )
        };
        assert_eq!(put("{}", 10), None);
        let ours = json!({"instance": instance_id()}).to_string();
        assert!(matches!(
            put(&ours, 11),
            Some(Change::Overwritten { lease: 7, .. })
        ));
        assert!(matches!(
            put(r#"{"revision":999999,"state":"ok"}"#, 12),
            Some(Change::Overwritten { .. })
        ));
        assert!(matches!(
            put("not json", 13),
            Some(Change::Overwritten { .. })
        ));
        assert!(matches!(
            put(r#"{"instance":""}"#, 13),
            Some(Change::Overwritten { .. })
        ));
        assert_eq!(
            put(r#"{"instance":"other"}"#, 14),
            Some(Change::Foreign {
                key: "/dw/nodes/n".into(),
                revision: 14,
                instance: "other".into()
            })
        );
        let deleted = classify(EventType::Delete, b"/dw/nodes/n", b"", 0, 15, &own);
        assert!(matches!(
            deleted,
            Some(Change::Deleted { revision: 15, .. })
        ));
    }

    #[test]
    fn a_conflict_backs_off_doubling_and_ends_when_quiet() {
        let metrics = metrics();
        let mut healer = Healer::default();
        let now = Instant::now();
        let foreign = |revision| Change::Foreign {
            key: "k".into(),
            revision,
            instance: "other".into(),
        };
        healer.changed(foreign(5), now, &metrics);
        assert_eq!(healer.not_before(), Some(now + CONFLICT_FIRST_DELAY));
        assert!(metrics.health().unwrap_err().contains("instance other"));
        assert_eq!(
            healer
                .conflict()
                .and_then(|conflict| conflict.instance)
                .as_deref(),
            Some("other")
        );
        let mut delay = CONFLICT_FIRST_DELAY;
        for revision in 6..20 {
            healer.changed(foreign(revision), now, &metrics);
            delay = (delay * 2).min(CONFLICT_MAX_DELAY);
            assert_eq!(healer.not_before(), Some(now + delay));
        }
        assert_eq!(delay, CONFLICT_MAX_DELAY);
        assert!(!healer.expire(now + CONFLICT_QUIET - Duration::from_millis(1), &metrics));
        assert!(healer.expire(now + CONFLICT_QUIET, &metrics));
        assert_eq!(healer.not_before(), None);
        assert_eq!(healer.conflict(), None);
    }

    #[test]
    fn a_heal_is_counted_once_written() {
        let metrics = metrics();
        let mut healer = Healer::default();
        let deleted = Change::Deleted {
            key: "k".into(),
            revision: 3,
        };
        healer.changed(deleted, Instant::now(), &metrics);
        healer.written(&metrics);
        healer.written(&metrics);
        assert!(metrics.render().contains("dw_agent_report_heals_total 1\n"));
        assert_eq!(healer.not_before(), None);
    }
}
