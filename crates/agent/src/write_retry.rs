//! Retrying failed snapshot writes with backoff, logging each distinct cause once.

use std::time::{Duration, Instant};

use dw_etcd::Backoff;

/// Failed writes are retried with backoff, and logged once per distinct cause.
#[derive(Debug)]
pub(crate) struct WriteRetry {
    backoff: Backoff,
    /// No write before this, after a failure.
    not_before: Option<Instant>,
    /// The cause of the last failure, until a write succeeds.
    pub(crate) last_cause: Option<String>,
}

impl WriteRetry {
    pub(crate) fn new(initial: Duration, max: Duration) -> WriteRetry {
        WriteRetry {
            backoff: Backoff::new(initial, max),
            not_before: None,
            last_cause: None,
        }
    }

    pub(crate) fn due(&self, now: Instant) -> bool {
        self.not_before.is_none_or(|not_before| now >= not_before)
    }

    /// A write failed: the delay until the next attempt.
    pub(crate) fn failed(&mut self, now: Instant) -> Duration {
        let delay = self.backoff.next_delay();
        self.not_before = Some(now + delay);
        delay
    }

    /// A write succeeded; true when it ends a run of failures.
    pub(crate) fn succeeded(&mut self) -> bool {
        self.backoff.reset();
        self.not_before = None;
        self.last_cause.take().is_some()
    }
}
