//! Every bound at its edge (label sets, slots, label bytes, files per directory), the reader on hostile bytes
//! (a property test over arbitrary and mutated files), and real threads counting in
//! their own slots while a reader reads.

use std::sync::atomic::{AtomicBool, Ordering};

use dw_traffic::layout::{FILE_BYTES, MAX_LABEL_SETS, MAX_SLOTS, OVERFLOW_ID, header};
use dw_traffic::{
    Counters, LabelSet, MAX_FILES, MAX_REFUSALS_KEPT, MAX_SCANNED_ENTRIES, ProcessLocks, Step,
    count, file_name, parse, read_directory, uid_of_file_name, words_to_bytes, zeroed_words,
};
use proptest::prelude::*;

fn labels(n: usize) -> LabelSet {
    LabelSet::new(
        format!("G{n}").as_bytes(),
        Step::Geo,
        format!("G{n}").as_bytes(),
        b"o",
        b"s",
        false,
    )
}

#[test]
fn label_sets_past_the_bound_count_as_overflow() {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    for n in 0..MAX_LABEL_SETS {
        let id = counters.label_id(&labels(n));
        assert_eq!(id as usize, n, "ids are handed out in order");
        count(counters.slot_counters(slot), id);
    }
    // The same set again: its id, no new entry.
    assert_eq!(counters.label_id(&labels(7)), 7);
    assert_eq!(counters.label_count(), MAX_LABEL_SETS);
    // One past the bound.
    let over = counters.label_id(&labels(MAX_LABEL_SETS));
    assert_eq!(over, OVERFLOW_ID);
    count(counters.slot_counters(slot), over);
    count(counters.slot_counters(slot), over);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.len(), MAX_LABEL_SETS);
    assert_eq!(totals.overflow, 2);
    assert!(totals.series.values().all(|&n| n == 1));
}

#[test]
fn workers_past_the_slots_count_unslotted() {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    for n in 0..MAX_SLOTS {
        assert_eq!(counters.claim_slot(n as u64), Some(n));
    }
    assert_eq!(counters.claim_slot(9999), None);
    counters.count_unslotted();
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.overflow, 1);
}

#[test]
fn a_reopened_file_keeps_its_label_sets_and_counts() {
    let words = zeroed_words();
    let first = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let id = first.label_id(&labels(1));
    count(first.slot_counters(first.claim_slot(1).unwrap()), id);
    // A second tree (a reload, a detached restart) opens the same words.
    let second = Counters::open(&words, ProcessLocks::default(), 2).unwrap();
    assert_eq!(second.label_id(&labels(1)), id);
    count(second.slot_counters(1), id);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.get(&labels(1)), Some(&2));
    assert_eq!(words[header::TREES].load(Ordering::Relaxed), 2);
}

#[test]
fn a_file_of_another_layout_is_refused() {
    let words = zeroed_words();
    Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    words[header::MAX_SLOTS].store(7, Ordering::Relaxed);
    assert!(Counters::open(&words, ProcessLocks::default(), 1).is_err());
    assert!(parse(&words_to_bytes(&words)).is_err());
    assert!(parse(&[]).is_err());
    assert!(parse(&vec![0; FILE_BYTES - 8]).is_err());
    assert!(parse(&vec![0; FILE_BYTES]).is_err(), "no magic");
}

#[test]
fn duplicate_entries_in_a_file_are_one_series() {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    let a = counters.label_id(&labels(1));
    count(counters.slot_counters(slot), a);
    // Write entry 1 as a copy of entry 0, as a registration that died before its
    // bucket would leave it, and count in it.
    let mut bytes = words_to_bytes(&words);
    let entry = dw_traffic::layout::entry_offset(0) * 8;
    let words_per_entry = dw_traffic::layout::ENTRY_WORDS * 8;
    let copy = bytes[entry..entry + words_per_entry].to_vec();
    bytes[entry + words_per_entry..entry + 2 * words_per_entry].copy_from_slice(&copy);
    bytes[header::LABEL_COUNT * 8..header::LABEL_COUNT * 8 + 8]
        .copy_from_slice(&2u64.to_ne_bytes());
    let counter =
        (dw_traffic::layout::slot_offset(slot) + dw_traffic::layout::SLOT_HEADER_WORDS + 1) * 8;
    bytes[counter..counter + 8].copy_from_slice(&5u64.to_ne_bytes());
    let totals = parse(&bytes).unwrap();
    assert_eq!(totals.series.len(), 1);
    assert_eq!(totals.series.get(&labels(1)), Some(&6));
}

#[test]
fn threads_in_their_own_slots_count_exactly_while_read() {
    const THREADS: usize = 4;
    const ANSWERS: u64 = 50_000;
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let ids: Vec<u32> = (0..3).map(|n| counters.label_id(&labels(n))).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let mut writers = Vec::new();
        for thread in 0..THREADS {
            let slot = counters.claim_slot(thread as u64).unwrap();
            let slot_counters = counters.slot_counters(slot);
            let ids = &ids;
            writers.push(scope.spawn(move || {
                for n in 0..ANSWERS {
                    count(slot_counters, ids[(n % 3) as usize]);
                }
            }));
        }
        let reader = scope.spawn(|| {
            let mut last = 0u64;
            while !done.load(Ordering::Relaxed) {
                let totals = parse(&words_to_bytes(&words)).unwrap();
                let total: u64 = totals.series.values().sum();
                assert!(total >= last, "total went down: {last} then {total}");
                assert!(total <= THREADS as u64 * ANSWERS);
                last = total;
            }
        });
        for writer in writers {
            writer.join().unwrap();
        }
        done.store(true, Ordering::Relaxed);
        reader.join().unwrap();
    });
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(
        totals.series.values().sum::<u64>(),
        THREADS as u64 * ANSWERS
    );
    assert_eq!(totals.overflow, 0);
}

/// Writes `bytes` to `path` sparsely: the file sized first, then only its pages that are
/// not all zeros written (a counter file is 10.6 MB, almost all zeros).
fn write_sparse(path: &std::path::Path, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    for (page, chunk) in bytes.chunks(4096).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            file.write_all_at(chunk, (page * 4096) as u64).unwrap();
        }
    }
}

/// Writes a counter file for `uid` (`answers-<uid>.bin`, owned by that uid: the tests run
/// as root inside the devenv, which lets them make files of other users).
fn write_for(dir: &std::path::Path, uid: u32, bytes: &[u8]) -> std::path::PathBuf {
    let path = dir.join(file_name(uid));
    write_sparse(&path, bytes);
    std::os::unix::fs::chown(&path, Some(uid), None).expect("chown (run as root, in the devenv)");
    path
}

#[test]
fn files_past_the_bound_are_not_read() {
    let bytes = valid_file();
    let per_file: u64 = parse(&bytes).unwrap().series.values().sum();
    let dir = tempfile::tempdir().unwrap();
    // At the bound: every file read.
    for uid in 0..MAX_FILES as u32 {
        write_for(dir.path(), 1000 + uid, &bytes);
    }
    let found = read_directory(dir.path());
    assert_eq!(found.files, MAX_FILES);
    assert!(found.refused.is_empty(), "{:?}", found.refused);
    assert_eq!(
        found.totals.series.values().sum::<u64>(),
        per_file * MAX_FILES as u64
    );
    // One past it: the highest uid is not read, and says why.
    write_for(dir.path(), 99999, &bytes);
    let found = read_directory(dir.path());
    assert_eq!(found.files, MAX_FILES);
    assert_eq!(found.refused.len(), 1);
    assert_eq!(found.refused[0].0, "answers-99999.bin");
    assert!(
        found.refused[0]
            .1
            .to_string()
            .contains("more than 64 files"),
        "{}",
        found.refused[0].1
    );
    assert_eq!(
        found.totals.series.values().sum::<u64>(),
        per_file * MAX_FILES as u64
    );
}

/// A file named for one uid but owned by another (any user can write the directory) is
/// refused, as is a name that is not exactly `answers-<uid>.bin`; names that sort first
/// cannot push the real files out.
#[test]
fn a_file_must_be_owned_by_the_uid_its_name_gives() {
    let bytes = valid_file();
    let per_file: u64 = parse(&bytes).unwrap().series.values().sum();
    let dir = tempfile::tempdir().unwrap();
    write_for(dir.path(), 33, &bytes);
    // Forged: another user's name, owned by uid 1000.
    let forged = dir.path().join(file_name(34));
    write_sparse(&forged, &bytes);
    std::os::unix::fs::chown(&forged, Some(1000), None).unwrap();
    // Not canonical: leading zeros, a sign, no digits.
    for name in ["answers-033.bin", "answers-+33.bin", "answers-.bin"] {
        write_sparse(&dir.path().join(name), &bytes);
    }
    let found = read_directory(dir.path());
    assert_eq!(found.files, 1, "{:?}", found.refused);
    assert_eq!(found.totals.series.values().sum::<u64>(), per_file);
    assert_eq!(found.refused.len(), 4, "{:?}", found.refused);
    let forged_why = found
        .refused
        .iter()
        .find(|(name, _)| name == "answers-34.bin")
        .map(|(_, why)| why.to_string())
        .unwrap_or_default();
    assert!(
        forged_why.contains("owned by uid 1000, not by uid 34"),
        "{forged_why}"
    );
    assert_eq!(uid_of_file_name(b"answers-33.bin"), Some(33));
    assert_eq!(uid_of_file_name(b"answers-4294967295.bin"), Some(u32::MAX));
    assert_eq!(uid_of_file_name(b"answers-4294967296.bin"), None);
    assert_eq!(uid_of_file_name(b"answers-033.bin"), None);
}

/// At most MAX_SCANNED_ENTRIES entries are looked at; past that the read says so, and the
/// refusals kept stop at MAX_REFUSALS_KEPT with the rest counted.
#[test]
fn the_directory_scan_is_bounded() {
    let dir = tempfile::tempdir().unwrap();
    for n in 0..MAX_SCANNED_ENTRIES {
        std::fs::write(dir.path().join(format!("answers-x{n}.bin")), b"").unwrap();
    }
    let found = read_directory(dir.path());
    assert!(!found.unscanned, "exactly the bound: all scanned");
    assert_eq!(found.refused.len(), MAX_REFUSALS_KEPT);
    assert_eq!(found.refused_more, MAX_SCANNED_ENTRIES - MAX_REFUSALS_KEPT);
    std::fs::write(dir.path().join("junk"), b"").unwrap();
    let found = read_directory(dir.path());
    assert!(found.unscanned, "one past the bound");
    assert_eq!(found.files, 0);
}

/// A valid file with a few label sets counted, as bytes.
fn valid_file() -> Vec<u8> {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    for n in 0..5 {
        count(counters.slot_counters(slot), counters.label_id(&labels(n)));
    }
    words_to_bytes(&words)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..4096)) {
        prop_assert!(parse(&bytes).is_err());
    }

    #[test]
    fn mutated_files_parse_within_bounds(
        flips in proptest::collection::vec((0usize..FILE_BYTES, any::<u8>()), 1..64),
        header_flips in proptest::collection::vec((0usize..256, any::<u8>()), 0..8),
    ) {
        let mut bytes = valid_file();
        for (at, value) in flips.into_iter().chain(header_flips) {
            bytes[at] = value;
        }
        if let Ok(totals) = parse(&bytes) {
            prop_assert!(totals.series.len() <= MAX_LABEL_SETS);
            for labels in totals.series.keys() {
                prop_assert!(labels.geo.len() <= dw_traffic::layout::MAX_LABEL_BYTES);
                prop_assert!(labels.origin.len() <= dw_traffic::layout::MAX_LABEL_BYTES);
            }
        }
    }
}
