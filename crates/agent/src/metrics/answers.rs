//! `dw_router_answers_total` and `dw_router_answers_overflow_total`: the answers the
//! node's `dw_router.so` workers counted (docs/traffic.md), read at each scrape from the
//! counter files of the node's PHP users (`--php-users`) in `--answers-dir`, each opened by
//! its name: no other user's file is read, and no file of another name can take a user's
//! place. `dw_agent_counter_files{state}` says how many of those users' files were read,
//! missing or refused; a change of a user's file to missing or refused is logged at warn.
//!
//! The files are written by the PHP user, so they are hostile input here: dw-traffic
//! reads them with a fixed layout and bounds (no symlinks, no FIFOs, exact size, owned by
//! their user, at most `dw_traffic::MAX_FILES` users, label values at most 128 bytes), and
//! every label value is escaped again before it is encoded. Nothing read here reaches
//! routing, the snapshot or the agent's health: a bad file only costs its own series.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::metrics::label_value::label_value;

/// The collector: the directory, the PHP users whose files are read, and the node id
/// every series carries.
#[derive(Debug)]
pub(crate) struct Answers {
    pub(crate) dir: PathBuf,
    pub(crate) node: String,
    /// The `--php-users` users: each as configured, and its uid (None: names no user).
    pub(crate) users: Vec<(String, Option<u32>)>,
    /// Each user's file state at the last scrape (by the user's name as configured), so
    /// that a change is logged once, not at every scrape.
    last: Mutex<BTreeMap<String, &'static str>>,
}

impl Answers {
    pub(crate) fn new(dir: PathBuf, node: String, users: Vec<(String, Option<u32>)>) -> Answers {
        Answers {
            dir,
            node,
            users,
            last: Mutex::new(BTreeMap::new()),
        }
    }

    /// Reads the users' files: their totals, and how many files are in each state
    /// (read, missing, refused). Logs a user whose file's state changed: at warn when it
    /// is not read (missing or refused, with why), at info when it is read again.
    fn read(&self) -> (dw_traffic::Totals, [u64; 3]) {
        let uids: Vec<u32> = self.users.iter().filter_map(|(_, uid)| *uid).collect();
        let found = dw_traffic::read_users(&self.dir, &uids);
        let mut states = [0u64; 3];
        let mut last = self
            .last
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut files = found.files.iter();
        for (name, uid) in &self.users {
            let (state, file, why) = match uid {
                None => ("missing", None, "names no user on this node".to_owned()),
                Some(_) => match files.next() {
                    Some((_, path, state)) => (
                        state.name(),
                        Some(path),
                        match state {
                            dw_traffic::FileState::Refused(why) => why.to_string(),
                            _ => String::new(),
                        },
                    ),
                    None => continue,
                },
            };
            states[match state {
                "read" => 0,
                "missing" => 1,
                _ => 2,
            }] += 1;
            if last.insert(name.clone(), state) == Some(state) {
                continue;
            }
            let file = file.map(|path| label_value(path.as_os_str().as_encoded_bytes()));
            if state == "read" {
                tracing::info!(user = %name, file = file.as_deref().unwrap_or(""), "answer counter file read");
            } else {
                tracing::warn!(user = %name, file = file.as_deref().unwrap_or(""), state, %why,
                    "answer counter file not read: this user's answers are not counted (dw_agent_counter_files)");
            }
        }
        (found.totals, states)
    }
}

const FILES_HELP: &str = "The --php-users users' answer counter files at the last scrape, by state: read, missing (not there, or the user names no user here) or refused (not the user's, not a regular file, another layout, or in a per-user directory others can write); their answers are not counted";

const ANSWERS_HELP: &str = "Answers of RegionRouter::resolve() counted by this node's PHP workers (answers, not requests: an app may resolve() more than once per request, and pages served from LSCache never reach PHP), by the geo asked as counted, the chain step and region key that answered, the origin and shard answered, and how the origin was picked (kind: plain, sticky for a sticky key, bucket for a visitor bucket)";
const OVERFLOW_HELP: &str = "Answers counted without their labels: past the 4096 label sets a counter file holds, or by a worker that found none of the 256 slots free";

impl Collector for Answers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (totals, states) = self.read();
        let mut files = encoder.encode_descriptor(
            "dw_agent_counter_files",
            FILES_HELP,
            None,
            MetricType::Gauge,
        )?;
        for (state, value) in ["read", "missing", "refused"].into_iter().zip(states) {
            let set = vec![("state", state.to_owned())];
            ConstGauge::new(value as i64).encode(files.encode_family(&set)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "dw_router_answers",
            ANSWERS_HELP,
            None,
            MetricType::Counter,
        )?;
        for (labels, answers) in &totals.series {
            let set: Vec<(&str, String)> = vec![
                ("node", self.node.clone()),
                ("geo", label_value(&labels.geo)),
                ("step", labels.step.name().to_owned()),
                ("key", label_value(&labels.key)),
                ("origin", label_value(&labels.origin)),
                ("shard", label_value(&labels.shard)),
                ("kind", labels.kind.name().to_owned()),
            ];
            ConstCounter::new(*answers).encode(family.encode_family(&set)?)?;
        }
        let mut overflow = encoder.encode_descriptor(
            "dw_router_answers_overflow",
            OVERFLOW_HELP,
            None,
            MetricType::Counter,
        )?;
        let set = vec![("node", self.node.clone())];
        ConstCounter::new(totals.overflow).encode(overflow.encode_family(&set)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dw_traffic::{Counters, LabelSet, ProcessLocks, Step, count, words_to_bytes, zeroed_words};

    use crate::metrics::Metrics;

    /// PHP users by uid.
    fn uids(uids: &[u32]) -> Vec<(String, Option<u32>)> {
        uids.iter()
            .map(|&uid| (uid.to_string(), Some(uid)))
            .collect()
    }

    /// A counter file as workers leave it: DE twice, a hostile label once, one overflow.
    fn counter_file() -> Vec<u8> {
        let words = zeroed_words();
        let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
        let slot = counters.slot_counters(counters.claim_slot(1).unwrap());
        let de = LabelSet::new(b"DE", Step::Country, b"DE", b"fra-a", b"eu-1", false);
        let hostile = LabelSet::new(b"x\"}\n", Step::FailOpen, b"", b"o\\", b"s", true);
        count(slot, counters.label_id(&de));
        count(slot, counters.label_id(&de));
        count(slot, counters.label_id(&hostile));
        count(slot, dw_traffic::layout::OVERFLOW_ID);
        words_to_bytes(&words)
    }

    #[test]
    fn serves_every_file_s_answers_with_the_node_and_skips_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        // Each file owned by the uid its name gives, as the extension makes it (the tests
        // run as root in the devenv; a file owned by another uid is refused).
        let owned = |uid: u32| {
            let path = dir.path().join(dw_traffic::file_name(uid));
            std::fs::write(&path, counter_file()).unwrap();
            std::os::unix::fs::chown(&path, Some(uid), None).expect("chown (root, in the devenv)");
        };
        owned(1000);
        // A second tree's file (another user): added up with the first.
        owned(1001);
        // Hostile neighbours: garbage of the right size, a short file, a symlink.
        std::fs::write(
            dir.path().join("answers-1.bin"),
            vec![0xA5; dw_traffic::layout::FILE_BYTES],
        )
        .unwrap();
        std::fs::write(dir.path().join("answers-2.bin"), b"short").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("answers-3.bin")).unwrap();
        let metrics = Metrics::new(Duration::from_secs(60), None).with_answers(
            dir.path().to_owned(),
            "node-a".into(),
            uids(&[1, 2, 3, 1000, 1001]),
        );
        let text = metrics.render();
        assert!(
            text.contains("# HELP dw_router_answers_total Answers of RegionRouter::resolve()"),
            "{text}"
        );
        assert!(text.contains("answers, not requests"));
        assert!(text.contains(
            "dw_router_answers_total{node=\"node-a\",geo=\"DE\",step=\"country\",key=\"DE\",origin=\"fra-a\",shard=\"eu-1\",kind=\"plain\"} 4\n"
        ), "{text}");
        assert!(text.contains(
            "dw_router_answers_total{node=\"node-a\",geo=\"x%22%7D%0A\",step=\"fail_open\",key=\"\",origin=\"o%5C\",shard=\"s\",kind=\"sticky\"} 2\n"
        ), "{text}");
        assert!(
            text.contains("dw_router_answers_overflow_total{node=\"node-a\"} 2\n"),
            "{text}"
        );
        // The agent's own health does not depend on them.
        assert!(text.contains("dw_agent_healthy 0\n") || text.contains("dw_agent_healthy 1\n"));
    }

    #[test]
    fn a_missing_directory_serves_a_zero_overflow() {
        let metrics = Metrics::new(Duration::from_secs(60), None).with_answers(
            "/nonexistent/dw-answers".into(),
            "n".into(),
            uids(&[33]),
        );
        let text = metrics.render();
        assert!(
            text.contains("dw_router_answers_overflow_total{node=\"n\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("dw_router_answers_total{"));
    }

    /// Only the configured users' files are served: another user's own file, and a file it
    /// made under a PHP user's name, are not; each state is counted, never silent.
    #[test]
    fn serves_only_the_php_users_files_and_counts_each_state() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: String, owner: u32| {
            let path = dir.path().join(name);
            std::fs::write(&path, counter_file()).unwrap();
            std::os::unix::fs::chown(&path, Some(owner), None)
                .expect("chown (root, in the devenv)");
        };
        write(dw_traffic::file_name(1001), 1001); // the attacker's own
        write(dw_traffic::file_name(33), 1001); // made first under www-data's name
        write(dw_traffic::file_name(65534), 65534); // nobody's, genuine
        let mut users = uids(&[0, 33, 65534]);
        users.push(("no-such-user-dw".into(), None));
        let metrics = Metrics::new(Duration::from_secs(60), None).with_answers(
            dir.path().to_owned(),
            "n".into(),
            users,
        );
        let text = metrics.render();
        assert!(text.contains(
            "dw_router_answers_total{node=\"n\",geo=\"DE\",step=\"country\",key=\"DE\",origin=\"fra-a\",shard=\"eu-1\",kind=\"plain\"} 2\n"
        ), "nobody's file alone: {text}");
        assert!(
            text.contains("dw_agent_counter_files{state=\"read\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_agent_counter_files{state=\"missing\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_agent_counter_files{state=\"refused\"} 1\n"),
            "{text}"
        );
    }
}
