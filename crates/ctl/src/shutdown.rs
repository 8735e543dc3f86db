//! The stop signal long-running commands watch: SIGTERM or SIGINT in the binary, a plain
//! trigger in tests.

use tokio::sync::watch;

/// Resolves [`Shutdown::wait`] for every clone once triggered.
#[derive(Debug, Clone)]
pub struct Shutdown(watch::Receiver<bool>);

/// The sending half of [`Shutdown`].
#[derive(Debug)]
pub struct ShutdownTrigger(watch::Sender<bool>);

impl ShutdownTrigger {
    /// Triggers every [`Shutdown`] of this pair.
    pub fn trigger(&self) {
        let _ = self.0.send(true);
    }
}

impl Shutdown {
    /// A trigger and the shutdown it triggers.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (sender, receiver) = watch::channel(false);
        (ShutdownTrigger(sender), Shutdown(receiver))
    }

    /// Triggered by the first SIGTERM or SIGINT. Must be called inside a tokio runtime.
    pub fn on_signals() -> std::io::Result<Shutdown> {
        use tokio::signal::unix::{SignalKind, signal};
        let (trigger, shutdown) = Shutdown::new();
        let mut terminate = signal(SignalKind::terminate())?;
        let mut interrupt = signal(SignalKind::interrupt())?;
        tokio::spawn(async move {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = interrupt.recv() => {}
            }
            trigger.trigger();
            // Keep the sender alive: dropping it would look like a trigger to nobody.
            std::future::pending::<()>().await;
        });
        Ok(shutdown)
    }

    /// Whether the trigger has fired.
    pub fn is_triggered(&self) -> bool {
        *self.0.borrow()
    }

    /// Waits until triggered (forever when the trigger was dropped untriggered).
    pub async fn wait(&mut self) {
        if self.0.wait_for(|stopped| *stopped).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Sleeps for `duration`; returns `false` when the shutdown came first.
    pub async fn sleep(&mut self, duration: std::time::Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(duration) => true,
            _ = self.wait() => false,
        }
    }
}
