//! Layout versions across an upgrade (docs/traffic.md, "Upgrading"): a writer creates
//! version 3 (the entry's kind byte may be 2, bucket), the reader takes 2 and 3, the
//! reader from before version 3 refuses a version-3 file whole, and a writer adopting an
//! older extension's version-2 file counts bucketed answers in the overflow: counts are
//! never misread, only left out and said.

use std::sync::atomic::Ordering;

use dw_traffic::layout::{MAGIC, MAX_LABEL_BYTES, MAX_LABEL_SETS, MAX_SLOTS, VERSION, header};
use dw_traffic::{
    AnswerKind, Counters, Error, LabelSet, ProcessLocks, Step, count, parse, parse_versions,
    words_to_bytes, zeroed_words,
};

fn labels(kind: AnswerKind) -> LabelSet {
    LabelSet::new(b"DE", Step::Country, b"DE", b"fra-a", b"eu-1", kind)
}

/// A file's words with a version-2 header, as the extension before buckets created it.
fn version_2_words() -> Vec<std::sync::atomic::AtomicU64> {
    let words = zeroed_words();
    words[header::VERSION].store(2, Ordering::Relaxed);
    words[header::MAX_LABEL_SETS].store(MAX_LABEL_SETS as u64, Ordering::Relaxed);
    words[header::MAX_SLOTS].store(MAX_SLOTS as u64, Ordering::Relaxed);
    words[header::MAX_LABEL_BYTES].store(MAX_LABEL_BYTES as u64, Ordering::Relaxed);
    words[header::MAGIC].store(MAGIC, Ordering::Release);
    words
}

#[test]
fn a_new_file_is_version_3_and_counts_every_kind() {
    assert_eq!(VERSION, 3);
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    assert_eq!(counters.version(), 3);
    let slot = counters.claim_slot(1).unwrap();
    for (times, kind) in (1..).zip(AnswerKind::ALL) {
        let id = counters.label_id(&labels(kind));
        for _ in 0..times {
            count(counters.slot_counters(slot), id);
        }
    }
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert_eq!(totals.series.get(&labels(AnswerKind::Plain)), Some(&1));
    assert_eq!(totals.series.get(&labels(AnswerKind::Sticky)), Some(&2));
    assert_eq!(totals.series.get(&labels(AnswerKind::Bucket)), Some(&3));
    assert_eq!((totals.overflow, totals.malformed_entries), (0, 0));
}

#[test]
fn the_reader_before_version_3_refuses_a_new_file_whole() {
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    count(
        counters.slot_counters(slot),
        counters.label_id(&labels(AnswerKind::Plain)),
    );
    // The old agent's reader: version 2 only. Refused by the header, not read in part.
    assert_eq!(
        parse_versions(&words_to_bytes(&words), &[2]),
        Err(Error::Header("version"))
    );
}

#[test]
fn an_old_file_is_read_by_the_new_reader() {
    let words = version_2_words();
    // An old extension's writer is this one's protocol with version 2: plain and sticky.
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    assert_eq!(counters.version(), 2, "adopted as it is");
    let slot = counters.claim_slot(1).unwrap();
    count(
        counters.slot_counters(slot),
        counters.label_id(&labels(AnswerKind::Plain)),
    );
    let sticky = counters.label_id(&labels(AnswerKind::Sticky));
    count(counters.slot_counters(slot), sticky);
    count(counters.slot_counters(slot), sticky);
    // A bucketed answer has no entry in a version-2 file: the overflow, said by the
    // overflow series, never counted as plain or sticky.
    let bucket = counters.label_id(&labels(AnswerKind::Bucket));
    assert_eq!(bucket, dw_traffic::layout::OVERFLOW_ID);
    count(counters.slot_counters(slot), bucket);
    assert_eq!(
        counters.try_label_id(&labels(AnswerKind::Bucket)),
        Some(bucket)
    );
    assert_eq!(
        counters.label_id_in_slot(slot, &labels(AnswerKind::Bucket)),
        bucket
    );
    let bytes = words_to_bytes(&words);
    assert_eq!(bytes[header::VERSION * 8], 2, "the header stays version 2");
    for reader in [
        parse(&bytes).unwrap(),
        parse_versions(&bytes, &[2]).unwrap(),
    ] {
        assert_eq!(reader.series.len(), 2);
        assert_eq!(reader.series.get(&labels(AnswerKind::Plain)), Some(&1));
        assert_eq!(reader.series.get(&labels(AnswerKind::Sticky)), Some(&2));
        assert_eq!((reader.overflow, reader.malformed_entries), (1, 0));
    }
}

#[test]
fn a_bucket_code_in_an_old_file_is_malformed_not_misread() {
    // A version-3 writer's entry copied under a version-2 header (hostile or corrupt):
    // skipped with its counts, never read as plain or sticky.
    let words = zeroed_words();
    let counters = Counters::open(&words, ProcessLocks::default(), 1).unwrap();
    let slot = counters.claim_slot(1).unwrap();
    count(
        counters.slot_counters(slot),
        counters.label_id(&labels(AnswerKind::Bucket)),
    );
    words[header::VERSION].store(2, Ordering::Relaxed);
    let totals = parse(&words_to_bytes(&words)).unwrap();
    assert!(totals.series.is_empty());
    assert_eq!(totals.malformed_entries, 1);
}

#[test]
fn other_versions_are_refused_by_reader_and_writer() {
    for version in [0, 1, 4, u64::MAX] {
        let words = version_2_words();
        words[header::VERSION].store(version, Ordering::Relaxed);
        assert_eq!(
            parse(&words_to_bytes(&words)),
            Err(Error::Header("version")),
            "{version}"
        );
        assert!(Counters::open(&words, ProcessLocks::default(), 1).is_err());
    }
}
