//! The purge counters `/metrics` serves (`dw_agent_purge_requests_total`,
//! `dw_agent_purge_failures_total`), shared by the purge task and the metrics.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::metric_help::single_valued_help;

/// Purge requests sent and failed since start.
#[derive(Debug, Default)]
pub(crate) struct PurgeCounters {
    requests: AtomicU64,
    failures: AtomicU64,
}

impl PurgeCounters {
    /// A request was sent (answered or not); `failed` when it did not land.
    pub(crate) fn sent(&self, failed: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Purge requests that did not land (connect error, timeout, not 200).
    pub(crate) fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// Both counters in the text exposition, as the other single-valued metrics are.
    pub(crate) fn render(&self, out: &mut String) {
        for (name, counter) in [
            ("dw_agent_purge_requests_total", &self.requests),
            ("dw_agent_purge_failures_total", &self.failures),
        ] {
            let (kind, help) = single_valued_help(name);
            let value = counter.load(Ordering::Relaxed);
            let _ = write!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n"
            );
        }
    }
}
