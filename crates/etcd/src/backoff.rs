//! Exponential backoff with full jitter: after the n-th consecutive failure the caller
//! sleeps a uniformly random time in `[0, min(max, initial * 2^n))`.
//!
//! Full jitter matters for a fleet: when an etcd member restarts, thousands of agents (or
//! `dwctl` daemons) lose their session at the same instant, and without jitter they would
//! all come back in lockstep.

use std::time::Duration;

/// The backoff state of one retrying loop.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    failures: u32,
}

impl Backoff {
    /// A backoff whose first ceiling is `initial`, doubling up to `max`.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff {
            initial,
            max,
            failures: 0,
        }
    }

    /// The ceiling the next delay is drawn under.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.initial.saturating_mul(factor).min(self.max)
    }

    /// Records a failure and returns how long to wait before the next attempt.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        if nanos == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(fastrand::u64(..nanos))
    }

    /// Forgets past failures (after a success, or a healthy period).
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceiling_doubles_up_to_the_cap_and_resets() {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut ceilings = Vec::new();
        for _ in 0..6 {
            ceilings.push(backoff.ceiling().as_millis());
            let delay = backoff.next_delay();
            assert!(delay < Duration::from_secs(1));
        }
        assert_eq!(ceilings, [100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.ceiling(), Duration::from_millis(100));
    }

    #[test]
    fn delays_are_spread_over_the_whole_range() {
        let mut backoff = Backoff::new(Duration::from_secs(10), Duration::from_secs(10));
        let delays: Vec<Duration> = (0..200).map(|_| backoff.next_delay()).collect();
        assert!(delays.iter().all(|d| *d < Duration::from_secs(10)));
        assert!(delays.iter().any(|d| *d < Duration::from_secs(2)));
        assert!(delays.iter().any(|d| *d > Duration::from_secs(8)));
    }

    #[test]
    fn huge_failure_counts_do_not_overflow() {
        let mut backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(5));
        backoff.failures = u32::MAX;
        assert_eq!(backoff.ceiling(), Duration::from_secs(5));
        assert!(backoff.next_delay() < Duration::from_secs(5));
    }

    #[test]
    fn a_zero_ceiling_waits_not_at_all() {
        let mut backoff = Backoff::new(Duration::ZERO, Duration::from_secs(5));
        assert_eq!(backoff.next_delay(), Duration::ZERO);
    }
}
