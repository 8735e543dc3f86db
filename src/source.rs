//! A snapshot source: one path, its current table, and how it is kept fresh.
//!
//! Every `RegionRouter` for a path in a process shares one `Source`, so constructing a
//! router per request does no file I/O. The table sits behind `ArcSwap`: readers load it
//! without locks while a reload (from the inotify thread, or from a throttled stat in poll
//! mode) swaps in a newly parsed one.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use arc_swap::{ArcSwap, ArcSwapOption};
use dw_routing::Table;
use parking_lot::Mutex;

use crate::fork;
use crate::loaded::Loaded;
use crate::sigbus;
use crate::trust;

/// Serialises reloads (the watcher thread's and the requests'); held across `fork` (see
/// `lock_for_fork`).
static RELOAD_LOCK: Mutex<()> = Mutex::new(());

/// How many sources this process has dropped, ever: the registry compares it with what it
/// last saw to know when to prune its entries. Counted without a lock: a source may be
/// dropped on any thread, the watcher's included, at any time.
static DROPPED: AtomicUsize = AtomicUsize::new(0);

/// See [`DROPPED`].
pub fn dropped() -> usize {
    DROPPED.load(Ordering::Relaxed)
}

/// How a source learns that its file changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Mechanism {
    /// Not set up yet in this process (a fresh fork, or never constructed).
    None = 0,
    Inotify = 1,
    Poll = 2,
}

impl Mechanism {
    pub fn name(self) -> &'static str {
        match self {
            Mechanism::None => "none",
            Mechanism::Inotify => "inotify",
            Mechanism::Poll => "poll",
        }
    }
}

/// What identifies one version of the file. The agent replaces the file by rename, so
/// the inode changes; size and times catch editors that write in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i64,
    ctime_ns: i64,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }
}

/// The last version of the file a reload looked at, good or bad, so that a bad file is
/// counted once and not re-parsed on every event or poll.
#[derive(Default)]
struct Seen {
    identity: Option<Identity>,
    last_error: Option<String>,
}

pub struct Source {
    path: PathBuf,
    max_bytes: u64,
    poll_interval_ns: u64,
    loaded: ArcSwap<Loaded>,
    /// Bumped on every swap, so a router object can keep its own `Arc<Loaded>` and
    /// notice a reload with one atomic load instead of an `ArcSwap` load per call.
    version: AtomicU64,
    seen: Mutex<Seen>,
    loads: AtomicU64,
    /// Loads that kept the table in use: the file's `routing_digest` was its own.
    reloads_reused: AtomicU64,
    failed_loads: AtomicU64,
    last_load_unix_ms: AtomicU64,
    mechanism: AtomicU8,
    /// The fork generation in which this source's watch was set up; see `fork`.
    watched_in: AtomicU64,
    next_poll_ns: AtomicU64,
    /// The directory as the watcher watches it (see `watched_directory`).
    watched: ArcSwapOption<PathBuf>,
}

impl Drop for Source {
    fn drop(&mut self) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
    }
}

/// Monotonic nanoseconds since the first call in this process.
pub fn monotonic_ns() -> u64 {
    static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

impl Source {
    pub fn new(path: PathBuf, max_bytes: u64, poll_interval_ms: u64) -> Source {
        Source {
            path,
            max_bytes,
            poll_interval_ns: poll_interval_ms.saturating_mul(1_000_000),
            loaded: ArcSwap::from_pointee(Loaded::new(Table::empty(), None)),
            version: AtomicU64::new(0),
            seen: Mutex::new(Seen::default()),
            loads: AtomicU64::new(0),
            reloads_reused: AtomicU64::new(0),
            failed_loads: AtomicU64::new(0),
            last_load_unix_ms: AtomicU64::new(0),
            mechanism: AtomicU8::new(Mechanism::None as u8),
            watched_in: AtomicU64::new(u64::MAX),
            next_poll_ns: AtomicU64::new(0),
            watched: ArcSwapOption::empty(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The table in use. Cheap: no lock, no I/O.
    pub fn table(&self) -> arc_swap::Guard<Arc<Loaded>> {
        self.loaded.load()
    }

    /// The table in use and its version, for a router object to keep.
    pub fn current(&self) -> (u64, Arc<Loaded>) {
        let version = self.version.load(Ordering::Acquire);
        (version, self.loaded.load_full())
    }

    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    #[inline(always)]
    pub fn mechanism(&self) -> Mechanism {
        match self.mechanism.load(Ordering::Relaxed) {
            1 => Mechanism::Inotify,
            2 => Mechanism::Poll,
            _ => Mechanism::None,
        }
    }

    pub fn set_mechanism(&self, mechanism: Mechanism) {
        self.mechanism.store(mechanism as u8, Ordering::Relaxed);
    }

    pub fn loads(&self) -> u64 {
        self.loads.load(Ordering::Relaxed)
    }

    /// Loads that kept the table in use, its revision moved (see [`Reading::Reused`]).
    pub fn reloads_reused(&self) -> u64 {
        self.reloads_reused.load(Ordering::Relaxed)
    }

    pub fn failed_loads(&self) -> u64 {
        self.failed_loads.load(Ordering::Relaxed)
    }

    pub fn last_load_unix_ms(&self) -> u64 {
        self.last_load_unix_ms.load(Ordering::Relaxed)
    }

    pub fn last_error(&self) -> Option<String> {
        self.seen.lock().last_error.clone()
    }

    /// True when this process (after any fork) has set up how the source stays fresh.
    #[inline]
    pub fn is_watched_here(&self) -> bool {
        self.watched_in.load(Ordering::Relaxed) == fork::generation()
    }

    pub fn mark_watched_here(&self, generation: u64) {
        self.watched_in.store(generation, Ordering::Relaxed);
    }

    /// Makes the next request set up this source's watch again.
    pub fn mark_unwatched(&self) {
        self.watched_in.store(u64::MAX, Ordering::Relaxed);
    }

    /// The directory to watch, spelled canonically (symlinks and `..` resolved), since
    /// inotify gives one watch per inode and reports it under one spelling. Remembered,
    /// so that matching the watcher's events needs no file system call.
    pub fn watched_directory(&self) -> Option<PathBuf> {
        let parent = self.path.parent()?;
        let directory = std::fs::canonicalize(parent).unwrap_or_else(|_| parent.to_path_buf());
        self.watched.store(Some(Arc::new(directory.clone())));
        Some(directory)
    }

    /// True when `path` (from an inotify event) names this source's file.
    pub fn is_at(&self, path: &Path) -> bool {
        if self.path == path {
            return true;
        }
        match (&*self.watched.load(), self.path.file_name()) {
            (Some(directory), Some(name)) => {
                path.parent() == Some(directory.as_path()) && path.file_name() == Some(name)
            }
            _ => false,
        }
    }

    /// True when `path` is this source's directory (either spelling).
    pub fn is_in_directory(&self, path: &Path) -> bool {
        self.path.parent() == Some(path)
            || self.watched.load().as_deref().map(PathBuf::as_path) == Some(path)
    }

    /// In poll mode, re-checks the file at most once per poll interval.
    #[inline(always)]
    pub fn poll_if_due(&self) {
        if self.mechanism() != Mechanism::Poll {
            return;
        }
        let now = monotonic_ns();
        let due = self.next_poll_ns.load(Ordering::Relaxed);
        if now < due {
            return;
        }
        // Only the caller that moves the deadline does the stat.
        if self
            .next_poll_ns
            .compare_exchange(
                due,
                now.saturating_add(self.poll_interval_ns),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.refresh();
        }
    }

    /// Re-reads the file if it is not the version last looked at. A file that cannot be
    /// used keeps the table in use (last known good) and counts one failed load.
    pub fn refresh(&self) {
        let _reload = RELOAD_LOCK.lock();
        self.refresh_locked();
    }

    fn refresh_locked(&self) {
        let mut seen = self.seen.lock();
        // Unchanged is the common answer (every poll asks): a stat of the path says so.
        // lstat: whatever is at the path is what is judged, a symlink included.
        let path_identity = match std::fs::symlink_metadata(&self.path) {
            Ok(meta) => Some(Identity::of(&meta)),
            // A missing file is not a failed load: the agent may not have written it yet,
            // and the table in use (if any) stays.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) => None,
        };
        if path_identity.is_some() && seen.identity == path_identity {
            return;
        }
        // The identity a load records comes from the opened file itself (fstat), not from
        // that stat: a rename in between would pair one file's identity with the next
        // one's contents, and that next file would be read twice. The open follows no
        // symlink, never blocks (a FIFO), and refuses a file whose owner or directory is
        // not trusted (see `trust`); a refusal is a failed load like a bad file's.
        let (identity, outcome) = match trust::open(&self.path, trust::trusted_owner()) {
            // Renamed over between the open and the fstat: its successor is in place,
            // and that rename's event (or the next poll) reads it.
            Ok((_, meta)) if meta.nlink() == 0 => return,
            Ok((file, meta)) => (Some(Identity::of(&meta)), Ok((file, meta.len()))),
            // Removed since the stat: missing, as above.
            Err(trust::Refused::Missing) => return,
            // Counted once per version of what is at the path: the opened object's
            // identity, or (when it could not be opened) the path's.
            Err(trust::Refused::Refused { message, metadata }) => (
                metadata.map(|meta| Identity::of(&meta)).or(path_identity),
                Err(message),
            ),
        };
        if identity.is_some() && seen.identity == identity {
            return;
        }
        seen.identity = identity;
        match outcome.and_then(|(file, size)| self.read_table(&file, size)) {
            Ok(Reading::Parsed(table, digest)) => {
                // Counted before the swap, so that whoever sees the new revision also
                // sees the load that brought it in stats().
                self.loads.fetch_add(1, Ordering::Relaxed);
                seen.last_error = None;
                self.loaded.store(Arc::new(Loaded::new(*table, digest)));
                self.version.fetch_add(1, Ordering::Release);
            }
            Ok(Reading::Reused(revision)) => {
                self.loads.fetch_add(1, Ordering::Relaxed);
                self.reloads_reused.fetch_add(1, Ordering::Relaxed);
                seen.last_error = None;
                // The same table, answering for the new revision: every router on it,
                // whatever version it took, now shows the new revision, and never an
                // older one again.
                self.loaded.load().advance_to(revision);
            }
            Err(message) => {
                self.failed_loads.fetch_add(1, Ordering::Relaxed);
                seen.last_error = Some(message);
            }
        }
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        self.last_load_unix_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Reads the file: the table it gives, or, when its `routing_digest` (a field near its
    /// start, docs/snapshot-format.md) is the one the table in use was parsed from, only
    /// its revision: parsing it would give the same answers, so the table is kept.
    fn read_table(&self, file: &File, size: u64) -> Result<Reading, String> {
        if size == 0 {
            return Err("empty file".into());
        }
        if size > self.max_bytes {
            return Err(format!(
                "file is {size} bytes, over dw_router.max_snapshot_bytes ({})",
                self.max_bytes
            ));
        }
        // SAFETY: the agent never modifies a published file in place; it renames a new
        // one over it, and a mapping of a renamed-away file stays valid. A file truncated
        // in place anyway (against the rules) is caught by the guarded read below. The
        // mapping is dropped as soon as the table is parsed into owned memory.
        let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| format!("mmap: {e}"))?;
        // Regions whose value did not change are reused, not parsed again.
        let previous = self.loaded.load();
        sigbus::read_guarded(&map, |bytes| {
            let header = dw_routing::snapshot_header(bytes);
            match (header, previous.digest()) {
                (Some((revision, digest)), Some(current)) if digest == current => {
                    Ok(Reading::Reused(revision))
                }
                _ => Table::parse_after(bytes, &previous.table).map(|table| {
                    Reading::Parsed(Box::new(table), header.map(|(_, digest)| digest.into()))
                }),
            }
        })
        .map_err(|_| "the file was truncated while being read (rewritten in place?)".to_string())?
        .map_err(|e| e.to_string())
    }
}

/// What reading a snapshot file gave.
enum Reading {
    /// A new table, with the file's `routing_digest` if it had one.
    Parsed(Box<Table>, Option<Box<str>>),
    /// The file's digest is the table in use's: only its revision is taken.
    Reused(u64),
}

/// Takes the reload lock and keeps it until [`unlock_after_fork`]: from the fork `prepare`
/// handler, so that a child never inherits it held by a thread it does not have.
pub fn lock_for_fork() {
    std::mem::forget(RELOAD_LOCK.lock());
}

/// # Safety
/// Only after `lock_for_fork`, in the same thread (or in the child it forked).
pub unsafe fn unlock_after_fork() {
    // SAFETY: upheld by the caller.
    unsafe { RELOAD_LOCK.force_unlock() }
}
