//! The process-wide sources, one per snapshot path.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use parking_lot::{Mutex, MutexGuard};

use crate::ini;
use crate::source::Source;

static SOURCES: Mutex<Vec<Arc<Source>>> = Mutex::new(Vec::new());

/// A path as the caller spelled it, and its source.
type Remembered = (Box<[u8]>, Arc<Source>);

thread_local! {
    /// The last path asked for and its source: a front controller asks for the same one
    /// on every request, so this skips the lock and the scan.
    static LAST: RefCell<Option<Remembered>> = const { RefCell::new(None) };
}

/// The source for the ini's `dw_router.snapshot_path` (a SYSTEM setting, so fixed for
/// the life of the process).
pub fn default_source() -> &'static Arc<Source> {
    static DEFAULT: OnceLock<Arc<Source>> = OnceLock::new();
    DEFAULT.get_or_init(|| source_for_path(Path::new(&ini::snapshot_path())))
}

/// The source for `path`, created (without reading the file) on first use.
pub fn source_for(path: &[u8]) -> Arc<Source> {
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((cached, source)) = last.as_ref()
            && **cached == *path
        {
            return source.clone();
        }
        let source = source_for_path(Path::new(OsStr::from_bytes(path)));
        *last = Some((path.into(), source.clone()));
        source
    })
}

fn source_for_path(path: &Path) -> Arc<Source> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| PathBuf::from(path));
    let mut sources = SOURCES.lock();
    if let Some(found) = sources.iter().find(|s| s.path() == absolute) {
        return found.clone();
    }
    let source = Arc::new(Source::new(
        absolute,
        ini::max_snapshot_bytes(),
        ini::poll_interval_ms(),
    ));
    sources.push(source.clone());
    source
}

/// The sources whose file is `path` (an inotify event's path).
pub fn sources_at(path: &Path) -> Vec<Arc<Source>> {
    let sources = SOURCES.lock().clone();
    sources.into_iter().filter(|s| s.is_at(path)).collect()
}

/// The sources whose file lives in the directory `path`.
pub fn sources_in_directory(path: &Path) -> Vec<Arc<Source>> {
    let sources = SOURCES.lock().clone();
    sources
        .into_iter()
        .filter(|s| s.is_in_directory(path))
        .collect()
}

pub fn all() -> Vec<Arc<Source>> {
    SOURCES.lock().clone()
}

pub fn lock_for_fork() -> MutexGuard<'static, Vec<Arc<Source>>> {
    SOURCES.lock()
}

/// # Safety
/// Only after `lock_for_fork` whose guard was forgotten, in the same thread.
pub unsafe fn unlock_after_fork() {
    // SAFETY: upheld by the caller.
    unsafe { SOURCES.force_unlock() }
}
