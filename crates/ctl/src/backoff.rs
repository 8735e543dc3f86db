//! Reconnect pauses for the long-running commands: growing, capped and jittered, so that a
//! fleet of them does not stampede an etcd cluster that just came back.

use std::time::Duration;

#[derive(Debug, Clone)]
pub struct Backoff {
    next: Duration,
    initial: Duration,
    cap: Duration,
}

impl Backoff {
    pub fn new(initial: Duration, cap: Duration) -> Backoff {
        Backoff {
            next: initial,
            initial,
            cap,
        }
    }

    /// The pause before the next attempt: between half and all of the current bound, which
    /// then doubles up to the cap.
    pub fn pause(&mut self) -> Duration {
        let bound = self.next;
        self.next = (self.next * 2).min(self.cap);
        bound.mul_f64(0.5 + fastrand::f64() / 2.0)
    }

    /// After a success: start small again.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}
