//! The health checker's streak rule, one for `dwctl health` and a rollout's bake: an origin
//! is unhealthy after `fail_after` failed probes in a row, and healthy again after
//! `recover_after` successful ones in a row.

/// Consecutive results of one origin's probes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Streak {
    /// Failed probes in a row (0 after a success).
    pub failures: u32,
    /// Successful probes in a row (0 after a failure).
    pub successes: u32,
    /// The last failure's error, until a probe succeeds.
    pub last_error: Option<String>,
}

/// What one probe changed about a streak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn {
    /// A failure after a success (or the first probe failed).
    Failed,
    /// A success after failures.
    Recovered,
    /// As before.
    Same,
}

impl Streak {
    /// Records one probe (`Ok(status)` or `Err(why)`).
    pub fn record(&mut self, result: Result<u16, String>) -> Turn {
        match result {
            Ok(_) => {
                let turn = if self.failures > 0 {
                    Turn::Recovered
                } else {
                    Turn::Same
                };
                self.successes = self.successes.saturating_add(1);
                self.failures = 0;
                self.last_error = None;
                turn
            }
            Err(error) => {
                let turn = if self.failures == 0 {
                    Turn::Failed
                } else {
                    Turn::Same
                };
                self.failures = self.failures.saturating_add(1);
                self.successes = 0;
                self.last_error = Some(error);
                turn
            }
        }
    }

    /// Whether the origin is unhealthy: `fail_after` failures in a row.
    pub fn unhealthy(&self, fail_after: u32) -> bool {
        self.failures >= fail_after
    }

    /// Whether the origin is healthy again: `recover_after` successes in a row.
    pub fn recovered(&self, recover_after: u32) -> bool {
        self.successes >= recover_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_and_successes_count_in_a_row_at_their_edges() {
        let mut streak = Streak::default();
        assert_eq!(streak.record(Err("a".into())), Turn::Failed);
        assert_eq!(streak.record(Err("b".into())), Turn::Same);
        assert!(!streak.unhealthy(3));
        assert_eq!(streak.record(Err("c".into())), Turn::Same);
        assert!(streak.unhealthy(3));
        assert_eq!(streak.last_error.as_deref(), Some("c"));
        assert_eq!(streak.record(Ok(200)), Turn::Recovered);
        assert!(!streak.unhealthy(1));
        assert!(streak.recovered(1) && !streak.recovered(2));
        assert_eq!(streak.record(Ok(200)), Turn::Same);
        assert!(streak.recovered(2));
        assert_eq!(streak.last_error, None);
    }
}
