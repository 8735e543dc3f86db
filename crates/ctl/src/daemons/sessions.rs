//! The loop of the long-running commands (`origin register`, `rebalance`): run a session;
//! after a failed one, report it and pause (growing, capped, jittered) before the next;
//! stop at the shutdown.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use crate::error::Error;
use crate::output::Reporter;
use crate::shutdown::Shutdown;
use dw_etcd::Backoff;

/// One session, borrowing the shutdown and the backoff for its length.
pub type Session<'a> = Pin<Box<dyn Future<Output = Result<bool, Error>> + Send + 'a>>;

/// What the loop keeps between sessions: where events go, the stop signal, the pauses.
pub struct Sessions {
    /// Prints the `error` event of a failed session.
    pub reporter: Reporter,
    /// Ends the loop, between sessions or during a pause.
    pub shutdown: Shutdown,
    /// The pause after a failed session (a session resets it once it is going).
    pub backoff: Backoff,
}

impl Sessions {
    /// The first pause is 300 ms; each failure doubles it up to `cap`.
    pub fn new(reporter: Reporter, shutdown: Shutdown, cap: Duration) -> Sessions {
        let backoff = Backoff::new(Duration::from_millis(300), cap);
        Sessions {
            reporter,
            shutdown,
            backoff,
        }
    }

    /// Runs `session` (on `config`) until it returns `Ok(true)` (done) or the shutdown
    /// comes; `Ok(false)` starts the next session at once, an error after the next pause,
    /// reported as event `error` with the text and fields `describe` gives it.
    pub async fn run<Config: Sync>(
        mut self,
        config: &Config,
        describe: impl Fn(&Error) -> (String, Value),
        mut session: impl for<'a> FnMut(&'a Config, &'a mut Shutdown, &'a mut Backoff) -> Session<'a>,
    ) {
        while !self.shutdown.is_triggered() {
            match session(config, &mut self.shutdown, &mut self.backoff).await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => {
                    let (text, fields) = describe(&error);
                    self.reporter.event("error", &text, fields);
                    if !self.shutdown.sleep(self.backoff.next_delay()).await {
                        return;
                    }
                }
            }
        }
    }
}
