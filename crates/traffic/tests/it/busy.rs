//! Nothing waits for a lock another process can hold (issue 40, finding 1): the registry
//! and slot locks are tried, never waited for. While the registry is busy a worker keeps
//! the label set pending in its own slot and counts there under its labels; a later
//! answer registers it. Counts are never moved, so a total never goes down.

use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;

use dw_traffic::layout::{
    FIRST_PENDING_ID, OVERFLOW_ID, PENDING_LABEL_SETS, header, slot_header, slot_offset,
};
use dw_traffic::{
    Counters, FileLocks, LabelSet, MappedFile, ProcessLocks, Step, count, parse, words_to_bytes,
    zeroed_words,
};

fn labels(n: usize) -> LabelSet {
    LabelSet::new(
        format!("P{n}").as_bytes(),
        Step::Country,
        b"DE",
        b"fra-a",
        b"eu-1",
        false,
    )
}

#[test]
fn a_busy_registry_keeps_the_label_set_pending_in_the_slot_then_registers_it() {
    let words = zeroed_words();
    let locks = ProcessLocks::default();
    let counters = Counters::open(&words, &locks, 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let held = locks.hold_registry().unwrap();
    let id = counters.label_id_in_slot(slot, &labels(0));
    assert_eq!(id, FIRST_PENDING_ID, "pending in the slot, not lost");
    assert!(!Counters::<&ProcessLocks>::is_registered_id(id));
    count(counters.slot_counters(slot), id);
    // The same label set again while busy: the same pending entry.
    let again = counters.label_id_in_slot(slot, &labels(0));
    assert_eq!(again, id);
    count(counters.slot_counters(slot), again);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.get(&labels(0)), Some(&2), "{totals:?}");
    assert_eq!(totals.overflow, 0);
    assert_eq!(counters.label_count(), 0, "nothing registered while busy");
    // The lock is free again: the next answer registers it and counts in the registry;
    // the pending count stays where it is, added up by the reader.
    drop(held);
    let registered = counters.label_id_in_slot(slot, &labels(0));
    assert_eq!(registered, 0);
    assert!(Counters::<&ProcessLocks>::is_registered_id(registered));
    count(counters.slot_counters(slot), registered);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.get(&labels(0)), Some(&3));
    assert_eq!(totals.series.len(), 1, "one series, however it was counted");
}

#[test]
fn past_the_pending_label_sets_a_busy_registry_counts_in_the_slot_overflow() {
    let words = zeroed_words();
    let locks = ProcessLocks::default();
    let counters = Counters::open(&words, &locks, 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let _held = locks.hold_registry().unwrap();
    for n in 0..PENDING_LABEL_SETS {
        let id = counters.label_id_in_slot(slot, &labels(n));
        assert_eq!(id, FIRST_PENDING_ID + n as u32);
        count(counters.slot_counters(slot), id);
    }
    let over = counters.label_id_in_slot(slot, &labels(PENDING_LABEL_SETS));
    assert_eq!(over, OVERFLOW_ID, "one past the bound");
    count(counters.slot_counters(slot), over);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.len(), PENDING_LABEL_SETS);
    assert!(totals.series.values().all(|&n| n == 1));
    assert_eq!(totals.overflow, 1, "counted, without its labels");
}

#[test]
fn the_next_holder_of_a_slot_keeps_its_pending_label_sets() {
    let words = zeroed_words();
    let locks = ProcessLocks::default();
    let counters = Counters::open(&words, &locks, 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let _held = locks.hold_registry().unwrap();
    let id = counters.label_id_in_slot(slot, &labels(3));
    count(counters.slot_counters(slot), id);
    // The worker dies; a new one (another tree's locks) takes the same slot.
    let next = Counters::open(&words, ProcessLocks::default(), 2).unwrap();
    assert_eq!(next.claim_slot(2), Some(slot));
    // Its registry is free: registered; the dead worker's pending count stays.
    let registered = next.label_id_in_slot(slot, &labels(3));
    assert_eq!(registered, 0);
    count(next.slot_counters(slot), registered);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.get(&labels(3)), Some(&2));
    assert_eq!(
        words[slot_offset(slot) + slot_header::PENDING].load(Ordering::Relaxed),
        1
    );
}

#[test]
fn a_pending_entry_not_yet_published_is_not_read() {
    let words = zeroed_words();
    let locks = ProcessLocks::default();
    let counters = Counters::open(&words, &locks, 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let _held = locks.hold_registry().unwrap();
    let id = counters.label_id_in_slot(slot, &labels(1));
    count(counters.slot_counters(slot), id);
    // As if the writer died after writing the entry, before publishing it.
    words[slot_offset(slot) + slot_header::PENDING].store(0, Ordering::Release);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert!(totals.series.is_empty(), "{totals:?}");
    // A count past the bound is clamped (a hostile file): no panic, no series past it.
    words[slot_offset(slot) + slot_header::PENDING].store(u64::MAX, Ordering::Release);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert!(totals.series.len() <= PENDING_LABEL_SETS);
}

/// A child process holding a read lock on `bytes` of the file open at `fd` until killed.
/// Forked: it runs only async-signal-safe calls (fcntl, write, pause).
struct LockHolder {
    pid: libc::pid_t,
}

impl LockHolder {
    fn hold(fd: i32, bytes: &[usize]) -> LockHolder {
        let mut pipe = [0i32; 2];
        // SAFETY: a valid array of two descriptors.
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        // SAFETY: the child calls only async-signal-safe functions, then _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            for &byte in bytes {
                // SAFETY: a zeroed flock is valid; our descriptor.
                let mut lock: libc::flock = unsafe { std::mem::zeroed() };
                lock.l_type = libc::F_RDLCK as libc::c_short;
                lock.l_whence = libc::SEEK_SET as libc::c_short;
                lock.l_start = byte as libc::off_t;
                lock.l_len = 1;
                // SAFETY: as above.
                if unsafe { libc::fcntl(fd, libc::F_SETLK, &lock) } != 0 {
                    unsafe { libc::_exit(1) };
                }
            }
            // SAFETY: write to our pipe, then wait for the signal that kills us.
            unsafe {
                libc::write(pipe[1], b"x".as_ptr().cast(), 1);
                loop {
                    libc::pause();
                }
            }
        }
        let mut byte = 0u8;
        // SAFETY: our pipe's read end and a one-byte buffer.
        let read = unsafe { libc::read(pipe[0], (&raw mut byte).cast(), 1) };
        assert_eq!(read, 1, "the lock holder took its locks");
        // SAFETY: our descriptors.
        unsafe {
            libc::close(pipe[0]);
            libc::close(pipe[1]);
        }
        LockHolder { pid }
    }
}

impl Drop for LockHolder {
    fn drop(&mut self) {
        // SAFETY: our child.
        unsafe {
            libc::kill(self.pid, libc::SIGKILL);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Another process (any user who can open the file: a same-uid tenant) holds read locks
/// on the registry byte and on every slot but the last: opening the file, claiming a slot
/// and counting a new label set all return at once, and the count lands under its labels
/// (pending); once the holder is gone the label set is registered. With `F_SETLKW` this
/// test hangs (the suite's own timeout ends it).
#[test]
fn a_read_lock_held_by_another_process_never_blocks_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(dir.path().join("locked"))
        .unwrap();
    hostile
        .set_len(dw_traffic::layout::FILE_BYTES as u64)
        .unwrap();
    let slots_held: Vec<usize> = (0..dw_traffic::layout::MAX_SLOTS - 1)
        .map(|slot| slot_offset(slot) * 8)
        .collect();
    let mut bytes = vec![header::LABEL_COUNT * 8];
    bytes.extend(&slots_held);
    let holder = LockHolder::hold(hostile.as_raw_fd(), &bytes);
    let file = MappedFile::open_path(&dir.path().join("locked")).unwrap();
    let counters = Counters::open(file.words(), file.locks(), 1).unwrap();
    let slot = counters.claim_slot(1).expect("the one slot not held");
    assert_eq!(slot, dw_traffic::layout::MAX_SLOTS - 1);
    let id = counters.label_id_in_slot(slot, &labels(9));
    assert_eq!(id, FIRST_PENDING_ID, "the registry is held: pending");
    count(counters.slot_counters(slot), id);
    drop(holder);
    let id = counters.label_id_in_slot(slot, &labels(9));
    assert_eq!(id, 0, "registered once the holder is gone");
    count(counters.slot_counters(slot), id);
    let totals = parse(&words_to_bytes(file.words())).unwrap();
    assert_eq!(totals.series.get(&labels(9)), Some(&2));
    let _: FileLocks = file.locks();
}
