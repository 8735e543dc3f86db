//! `dw_router_answers_total` and `dw_router_answers_overflow_total`: the answers the
//! node's `dw_router.so` workers counted (docs/traffic.md), read from the counter files in
//! `--answers-dir` at each scrape.
//!
//! The files are written by the PHP user, so they are hostile input here: dw-traffic
//! reads them with a fixed layout and bounds (no symlinks, no FIFOs, exact size, at most
//! `dw_traffic::MAX_FILES` files, label values at most 128 bytes), and every label value
//! is escaped again before it is encoded. Nothing read here reaches routing, the
//! snapshot or the agent's health: a bad file only costs its own series.

use std::path::PathBuf;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

use crate::metrics::label_value::label_value;

/// The collector: the directory and the node id every series carries.
#[derive(Debug)]
pub(crate) struct Answers {
    pub(crate) dir: PathBuf,
    pub(crate) node: String,
}

const ANSWERS_HELP: &str = "Answers of RegionRouter::resolve() counted by this node's PHP workers (answers, not requests: an app may resolve() more than once per request, and pages served from LSCache never reach PHP), by the geo asked as counted, the chain step and region key that answered, the origin and shard answered, and whether a sticky key was given";
const OVERFLOW_HELP: &str = "Answers counted without their labels: past the 4096 label sets a counter file holds, or by a worker that found none of the 256 slots free";

impl Collector for Answers {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let found = dw_traffic::read_directory(&self.dir);
        for (file, why) in &found.refused {
            tracing::debug!(file = %label_value(file.as_bytes()), %why, "answer counter file not read");
        }
        if found.refused_more > 0 {
            tracing::debug!(more = found.refused_more, "answer counter files not read");
        }
        if found.unscanned {
            tracing::warn!(
                dir = %self.dir.display(),
                limit = dw_traffic::MAX_SCANNED_ENTRIES,
                "the answers directory holds more entries than are scanned: counts may be missing"
            );
        }
        let mut family = encoder.encode_descriptor(
            "dw_router_answers",
            ANSWERS_HELP,
            None,
            MetricType::Counter,
        )?;
        for (labels, answers) in &found.totals.series {
            let set: Vec<(&str, String)> = vec![
                ("node", self.node.clone()),
                ("geo", label_value(&labels.geo)),
                ("step", labels.step.name().to_owned()),
                ("key", label_value(&labels.key)),
                ("origin", label_value(&labels.origin)),
                ("shard", label_value(&labels.shard)),
                ("sticky", labels.sticky.to_string()),
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
        ConstCounter::new(found.totals.overflow).encode(overflow.encode_family(&set)?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use dw_traffic::{Counters, LabelSet, ProcessLocks, Step, count, words_to_bytes, zeroed_words};

    use crate::metrics::Metrics;

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
        let metrics = Metrics::new(Duration::from_secs(60), None)
            .with_answers(dir.path().to_owned(), "node-a".into());
        let text = metrics.render();
        assert!(
            text.contains("# HELP dw_router_answers_total Answers of RegionRouter::resolve()"),
            "{text}"
        );
        assert!(text.contains("answers, not requests"));
        assert!(text.contains(
            "dw_router_answers_total{node=\"node-a\",geo=\"DE\",step=\"country\",key=\"DE\",origin=\"fra-a\",shard=\"eu-1\",sticky=\"false\"} 4\n"
        ), "{text}");
        assert!(text.contains(
            "dw_router_answers_total{node=\"node-a\",geo=\"x%22%7D%0A\",step=\"fail_open\",key=\"\",origin=\"o%5C\",shard=\"s\",sticky=\"true\"} 2\n"
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
        let metrics = Metrics::new(Duration::from_secs(60), None)
            .with_answers("/nonexistent/dw-answers".into(), "n".into());
        let text = metrics.render();
        assert!(
            text.contains("dw_router_answers_overflow_total{node=\"n\"} 0\n"),
            "{text}"
        );
        assert!(!text.contains("dw_router_answers_total{"));
    }
}
