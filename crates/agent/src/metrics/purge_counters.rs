//! The purge counters `/metrics` serves (`dw_agent_purge_requests_total`,
//! `dw_agent_purge_failures_total`), shared by the purge task and the metrics: handles on
//! the two series of `metrics::series`; and since when purges fail (the heartbeat's
//! `purge_failing_since`, docs/agent.md).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::metrics::series::Count;

/// Purge requests sent and failed since start.
#[derive(Debug, Default, Clone)]
pub(crate) struct PurgeCounters {
    requests: Count,
    failures: Count,
    /// Unix seconds of the first failure since the last request that landed; 0: none.
    failing_since: Arc<AtomicU64>,
}

impl PurgeCounters {
    /// Handles on the registered series.
    pub(crate) fn new(requests: Count, failures: Count) -> PurgeCounters {
        PurgeCounters {
            requests,
            failures,
            failing_since: Arc::default(),
        }
    }

    /// A request was sent (answered or not); `failed` when it did not land.
    pub(crate) fn sent(&self, failed: bool) {
        self.requests.inc();
        if failed {
            self.failures.inc();
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(1, |d| d.as_secs().max(1));
            let _ = self
                .failing_since
                .compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
        } else {
            self.failing_since.store(0, Ordering::SeqCst);
        }
    }

    /// Since when (Unix seconds) every purge request failed: the first failure after the
    /// last request that landed. `None` while the last one landed (or none was sent).
    pub(crate) fn failing_since(&self) -> Option<u64> {
        Some(self.failing_since.load(Ordering::SeqCst)).filter(|&t| t != 0)
    }

    /// Purge requests that did not land (connect error, timeout, not 200).
    pub(crate) fn failures(&self) -> u64 {
        self.failures.get()
    }
}
