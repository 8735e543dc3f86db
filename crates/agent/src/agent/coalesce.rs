//! Burst coalescing (`--coalesce-window`): the first change after a quiet spell is
//! published at once, as a drain must be; changes that arrive within the window after a
//! publication wait for the window's end and are published together, in one file holding
//! the state at the newest revision. A burst of puts then costs one publication per
//! window on every node (and at most one re-parse per window in every PHP worker), not
//! one per put. Nothing is lost: the state waiting is the mirror itself, and it is
//! published at the window's end.
//!
//! ```text
//!   change ──► last write older than the window? ──yes──► publish now
//!                         │ no
//!                         └──► wait until last write + window, then publish the mirror
//! ```

use std::time::{Duration, Instant};

/// When the next publication may be written, and what waits for it.
#[derive(Debug)]
pub(crate) struct Coalescer {
    window: Duration,
    /// When the last publication was renamed into place.
    last_written: Option<Instant>,
    /// While changes wait for the window's end: when the first of them arrived.
    waiting_since: Option<Instant>,
}

impl Coalescer {
    /// A zero `window` publishes every change at once.
    pub(crate) fn new(window: Duration) -> Coalescer {
        Coalescer {
            window,
            last_written: None,
            waiting_since: None,
        }
    }

    /// A watch response that changed the mirror arrived at `received`: true when its
    /// publication waits for the window's end (a publication was written less than a
    /// window before), false when it is to be published now.
    pub(crate) fn defer(&mut self, received: Instant) -> bool {
        let within = self
            .last_written
            .and_then(|at| at.checked_add(self.window))
            .is_some_and(|end| received < end);
        if within {
            self.waiting_since.get_or_insert(received);
        }
        within
    }

    /// When the changes waiting are to be published (`None`: nothing waits).
    pub(crate) fn deadline(&self) -> Option<Instant> {
        self.waiting_since?;
        self.last_written?.checked_add(self.window)
    }

    /// A publication of the whole mirror is being attempted: nothing waits any more (if
    /// it is not written, the mirror stays dirty and the watchdog's tick retries).
    /// Returns when the earliest change it carries arrived: the first one that waited,
    /// else `received`.
    pub(crate) fn attempt(&mut self, received: Option<Instant>) -> Option<Instant> {
        self.waiting_since.take().or(received)
    }

    /// A publication was renamed into place at `at`.
    pub(crate) fn written(&mut self, at: Instant) {
        self.last_written = Some(at);
    }
}

/// Completes at `deadline`; never without one.
pub(crate) async fn window_end(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline.into()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bounds::MAX_COALESCE_WINDOW;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_change_after_a_quiet_spell_goes_at_once_the_rest_wait() {
        let start = Instant::now();
        let mut coalescer = Coalescer::new(100 * MS);
        // Nothing written yet (the listing's publication comes first in practice).
        assert!(!coalescer.defer(start));
        coalescer.written(start);
        // Within the window: waits, until the window's end, for the first one's arrival.
        assert!(coalescer.defer(start + 10 * MS));
        assert!(coalescer.defer(start + 99 * MS));
        assert_eq!(coalescer.deadline(), Some(start + 100 * MS));
        assert_eq!(coalescer.attempt(None), Some(start + 10 * MS));
        assert_eq!(coalescer.deadline(), None);
        coalescer.written(start + 100 * MS);
        // The window's edge belongs to the next quiet spell: published at once.
        assert!(!coalescer.defer(start + 200 * MS));
        assert_eq!(coalescer.deadline(), None);
        assert_eq!(
            coalescer.attempt(Some(start + 200 * MS)),
            Some(start + 200 * MS)
        );
    }

    #[test]
    fn a_zero_window_never_waits() {
        let start = Instant::now();
        let mut coalescer = Coalescer::new(Duration::ZERO);
        coalescer.written(start);
        assert!(!coalescer.defer(start));
        assert!(!coalescer.defer(start + MS));
        assert_eq!(coalescer.deadline(), None);
    }

    #[test]
    fn the_longest_window_is_usable() {
        let start = Instant::now();
        let mut coalescer = Coalescer::new(MAX_COALESCE_WINDOW);
        coalescer.written(start);
        assert!(coalescer.defer(start + MAX_COALESCE_WINDOW - MS));
        assert_eq!(coalescer.deadline(), Some(start + MAX_COALESCE_WINDOW));
    }
}
