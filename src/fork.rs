//! Fork awareness.
//!
//! PHP-FPM and lsphp run MINIT in a parent and then fork workers. A thread does not
//! survive `fork`, so a watcher started before a fork is gone in the child. Instead of
//! calling `getpid()` on every request, a `pthread_atfork` child handler bumps a
//! generation counter; a source compares the generation it was set up in with the
//! current one, an atomic load on the hot path.
//!
//! The same handlers hold the locks across `fork` (the reload lock, the watcher state,
//! the registry, the shared default reader), so a child never inherits one locked by a
//! thread that no longer exists.

use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

static GENERATION: AtomicU64 = AtomicU64::new(0);

#[inline]
pub fn generation() -> u64 {
    GENERATION.load(Ordering::Relaxed)
}

extern "C" fn prepare() {
    // Before any lock is taken: it reloads under the reload lock itself.
    crate::preload::before_fork();
    // Lock order: the shared default reader (held while a resolve() may set up a watch or
    // reload), watcher state, reload, registry, the count of watches being set up.
    std::mem::forget(crate::router::DEFAULT_READER.lock());
    std::mem::forget(crate::watch::WATCH_STATE.lock());
    std::mem::forget(crate::watch::RELOAD_LOCK.lock());
    std::mem::forget(crate::registry::lock_for_fork());
    std::mem::forget(crate::watch::SETTING_UP.lock());
}

extern "C" fn parent() {
    // SAFETY: `prepare` locked both and forgot the guards, in this thread.
    unsafe {
        crate::watch::SETTING_UP.force_unlock();
        crate::registry::unlock_after_fork();
        crate::watch::RELOAD_LOCK.force_unlock();
        crate::watch::WATCH_STATE.force_unlock();
        crate::router::DEFAULT_READER.force_unlock();
    }
}

extern "C" fn child() {
    GENERATION.fetch_add(1, Ordering::Relaxed);
    // SAFETY: as in `parent`; the child has only the forking thread.
    unsafe {
        crate::watch::SETTING_UP.force_unlock();
        crate::registry::unlock_after_fork();
        crate::watch::RELOAD_LOCK.force_unlock();
        crate::watch::WATCH_STATE.force_unlock();
        crate::router::DEFAULT_READER.force_unlock();
    }
}

/// Installs the handlers, once per process: the first time a watcher is set up, or in
/// MINIT when it preloaded. glibc removes them again if the extension is unloaded.
pub fn install_handlers() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers are plain functions that only touch statics.
        unsafe {
            libc::pthread_atfork(Some(prepare), Some(parent), Some(child));
        }
    });
}
