//! Counting `resolve()`'s answers in the node's counter file (docs/traffic.md).
//!
//! MINIT maps `dw_router.answers_dir`/`<uid>/answers-<uid>.bin` (or, without that
//! per-user directory, `dw_router.answers_dir`/`answers-<uid>.bin`) shared (dw-traffic's
//! `MappedFile`), before php-fpm or lsphp fork their workers, so every worker of the
//! tree writes the same file. A worker claims a slot the first time it needs a label id
//! or counts (a record lock held for its life; the fork handler forgets the parent's slot
//! in a child) and then counts with a relaxed load and store of its own counter:
//! [`count`], the only part on the request path. The label-set id it counts under is
//! cached beside the memoised route (`loaded`), or found by `answer_labels` on the other
//! calls.
//!
//! Nothing here waits for a lock another process can hold (docs/traffic.md, "Trust"):
//! MINIT takes no lock, a slot and the registry are tried, never waited for. When the
//! registry is busy, an answer of a new label set counts in a pending label set of the
//! worker's own slot, under its labels; such an id is never cached ([`is_cacheable`]), so
//! a later answer registers the label set.
//!
//! A ZTS build counts too: its threads share their process's slot, so there the counter
//! is bumped with an atomic add instead (`ext_php_rs::PHP_ZTS`, a constant).

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};

use dw_traffic::layout::{FIRST_PENDING_ID, OVERFLOW_ID, PENDING_LABEL_SETS};
use dw_traffic::{Counters, FileLocks, LabelSet, MappedFile};

use crate::ini;

/// The tree's counter file, when counting is on and the file could be mapped.
struct Shared {
    file: MappedFile,
    counters: Counters<'static, FileLocks>,
}

static SHARED: OnceLock<Shared> = OnceLock::new();
/// Why counting is off in this process (for `php --ri` and `traffic()`), when it is.
static OFF_BECAUSE: OnceLock<String> = OnceLock::new();

/// This process's slot, one word before its first counter, so that [`count`] takes a
/// label id plus one (0 meaning "not known yet" beside a memo). Null until claimed, and
/// again in a forked child.
static SLOT: AtomicPtr<AtomicU64> = AtomicPtr::new(std::ptr::null_mut());
/// Set when no slot was free: this process counts in the file's unslotted counter.
static UNSLOTTED: AtomicBool = AtomicBool::new(false);
/// This process's slot's index, `usize::MAX` until claimed (and in a forked child).
static SLOT_INDEX: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Serialises finding a label id in a ZTS process, whose threads share its slot's pending
/// label sets (one writer per slot). Taken only on the cold path, never across processes.
static SLOT_LABELS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Where [`count`] writes when counting is off: memos then keep id 1 (see
/// `Loaded::count_answer`), so a memo hit costs what it costs with counting on and takes
/// no call. Private to the process; never read.
static NOT_COUNTED: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];

/// The id plus one a memo keeps when counting is off.
pub const NOT_COUNTED_ID: u32 = 1;

fn not_counted_base() -> *mut AtomicU64 {
    NOT_COUNTED.as_ptr().cast_mut()
}

/// From MINIT, after the ini entries are registered.
pub fn in_minit(sapi: Option<&str>) {
    if !ini::count_answers_enabled(sapi) {
        let _ = OFF_BECAUSE.set("off (dw_router.count_answers)".into());
        SLOT.store(not_counted_base(), Ordering::Relaxed);
        return;
    }
    let dir = PathBuf::from(ini::answers_dir());
    let opened = MappedFile::open(&dir).and_then(|file| {
        // SAFETY: getpid has no preconditions.
        let pid = unsafe { libc::getpid() } as u64;
        let counters = Counters::open(file.words(), file.locks(), pid)?;
        Ok(Shared { file, counters })
    });
    match opened {
        Ok(shared) => {
            let _ = SHARED.set(shared);
        }
        Err(error) => {
            let _ = OFF_BECAUSE.set(format!("off: {error}"));
            SLOT.store(not_counted_base(), Ordering::Relaxed);
        }
    }
}

/// From the fork handler in a new child: its slot is not the parent's.
pub fn forked() {
    let slot = if enabled() {
        std::ptr::null_mut()
    } else {
        not_counted_base()
    };
    SLOT.store(slot, Ordering::Relaxed);
    SLOT_INDEX.store(usize::MAX, Ordering::Relaxed);
    UNSLOTTED.store(false, Ordering::Relaxed);
}

/// Whether this process counts.
#[inline(always)]
pub fn enabled() -> bool {
    SHARED.get().is_some()
}

/// Whether an id plus one may be kept beside a memo for the next answers: false for a
/// pending label set's (valid in this process's slot only, and to be registered later).
#[inline(always)]
pub fn is_cacheable(id_plus_one: u32) -> bool {
    id_plus_one <= OVERFLOW_ID + 1
}

/// Counts one answer under `id_plus_one` (a label id plus one, never 0; a pending label
/// set's only in the process that was given it): a relaxed load and store of this
/// worker's own counter.
#[inline(always)]
pub fn count(id_plus_one: u32) {
    let base = SLOT.load(Ordering::Relaxed);
    if base.is_null() {
        return count_without_slot(id_plus_one);
    }
    // SAFETY: `base` is one word before a slot's counters, inside the mapping, and ids
    // come from this file's registry (at most OVERFLOW_ID) or this slot's pending label
    // sets (below FIRST_PENDING_ID + PENDING_LABEL_SETS), so the word is the slot's; or,
    // with counting off, `NOT_COUNTED`, and the id is NOT_COUNTED_ID.
    let counter = unsafe { &*base.wrapping_add(id_plus_one as usize) };
    if ext_php_rs::PHP_ZTS {
        counter.fetch_add(1, Ordering::Relaxed);
    } else {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }
}

/// The first count of a process: claims a slot (or counts unslotted when none is free).
#[cold]
#[inline(never)]
fn count_without_slot(id_plus_one: u32) {
    let Some(shared) = SHARED.get() else {
        return;
    };
    if own_slot(shared).is_some() {
        return count(id_plus_one);
    }
    shared.counters.count_unslotted();
}

/// This process's slot, claimed (with a lock tried, never waited for) when it has none
/// yet; None when none was free (the process then counts unslotted).
fn own_slot(shared: &Shared) -> Option<usize> {
    let index = SLOT_INDEX.load(Ordering::Relaxed);
    if index != usize::MAX {
        return Some(index);
    }
    if UNSLOTTED.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() } as u64;
    match shared.counters.claim_slot(pid) {
        Some(slot) => {
            let counters = shared.counters.slot_counters(slot);
            let base = counters.as_ptr().cast_mut().wrapping_sub(1);
            SLOT_INDEX.store(slot, Ordering::Relaxed);
            SLOT.store(base, Ordering::Relaxed);
            Some(slot)
        }
        None => {
            UNSLOTTED.store(true, Ordering::Relaxed);
            None
        }
    }
}

/// The id plus one of `labels`: its id in the file's registry (`OVERFLOW_ID + 1` when
/// full), or, while another process holds the registry's lock, a pending label set's in
/// this process's slot (not [`is_cacheable`]); None when counting is off. Never waits.
pub fn id_plus_one(labels: &LabelSet) -> Option<u32> {
    let shared = SHARED.get()?;
    let _one_writer = ext_php_rs::PHP_ZTS.then(|| SLOT_LABELS.lock());
    let id = match own_slot(shared) {
        Some(slot) => shared.counters.label_id_in_slot(slot, labels),
        // Unslotted: every answer counts in the unslotted counter whatever its id; a busy
        // registry's answer gets an id that is not kept, so a later one registers it.
        None => shared
            .counters
            .try_label_id(labels)
            .unwrap_or(FIRST_PENDING_ID),
    };
    Some(id.min(FIRST_PENDING_ID + PENDING_LABEL_SETS as u32 - 1) + 1)
}

/// What `php --ri` says about counting.
pub fn describe() -> String {
    match SHARED.get() {
        Some(shared) if shared.counters.version() < dw_traffic::layout::VERSION => format!(
            "on, {} (counter layout {}, an older extension's file: bucketed answers count in \
             the overflow until it is made again)",
            shared.file.path().display(),
            shared.counters.version()
        ),
        Some(shared) => format!("on, {}", shared.file.path().display()),
        None => OFF_BECAUSE.get().cloned().unwrap_or_else(|| "off".into()),
    }
}

/// The counts of every worker of this file (all process trees of this user on the
/// node), as `traffic()` returns them; None when counting is off.
pub fn totals() -> Option<(String, dw_traffic::Totals)> {
    let shared = SHARED.get()?;
    let bytes = dw_traffic::words_to_bytes(shared.file.words());
    let totals = dw_traffic::parse(&bytes).ok()?;
    Some((shared.file.path().display().to_string(), totals))
}
