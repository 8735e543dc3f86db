//! The process-wide sources, one per snapshot path.
//!
//! The registry holds its sources weakly: a source (its table, and its directory's watch)
//! lives while a router, or the default path, uses it, and is freed when the last router
//! of a path goes. Sources are indexed by the path of their file (as given, and as the
//! watcher spells it) and by their directory, so that matching an inotify event costs a
//! lookup, not a scan of every path the process ever used.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use parking_lot::Mutex;

use crate::ini;
use crate::source::{self, Source};

/// Every source in use, and two indexes over them.
struct Registry {
    sources: Vec<Weak<Source>>,
    /// A file's path, as given and as the watcher reports it, to its sources.
    at: BTreeMap<PathBuf, Vec<Weak<Source>>>,
    /// A directory, as given and as the watcher reports it, to the sources in it.
    in_directory: BTreeMap<PathBuf, Vec<Weak<Source>>>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    sources: Vec::new(),
    at: BTreeMap::new(),
    in_directory: BTreeMap::new(),
});

/// `source::dropped()` when the registry last pruned its dead entries.
static PRUNED_AT: AtomicUsize = AtomicUsize::new(0);

/// `source::dropped()` when the watcher last looked for directories no longer in use.
static UNWATCHED_AT: AtomicUsize = AtomicUsize::new(0);

/// Prunes the registry if some source was dropped since it last did.
fn prune_if_dropped() {
    let dropped = source::dropped();
    if PRUNED_AT.swap(dropped, Ordering::Relaxed) != dropped {
        REGISTRY.lock().prune();
    }
}

/// Whether some source was dropped since the last call (the registry is pruned first).
pub fn take_dropped() -> bool {
    let dropped = source::dropped();
    if UNWATCHED_AT.swap(dropped, Ordering::Relaxed) == dropped {
        return false;
    }
    prune_if_dropped();
    true
}

/// A path as the caller spelled it, and its source.
type Remembered = (Box<[u8]>, Weak<Source>);

thread_local! {
    /// The last path asked for and its source: a front controller asks for the same one
    /// on every request, so this skips the lock and the lookup. Weak: it must not keep a
    /// path's table alive after its last router.
    static LAST: RefCell<Option<Remembered>> = const { RefCell::new(None) };
}

/// The source for the ini's `dw_router.snapshot_path` (a SYSTEM setting, so fixed for
/// the life of the process). Held for the life of the process.
pub fn default_source() -> &'static Arc<Source> {
    static DEFAULT: OnceLock<Arc<Source>> = OnceLock::new();
    DEFAULT.get_or_init(|| source_for_path(Path::new(&ini::snapshot_path())))
}

/// The source for `path` (absolute: the router refuses a relative one), created (without
/// reading the file) on first use.
pub fn source_for(path: &[u8]) -> Arc<Source> {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((cached, source)) = last.as_ref()
            && **cached == *path
            && let Some(source) = source.upgrade()
        {
            return source;
        }
        let source = source_for_path(Path::new(OsStr::from_bytes(path)));
        *last = Some((path.into(), Arc::downgrade(&source)));
        source
    })
}

fn source_for_path(path: &Path) -> Arc<Source> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
    prune_if_dropped();
    let mut registry = REGISTRY.lock();
    let found = registry.at.get(&absolute).and_then(|candidates| {
        candidates
            .iter()
            .filter_map(Weak::upgrade)
            .find(|source| source.path() == absolute)
    });
    if let Some(found) = found {
        drop(registry);
        return found;
    }
    let source = Arc::new(Source::new(
        absolute.clone(),
        ini::max_snapshot_bytes(),
        ini::poll_interval_ms(),
    ));
    let weak = Arc::downgrade(&source);
    registry.sources.push(weak.clone());
    registry
        .at
        .entry(absolute.clone())
        .or_default()
        .push(weak.clone());
    if let Some(parent) = absolute.parent() {
        registry
            .in_directory
            .entry(parent.to_path_buf())
            .or_default()
            .push(weak);
    }
    source
}

/// Records how the watcher spells `source`'s directory (symlinks resolved), so that its
/// events find the source.
pub fn index_watched_directory(source: &Source, directory: &Path) {
    let mut registry = REGISTRY.lock();
    let Some(weak) = registry
        .at
        .get(source.path())
        .and_then(|candidates| {
            candidates
                .iter()
                .find(|weak| std::ptr::eq(weak.as_ptr(), source))
        })
        .cloned()
    else {
        return;
    };
    let add = |map: &mut BTreeMap<PathBuf, Vec<Weak<Source>>>, key: PathBuf| {
        let entries = map.entry(key).or_default();
        if !entries.iter().any(|held| held.ptr_eq(&weak)) {
            entries.push(weak.clone());
        }
    };
    if let Some(name) = source.path().file_name() {
        add(&mut registry.at, directory.join(name));
    }
    add(&mut registry.in_directory, directory.to_path_buf());
}

impl Registry {
    /// Drops the entries of sources that are gone.
    fn prune(&mut self) {
        let alive = |weak: &Weak<Source>| weak.strong_count() > 0;
        self.sources.retain(alive);
        for map in [&mut self.at, &mut self.in_directory] {
            map.retain(|_, entries| {
                entries.retain(alive);
                !entries.is_empty()
            });
        }
    }
}

/// Upgrades `entries` that `keep` accepts. The returned sources are dropped by the caller,
/// after the registry's lock is released (a source's drop must not run under it).
fn live(entries: Option<&Vec<Weak<Source>>>, keep: impl Fn(&Source) -> bool) -> Vec<Arc<Source>> {
    let mut found: Vec<Arc<Source>> = Vec::new();
    for source in entries.into_iter().flatten().filter_map(Weak::upgrade) {
        if keep(&source) && !found.iter().any(|held| Arc::ptr_eq(held, &source)) {
            found.push(source);
        }
    }
    found
}

/// The sources whose file is `path` (an inotify event's path).
pub fn sources_at(path: &Path) -> Vec<Arc<Source>> {
    let registry = REGISTRY.lock();
    live(registry.at.get(path), |source| source.is_at(path))
}

/// The sources whose file lives in the directory `path`.
pub fn sources_in_directory(path: &Path) -> Vec<Arc<Source>> {
    let registry = REGISTRY.lock();
    live(registry.in_directory.get(path), |source| {
        source.is_in_directory(path)
    })
}

/// Whether any source in use lives in `directory` (as the watcher spells it).
pub fn directory_in_use(directory: &Path) -> bool {
    let registry = REGISTRY.lock();
    registry
        .in_directory
        .get(directory)
        .is_some_and(|entries| entries.iter().any(|weak| weak.strong_count() > 0))
}

pub fn all() -> Vec<Arc<Source>> {
    let registry = REGISTRY.lock();
    registry.sources.iter().filter_map(Weak::upgrade).collect()
}

/// Takes the registry's lock and keeps it until [`unlock_after_fork`]: from the fork
/// `prepare` handler, so that a child never inherits it held by a thread it does not have.
pub fn lock_for_fork() {
    std::mem::forget(REGISTRY.lock());
}

/// # Safety
/// Only after `lock_for_fork`, in the same thread (or in the child it forked).
pub unsafe fn unlock_after_fork() {
    // SAFETY: upheld by the caller.
    unsafe { REGISTRY.force_unlock() }
}
