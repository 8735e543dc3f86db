//! The purge counters `/metrics` serves (`dw_agent_purge_requests_total`,
//! `dw_agent_purge_failures_total`), shared by the purge task and the metrics: handles on
//! the two series of `metrics::series`.

use crate::metrics::series::Count;

/// Purge requests sent and failed since start.
#[derive(Debug, Default, Clone)]
pub(crate) struct PurgeCounters {
    requests: Count,
    failures: Count,
}

impl PurgeCounters {
    /// Handles on the registered series.
    pub(crate) fn new(requests: Count, failures: Count) -> PurgeCounters {
        PurgeCounters { requests, failures }
    }

    /// A request was sent (answered or not); `failed` when it did not land.
    pub(crate) fn sent(&self, failed: bool) {
        self.requests.inc();
        if failed {
            self.failures.inc();
        }
    }

    /// Purge requests that did not land (connect error, timeout, not 200).
    pub(crate) fn failures(&self) -> u64 {
        self.failures.get()
    }
}
