//! The fork generation.
//!
//! PHP-FPM and lsphp run MINIT in a parent and then fork workers. A thread does not
//! survive `fork`, so a watcher started before a fork is gone in the child. Instead of
//! calling `getpid()` on every request, the `pthread_atfork` child handler (installed by
//! the module lifecycle in `lib.rs`) bumps a generation counter; a source compares the
//! generation it was set up in with the current one, an atomic load on the hot path.

use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

/// How many forks separate this process from the one that ran MINIT.
#[inline]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

/// Called in a new child, from the fork handler.
pub fn forked() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
}
