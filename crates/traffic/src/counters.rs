//! The writer's side of the protocol, over the file's words wherever they are mapped
//! (the extension maps the file; tests use a vector). The locks are the caller's
//! ([`Locks`]): `fcntl` record locks on the file, which the kernel releases when their
//! process dies, so a dead worker never keeps a slot or the registry.
//!
//! - A worker claims a slot with [`Counters::claim_slot`] (a lock on the slot: held for
//!   the worker's life) and then counts with [`count`]: a relaxed load and store of its
//!   own counter, no read-modify-write, since no one else writes that slot while it holds
//!   the lock. A slot whose worker died keeps its counts; the next worker to claim it
//!   goes on counting from them. So a slot is never counted twice, a total never goes
//!   down, and nothing has to be folded or flushed at exit (a killed worker loses
//!   nothing it had counted).
//! - [`Counters::label_id`] finds a label set's id through the index, without a lock,
//!   and registers a new one under the registry lock: entry, then label count (release),
//!   then index bucket (release). A writer that dies part way leaves either an
//!   unpublished entry (overwritten by the next) or a published entry with no bucket (the
//!   next registration of that label set adds a second entry; readers add duplicates
//!   up, so a series is never duplicated).
//! - Nothing waits for a lock another process can hold (any process that can open the
//!   file can take a record lock on it): the registry lock and the slot locks are taken
//!   with `F_SETLK`, never `F_SETLKW`, and the header is written without a lock (its words
//!   are constants, so two writers write the same). When the registry lock is busy,
//!   [`Counters::label_id_in_slot`] keeps the label set in the worker's own slot, a
//!   *pending* label set ([`PENDING_LABEL_SETS`] per slot, written and published as the
//!   registry's entries are, by the slot's only writer), and the answer counts there
//!   under its labels; a later answer registers it in the registry and counts there. A
//!   pending count is never moved (a move would make a total go down or count twice): the
//!   reader adds a slot's pending label sets to the file's series, as it adds
//!   duplicates. A worker killed part way leaves an unpublished pending entry (the next
//!   holder of the slot overwrites it), having lost at most the answer it was counting.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::Error;
use crate::labels::{AnswerKind, LabelSet};
use crate::layout::{
    ENTRY_WORDS, FILE_WORDS, FIRST_PENDING_ID, INDEX_BUCKETS, INDEX_OFFSET, MAGIC, MAX_LABEL_BYTES,
    MAX_LABEL_SETS, MAX_SLOTS, OVERFLOW_ID, PENDING_LABEL_SETS, READ_VERSIONS, SLOT_COUNTERS,
    SLOT_HEADER_WORDS, SLOT_WORDS, VERSION, check_header, entry_offset, header,
    pending_entry_offset, slot_header, slot_offset,
};

/// How many times [`Counters::label_id_in_slot`] tries the registry lock (yielding the CPU
/// between tries) before it keeps the label set pending: another worker registering holds
/// it for a few microseconds, a hostile process for ever. Never a wait.
pub const REGISTRY_LOCK_TRIES: usize = 3;

/// The locks a writer takes, provided by whoever mapped the words.
pub trait Locks {
    /// Takes slot `slot` for this worker's life, if no live worker holds it (never waits).
    fn try_lock_slot(&self, slot: usize) -> bool;
    /// Runs `f` holding the registry lock if it can be taken at once; `None` (and `f` not
    /// run) when another process holds it. Never waits.
    fn try_with_registry_lock<R>(&self, f: impl FnOnce() -> R) -> Option<R>;
}

impl<L: Locks> Locks for &L {
    fn try_lock_slot(&self, slot: usize) -> bool {
        (**self).try_lock_slot(slot)
    }

    fn try_with_registry_lock<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        (**self).try_with_registry_lock(f)
    }
}

/// The counters of one file, as a writer sees them.
pub struct Counters<'m, L> {
    words: &'m [AtomicU64],
    locks: L,
    /// The file's layout version: [`VERSION`] for a file this writer created, or an older
    /// one of [`READ_VERSIONS`] adopted as it is (see [`Counters::open`]).
    version: u64,
}

/// Counts one answer of label set `id` in a slot's counters (from
/// [`Counters::slot_counters`]), as its only writer: a relaxed load and store.
#[inline(always)]
pub fn count(counters: &[AtomicU64], id: u32) {
    if let Some(counter) = counters.get(id as usize) {
        counter.store(
            counter.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
    }
}

impl<'m, L: Locks> Counters<'m, L> {
    /// The counters in `words`: a file of [`FILE_WORDS`] words, either all zero (new: the
    /// header is written, [`VERSION`]) or with the header of a version of
    /// [`READ_VERSIONS`]. A version-2 file (left by an older extension, whose workers may
    /// still count in it) is adopted as it is: plain and sticky answers count as before,
    /// and a bucketed answer, which its entries cannot say, counts in the overflow (left
    /// out, never misread: [`Counters::version`] says so). `pid` is recorded as the tree's.
    /// Takes no lock: the header's words are this layout's constants, so two processes
    /// opening a new file at once write the same words (magic last, with release).
    pub fn open(words: &'m [AtomicU64], locks: L, pid: u64) -> Result<Counters<'m, L>, Error> {
        if words.len() != FILE_WORDS {
            return Err(Error::Size {
                found: words.len() * 8,
                expected: crate::layout::FILE_BYTES,
            });
        }
        if words[header::MAGIC].load(Ordering::Acquire) == 0 {
            words[header::VERSION].store(VERSION, Ordering::Relaxed);
            words[header::MAX_LABEL_SETS].store(MAX_LABEL_SETS as u64, Ordering::Relaxed);
            words[header::MAX_SLOTS].store(MAX_SLOTS as u64, Ordering::Relaxed);
            words[header::MAX_LABEL_BYTES].store(MAX_LABEL_BYTES as u64, Ordering::Relaxed);
            words[header::MAGIC].store(MAGIC, Ordering::Release);
        }
        let version = check_header(|index| words[index].load(Ordering::Acquire), &READ_VERSIONS)?;
        let counters = Counters {
            words,
            locks,
            version,
        };
        words[header::TREE_PID].store(pid, Ordering::Relaxed);
        words[header::TREES].fetch_add(1, Ordering::Relaxed);
        Ok(counters)
    }

    /// The file's layout version (2: an older extension's file, where bucketed answers
    /// count in the overflow).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether this file's entries can say `labels`' kind: not a bucket in a version-2
    /// file.
    fn can_label(&self, labels: &LabelSet) -> bool {
        self.version >= VERSION || labels.kind != AnswerKind::Bucket
    }

    /// Claims a free slot for this worker (`pid` recorded in it), or None when
    /// [`MAX_SLOTS`] live workers hold one each. Cold: once per worker.
    pub fn claim_slot(&self, pid: u64) -> Option<usize> {
        let slot = (0..MAX_SLOTS).find(|&slot| self.locks.try_lock_slot(slot))?;
        let base = slot_offset(slot);
        self.words[base + slot_header::OWNER].store(pid, Ordering::Relaxed);
        self.words[base + slot_header::CLAIMS].fetch_add(1, Ordering::Relaxed);
        Some(slot)
    }

    /// The counters of slot `slot` (one per label id, the overflow, then one per pending
    /// label set), for [`count`]. Only the worker holding the slot may count in them.
    pub fn slot_counters(&self, slot: usize) -> &'m [AtomicU64] {
        let start = slot_offset(slot.min(MAX_SLOTS - 1)) + SLOT_HEADER_WORDS;
        &self.words[start..start + SLOT_COUNTERS]
    }

    /// Counts an answer that found no slot (atomic add: only past [`MAX_SLOTS`]).
    pub fn count_unslotted(&self) {
        self.words[header::UNSLOTTED].fetch_add(1, Ordering::Relaxed);
    }

    /// The id of `labels` in the registry, registering it when new; [`OVERFLOW_ID`] when
    /// the registry is full or its lock is busy (see [`Counters::label_id_in_slot`]).
    pub fn label_id(&self, labels: &LabelSet) -> u32 {
        if !self.can_label(labels) {
            return OVERFLOW_ID;
        }
        self.registered_id(&labels.encode()).unwrap_or(OVERFLOW_ID)
    }

    /// The id of `labels` for the worker holding slot `slot`: its id in the registry
    /// (registered when new; [`OVERFLOW_ID`] when the registry is full), or, when the
    /// registry's lock is busy, a pending label set of the slot (an id from
    /// [`FIRST_PENDING_ID`], valid in this slot only: never keep it beyond this answer,
    /// ask again on the next, which registers it once the lock is free); [`OVERFLOW_ID`]
    /// when the slot's pending label sets are all taken by others. Never waits.
    pub fn label_id_in_slot(&self, slot: usize, labels: &LabelSet) -> u32 {
        if !self.can_label(labels) {
            return OVERFLOW_ID;
        }
        let entry = labels.encode();
        match self.registered_id(&entry) {
            Some(id) => id,
            None => self.pending_id(slot.min(MAX_SLOTS - 1), &entry),
        }
    }

    /// The id of `labels` in the registry (registered when new; [`OVERFLOW_ID`] when the
    /// registry is full); None when its lock is busy. Never waits.
    pub fn try_label_id(&self, labels: &LabelSet) -> Option<u32> {
        if !self.can_label(labels) {
            return Some(OVERFLOW_ID);
        }
        self.registered_id(&labels.encode())
    }

    /// Whether `id` (from [`Counters::label_id_in_slot`]) is the file's, and so may be
    /// kept for the next answers of its label set: false for a pending one.
    pub fn is_registered_id(id: u32) -> bool {
        id < FIRST_PENDING_ID
    }

    /// The registry's id of `entry`: found in the index, else registered under the lock
    /// (tried [`REGISTRY_LOCK_TRIES`] times); None when the lock stayed busy.
    fn registered_id(&self, entry: &[u64; ENTRY_WORDS]) -> Option<u32> {
        let hash = LabelSet::hash_words(entry);
        if let Some(id) = self.find(entry, hash) {
            return Some(id);
        }
        for attempt in 0..REGISTRY_LOCK_TRIES {
            if attempt > 0 {
                std::thread::yield_now();
            }
            if let Some(id) = self
                .locks
                .try_with_registry_lock(|| self.register(entry, hash))
            {
                return Some(id);
            }
        }
        None
    }

    /// The pending label sets of slot `slot` published so far.
    fn pending_count(&self, slot: usize) -> usize {
        (self.words[slot_offset(slot) + slot_header::PENDING].load(Ordering::Acquire) as usize)
            .min(PENDING_LABEL_SETS)
    }

    /// The id of `entry` among slot `slot`'s pending label sets, added when absent and
    /// there is room; [`OVERFLOW_ID`] when there is none. Only the slot's holder calls
    /// this, so it writes without a lock: entry, then the pending count (release).
    fn pending_id(&self, slot: usize, entry: &[u64; ENTRY_WORDS]) -> u32 {
        let published = self.pending_count(slot);
        let same = |index: usize| {
            let start = pending_entry_offset(slot, index);
            self.words[start..start + ENTRY_WORDS]
                .iter()
                .zip(entry)
                .all(|(word, want)| word.load(Ordering::Relaxed) == *want)
        };
        if let Some(index) = (0..published).find(|&index| same(index)) {
            return FIRST_PENDING_ID + index as u32;
        }
        if published >= PENDING_LABEL_SETS {
            return OVERFLOW_ID;
        }
        let start = pending_entry_offset(slot, published);
        for (word, value) in self.words[start..start + ENTRY_WORDS].iter().zip(entry) {
            word.store(*value, Ordering::Relaxed);
        }
        self.words[slot_offset(slot) + slot_header::PENDING]
            .store(published as u64 + 1, Ordering::Release);
        FIRST_PENDING_ID + published as u32
    }

    /// How many label sets are registered.
    pub fn label_count(&self) -> usize {
        (self.words[header::LABEL_COUNT].load(Ordering::Acquire) as usize).min(MAX_LABEL_SETS)
    }

    fn bucket(&self, hash: u64, probe: usize) -> &AtomicU64 {
        &self.words[INDEX_OFFSET + (hash as usize).wrapping_add(probe) % INDEX_BUCKETS]
    }

    /// The id under which the index holds `entry`, if it does: probes until an empty
    /// bucket.
    fn find(&self, entry: &[u64; ENTRY_WORDS], hash: u64) -> Option<u32> {
        let published = self.label_count();
        for probe in 0..INDEX_BUCKETS {
            let value = self.bucket(hash, probe).load(Ordering::Acquire);
            if value == 0 {
                return None;
            }
            let id = (value - 1) as usize;
            if id < published && self.entry_is(id, entry) {
                return Some(id as u32);
            }
        }
        None
    }

    fn entry_is(&self, id: usize, entry: &[u64; ENTRY_WORDS]) -> bool {
        let start = entry_offset(id);
        self.words[start..start + ENTRY_WORDS]
            .iter()
            .zip(entry)
            .all(|(word, want)| word.load(Ordering::Relaxed) == *want)
    }

    /// Under the registry lock: the id of `entry`, added if absent and there is room.
    fn register(&self, entry: &[u64; ENTRY_WORDS], hash: u64) -> u32 {
        if let Some(id) = self.find(entry, hash) {
            return id;
        }
        let id = self.label_count();
        if id >= MAX_LABEL_SETS {
            return OVERFLOW_ID;
        }
        let start = entry_offset(id);
        for (word, value) in self.words[start..start + ENTRY_WORDS].iter().zip(entry) {
            word.store(*value, Ordering::Relaxed);
        }
        self.words[header::LABEL_COUNT].store(id as u64 + 1, Ordering::Release);
        for probe in 0..INDEX_BUCKETS {
            let bucket = self.bucket(hash, probe);
            // Buckets are written after the label count, so every one that is not
            // empty points at a published entry.
            if bucket.load(Ordering::Acquire) == 0 {
                bucket.store(id as u64 + 1, Ordering::Release);
                break;
            }
        }
        id as u32
    }
}

/// The locks of a single process with no other writer: every slot is free once, the
/// registry needs no lock. For tests and for a reader's own checks.
#[derive(Debug, Default)]
pub struct ProcessLocks {
    claimed: std::sync::Mutex<Vec<bool>>,
    registry: std::sync::Mutex<()>,
}

impl ProcessLocks {
    /// Holds the registry lock until the guard is dropped, as another process holding
    /// the file's registry byte would (for tests of a busy registry).
    pub fn hold_registry(&self) -> Option<std::sync::MutexGuard<'_, ()>> {
        self.registry.lock().ok()
    }
}

impl Locks for ProcessLocks {
    fn try_lock_slot(&self, slot: usize) -> bool {
        let Ok(mut claimed) = self.claimed.lock() else {
            return false;
        };
        if claimed.len() < MAX_SLOTS {
            claimed.resize(MAX_SLOTS, false);
        }
        !std::mem::replace(&mut claimed[slot], true)
    }

    fn try_with_registry_lock<R>(&self, f: impl FnOnce() -> R) -> Option<R> {
        let _guard = self.registry.try_lock().ok()?;
        Some(f())
    }
}

/// A zeroed file's words, for tests.
pub fn zeroed_words() -> Vec<AtomicU64> {
    (0..FILE_WORDS).map(|_| AtomicU64::new(0)).collect()
}

/// The words as bytes, as a reader would read the file (for tests).
pub fn words_to_bytes(words: &[AtomicU64]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(words.len() * 8);
    for word in words {
        bytes.extend_from_slice(&word.load(Ordering::Acquire).to_ne_bytes());
    }
    bytes
}

const _: () =
    assert!(SLOT_WORDS == SLOT_HEADER_WORDS + SLOT_COUNTERS + PENDING_LABEL_SETS * ENTRY_WORDS);
const _: () = assert!(SLOT_COUNTERS == FIRST_PENDING_ID as usize + PENDING_LABEL_SETS);
