//! [`CommitNote`]: what a one-shot command has already written, for whoever stops it.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// The revision a command's write committed at, once it has (shared with the signal
/// handler of `main_with`, which then says the write is in instead of "nothing was sent").
#[derive(Debug, Clone, Default)]
pub struct CommitNote(Arc<AtomicI64>);

impl CommitNote {
    /// Notes that the write committed at `revision` (a positive etcd revision).
    pub fn set(&self, revision: i64) {
        self.0.store(revision.max(1), Ordering::SeqCst);
    }

    /// The revision noted, if the write committed.
    pub fn committed(&self) -> Option<i64> {
        let revision = self.0.load(Ordering::SeqCst);
        (revision > 0).then_some(revision)
    }
}
