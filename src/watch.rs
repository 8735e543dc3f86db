//! Keeping sources fresh: one inotify watcher per process, or a throttled stat.
//!
//! The agent replaces the snapshot by rename, which an inotify watch on the file itself
//! would lose, so the watcher watches the file's directory and filters by name. Events
//! that only report a read (an open, or a close after reading: every worker's own reloads
//! make them) are ignored. One process-wide watcher (one thread, one inotify instance)
//! serves every directory. When inotify cannot be had (`fs.inotify.max_user_instances`
//! exhausted by many workers, a missing directory), the source falls back to a stat at
//! most every `dw_router.poll_interval_ms`, checked by the requests themselves.
//!
//! After the watcher's thread has reloaded, it calls the hook set with [`after_reloads`]
//! (the router moves its shared reader to the new table there), so this module knows
//! nothing of what uses the sources.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use notify::{INotifyWatcher, RecursiveMode, Watcher as _};
use parking_lot::{Condvar, Mutex};

use crate::fork;
use crate::registry;
use crate::source::{Mechanism, Source};

struct WatchState {
    generation: u64,
    epoch: u64,
    watcher: Option<INotifyWatcher>,
    directories: Vec<PathBuf>,
    /// Why inotify is unavailable in this process, once it failed.
    unavailable: Option<String>,
}

/// The watcher state. Never held while a reload runs: `watch()` waits for the watcher's
/// thread, which may itself be waiting for the reload lock inside `on_event`.
static WATCH_STATE: Mutex<WatchState> = Mutex::new(WatchState {
    generation: 0,
    epoch: 0,
    watcher: None,
    directories: Vec::new(),
    unavailable: None,
});

/// Bumped when a watched directory goes away: the watcher's list of directories is stale.
static WATCH_EPOCH: AtomicU64 = AtomicU64::new(0);

/// Watches being set up on a thread of their own, and those waiting for the end of the
/// request (see `start_watching`), in the fork generation they belong to. Held across
/// `fork` (see `lock_for_fork`), like the other locks here.
static SETTING_UP: Mutex<SetUps> = Mutex::new(SetUps {
    generation: 0,
    running: 0,
    deferred: Vec::new(),
});
static SET_UP_DONE: Condvar = Condvar::new();

/// Whether a child of a preloading parent sets its watches up after the request instead
/// of during it (see `start_watching`). Set once, in MINIT.
static DEFER_IN_CHILDREN: AtomicBool = AtomicBool::new(false);

/// Whether some set-up waits for the end of the request: RSHUTDOWN reads only this.
static DEFERRED_PENDING: AtomicBool = AtomicBool::new(false);

struct SetUps {
    generation: u64,
    /// Threads setting a watch up now.
    running: usize,
    /// Sources whose set-up waits for the end of the request.
    deferred: Vec<Arc<Source>>,
}

impl SetUps {
    /// This process's entry: one inherited from before a fork is another process's.
    fn current(&mut self, generation: u64) -> &mut SetUps {
        if self.generation != generation {
            self.generation = generation;
            self.running = 0;
            self.deferred.clear();
        }
        self
    }
}

/// From MINIT, in a process that preloaded the table: its children set up their watches
/// at the end of their first request, not in its first `resolve()`.
pub fn defer_set_up_in_children() {
    DEFER_IN_CHILDREN.store(true, Ordering::Relaxed);
}

/// Called on the watcher's thread after the reloads an event caused.
static AFTER_RELOADS: OnceLock<fn()> = OnceLock::new();

/// Sets the function the watcher's thread calls after the reloads of each event; once,
/// from MINIT.
pub fn after_reloads(hook: fn()) {
    let _ = AFTER_RELOADS.set(hook);
}

/// Takes this module's locks (the watcher state, then the count of watches being set up)
/// and keeps them until [`unlock_after_fork`]: from the fork `prepare` handler, so that a
/// child never inherits one held by a thread it does not have.
pub fn lock_for_fork() {
    std::mem::forget(WATCH_STATE.lock());
    std::mem::forget(SETTING_UP.lock());
}

/// # Safety
/// Only after `lock_for_fork`, in the same thread (or in the child it forked).
pub unsafe fn unlock_after_fork() {
    // SAFETY: upheld by the caller.
    unsafe {
        SETTING_UP.force_unlock();
        WATCH_STATE.force_unlock();
    }
}

/// Makes sure `source` is fresh enough to answer: set up its watch in this process if
/// that was not done since the last fork, else run a due poll. The common case is two
/// relaxed atomic loads.
#[inline(always)]
pub fn ensure_fresh(source: &Arc<Source>) {
    if source.is_watched_here() {
        source.poll_if_due();
    } else {
        start_watching(source);
    }
}

/// The first use of a source in a process (a fresh lsphp child or php-fpm worker, most
/// often): the request checks the file itself (one `stat`; the table is usually current,
/// inherited from a parent that preloaded it) and answers, while the inotify watch is set
/// up on a short-lived thread. Creating the watcher and adding a watch are round trips to
/// the watcher's own thread, which cost milliseconds on a busy machine; the request does
/// not wait for them. Until the watch exists the source polls, as when inotify is missing,
/// and once it exists the file is checked again, so no change between the two is lost.
///
/// In a child of a preloading parent even starting that thread waits for the end of the
/// request (`after_request`, from RSHUTDOWN): creating a thread took most of a fresh
/// child's first `resolve()` (BENCHMARKS.md, lsphp section), while the table it answers from is
/// already parsed and was checked against the file just now.
#[cold]
fn start_watching(source: &Arc<Source>) {
    let generation = fork::generation();
    source.mark_watched_here(generation);
    source.set_mechanism(Mechanism::Poll);
    source.refresh();
    if generation != 0 && DEFER_IN_CHILDREN.load(Ordering::Relaxed) {
        SETTING_UP
            .lock()
            .current(generation)
            .deferred
            .push(source.clone());
        DEFERRED_PENDING.store(true, Ordering::Relaxed);
        return;
    }
    spawn_set_up(source, generation);
}

/// Sets up the watches whose set-up waited for the end of the request. From RSHUTDOWN.
pub fn after_request() {
    if !DEFERRED_PENDING.swap(false, Ordering::Relaxed) {
        return;
    }
    let generation = fork::generation();
    let deferred = std::mem::take(&mut SETTING_UP.lock().current(generation).deferred);
    for source in &deferred {
        spawn_set_up(source, generation);
    }
}

/// Sets `source`'s watch up on a thread of its own (or here, when no thread can be had).
fn spawn_set_up(source: &Arc<Source>, generation: u64) {
    SETTING_UP.lock().current(generation).running += 1;
    let background = source.clone();
    let spawned = std::thread::Builder::new()
        .name("dw-router-watch".into())
        .spawn(move || {
            let _ = catch_unwind(AssertUnwindSafe(|| set_up(&background)));
            set_up_finished(generation);
        });
    if spawned.is_err() {
        // No thread to be had: set it up here, as the request's own work.
        set_up(source);
        set_up_finished(generation);
    }
}

fn set_up_finished(generation: u64) {
    let mut setting_up = SETTING_UP.lock();
    if setting_up.generation == generation {
        setting_up.running = setting_up.running.saturating_sub(1);
    }
    SET_UP_DONE.notify_all();
}

/// Waits (up to two seconds) until the watches being set up in this process exist, so that
/// `stats()`, `reload()` and phpinfo report the mechanism in use, not the interim poll.
pub fn settle() {
    after_request();
    let generation = fork::generation();
    let mut setting_up = SETTING_UP.lock();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while setting_up.generation == generation && setting_up.running > 0 {
        if SET_UP_DONE
            .wait_until(&mut setting_up, deadline)
            .timed_out()
        {
            break;
        }
    }
}

/// Sets up `source`'s watch (or its poll) in this process and checks the file once the
/// watch exists. On the short-lived thread of `start_watching`.
fn set_up(source: &Source) {
    let mut state = WATCH_STATE.lock();
    let generation = fork::generation();
    if state.generation != generation {
        // Inherited from the parent: its thread did not survive the fork. Dropping it
        // would signal a thread that is not there, so leak it (a few fds, once per fork).
        if let Some(stale) = state.watcher.take() {
            std::mem::forget(stale);
        }
        state.directories.clear();
        state.unavailable = None;
        state.generation = generation;
    }
    let epoch = WATCH_EPOCH.load(Ordering::Relaxed);
    if state.epoch != epoch {
        // Some directory's watch died; watch again on demand (adding a watch that still
        // exists is harmless: inotify returns the same one).
        state.directories.clear();
        state.epoch = epoch;
    }
    if registry::take_dropped() {
        unwatch_unused(&mut state);
    }
    let mechanism = watch_directory(&mut state, source);
    drop(state);
    source.set_mechanism(mechanism);
    // Anything that changed before the watch existed is picked up now.
    source.refresh();
}

fn watch_directory(state: &mut WatchState, source: &Source) -> Mechanism {
    let Some(directory) = source.watched_directory() else {
        return Mechanism::Poll;
    };
    registry::index_watched_directory(source, &directory);
    if state.directories.contains(&directory) {
        return Mechanism::Inotify;
    }
    if state.watcher.is_none() && state.unavailable.is_none() {
        match INotifyWatcher::new(on_event, notify::Config::default()) {
            Ok(watcher) => state.watcher = Some(watcher),
            Err(e) => state.unavailable = Some(e.to_string()),
        }
    }
    let Some(watcher) = state.watcher.as_mut() else {
        return Mechanism::Poll;
    };
    match watcher.watch(&directory, RecursiveMode::NonRecursive) {
        Ok(()) => {
            state.directories.push(directory);
            Mechanism::Inotify
        }
        Err(_) => Mechanism::Poll,
    }
}

/// Removes the watches of directories no source uses any more (their last router is
/// gone). Runs when a new source is set up (on the thread that sets it up), never on the
/// watcher's.
fn unwatch_unused(state: &mut WatchState) {
    let WatchState {
        watcher,
        directories,
        ..
    } = state;
    directories.retain(|directory| {
        if registry::directory_in_use(directory) {
            return true;
        }
        if let Some(watcher) = watcher.as_mut() {
            let _ = watcher.unwatch(directory);
        }
        false
    });
}

/// Why inotify is not in use in this process, if it failed.
pub fn unavailable_reason() -> Option<String> {
    WATCH_STATE.lock().unavailable.clone()
}

/// Runs on the watcher's thread. A panic here must not kill the thread, so it is caught.
///
/// It never takes `WATCH_STATE`: `set_up` holds that while `watch()` waits for this thread.
fn on_event(event: notify::Result<notify::Event>) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let sources = match &event {
            // Someone opened or read a file (this process's own reloads among them):
            // nothing changed.
            Ok(event) if is_read_only(event) => return,
            Ok(event) if !event.need_rescan() && !event.paths.is_empty() => {
                let mut sources = Vec::new();
                for path in &event.paths {
                    sources.extend(registry::sources_at(path));
                    // An event about a watched directory itself (deleted, moved away):
                    // its watch is gone with it, so its sources set up anew on their
                    // next request (watching the new directory, or polling).
                    let orphans = registry::sources_in_directory(path);
                    if !orphans.is_empty() {
                        WATCH_EPOCH.fetch_add(1, Ordering::Relaxed);
                        for source in &orphans {
                            source.mark_unwatched();
                        }
                        sources.extend(orphans);
                    }
                }
                sources
            }
            // A queue overflow or an error: we may have missed events, so re-check all.
            _ => registry::all(),
        };
        for source in sources {
            source.refresh();
        }
        if let Some(hook) = AFTER_RELOADS.get() {
            hook();
        }
    }));
}

/// An event that only says a file was opened, read or closed after reading.
fn is_read_only(event: &notify::Event) -> bool {
    use notify::event::{AccessKind, AccessMode, EventKind};
    !event.need_rescan()
        && matches!(
            event.kind,
            EventKind::Access(
                AccessKind::Open(_) | AccessKind::Read | AccessKind::Close(AccessMode::Read)
            )
        )
}
