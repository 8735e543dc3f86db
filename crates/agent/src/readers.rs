//! The readers' verdict on the published file, kept for `/healthz` and the node report.

use tracing::{info, warn};

use crate::metrics::Metrics;
use crate::publish::Publisher;

/// Checks the published file (or, before there is one, the directory) by the readers'
/// trust rules, and records the verdict for `/healthz` and the node report; logs when the
/// verdict changes, once per distinct reason.
pub(crate) fn check_readers(publisher: &Publisher, metrics: &Metrics, last: &mut Option<String>) {
    let verdict = publisher.refused_by_readers();
    if verdict != *last {
        match &verdict {
            Some(reason) => warn!(reason = %reason,
                "the readers (dw_router) refuse the snapshot by their trust rules; PHP serves \
                 its last good table or the fail-open route until this is fixed"),
            None if last.is_some() => info!("the readers' trust rules take the snapshot again"),
            None => {}
        }
    }
    metrics.set_refused_by_readers(verdict.clone());
    *last = verdict;
}
