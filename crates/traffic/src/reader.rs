//! The reader's side: a counter file's bytes, parsed as hostile input. The size must be
//! the layout's and the header must name this layout's bounds; nothing else is taken
//! from the file as a length. Malformed entries are skipped with their counts; counts
//! are added with saturation; label sets that appear twice (in one file or across files)
//! are added up, so a scrape never holds a duplicate series.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::labels::LabelSet;
use crate::layout::{
    ENTRY_WORDS, FILE_BYTES, FILE_WORDS, FIRST_PENDING_ID, MAX_LABEL_SETS, MAX_SLOTS, OVERFLOW_ID,
    PENDING_LABEL_SETS, READ_VERSIONS, SLOT_HEADER_WORDS, check_header, entry_offset, header,
    pending_entry_offset, slot_header, slot_offset,
};

/// The answers counted in one or more files.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Totals {
    /// Answers per label set.
    pub series: BTreeMap<LabelSet, u64>,
    /// Answers counted without their labels: past [`MAX_LABEL_SETS`] label sets, or by a
    /// worker that found no slot free.
    pub overflow: u64,
    /// Entries skipped as malformed (their counts are in no series).
    pub malformed_entries: u64,
}

impl Totals {
    /// Adds `other` to these totals.
    pub fn add(&mut self, other: Totals) {
        for (labels, count) in other.series {
            let total = self.series.entry(labels).or_insert(0);
            *total = total.saturating_add(count);
        }
        self.overflow = self.overflow.saturating_add(other.overflow);
        self.malformed_entries = self
            .malformed_entries
            .saturating_add(other.malformed_entries);
    }
}

fn word(bytes: &[u8], index: usize) -> u64 {
    bytes
        .get(index * 8..index * 8 + 8)
        .and_then(|chunk| chunk.try_into().ok())
        .map_or(0, u64::from_ne_bytes)
}

/// Parses a counter file's bytes. An error when the size or the header is not this
/// layout's (of a version of [`READ_VERSIONS`]: an older extension's file is read);
/// otherwise every well-formed entry's counts, summed over the slots.
pub fn parse(bytes: &[u8]) -> Result<Totals, Error> {
    parse_versions(bytes, &READ_VERSIONS)
}

/// [`parse`], taking only the layout versions `versions`: `&[2]` is the reader from
/// before version 3, kept to test that it refuses a newer file by its header, whole.
#[doc(hidden)]
pub fn parse_versions(bytes: &[u8], versions: &[u64]) -> Result<Totals, Error> {
    if bytes.len() != FILE_BYTES {
        return Err(Error::Size {
            found: bytes.len(),
            expected: FILE_BYTES,
        });
    }
    let version = check_header(|index| word(bytes, index), versions)?;
    let label_count = (word(bytes, header::LABEL_COUNT) as usize).min(MAX_LABEL_SETS);
    let mut totals = Totals {
        overflow: word(bytes, header::UNSLOTTED),
        ..Totals::default()
    };
    let mut sums = vec![0u64; label_count];
    for slot in 0..MAX_SLOTS {
        let counters = slot_offset(slot) + SLOT_HEADER_WORDS;
        for (id, sum) in sums.iter_mut().enumerate() {
            *sum = sum.saturating_add(word(bytes, counters + id));
        }
        // Ids registered after the label count was read: next scrape.
        totals.overflow = totals
            .overflow
            .saturating_add(word(bytes, counters + OVERFLOW_ID as usize));
    }
    let mut entry = [0u64; ENTRY_WORDS];
    let mut add_entry = |totals: &mut Totals, start: usize, sum: u64| {
        for (offset, slot) in entry.iter_mut().enumerate() {
            *slot = word(bytes, start + offset);
        }
        match LabelSet::decode(&entry, version) {
            Ok(labels) => {
                let total = totals.series.entry(labels).or_insert(0);
                *total = total.saturating_add(sum);
            }
            Err(_) => totals.malformed_entries += 1,
        }
    };
    for (id, sum) in sums.into_iter().enumerate() {
        add_entry(&mut totals, entry_offset(id), sum);
    }
    // Each slot's pending label sets (kept there while the registry was busy): added to
    // the series as duplicates are. The count is read before the entries, so every
    // pending entry read was published.
    for slot in 0..MAX_SLOTS {
        let pending = (word(bytes, slot_offset(slot) + slot_header::PENDING) as usize)
            .min(PENDING_LABEL_SETS);
        let counters = slot_offset(slot) + SLOT_HEADER_WORDS;
        for index in 0..pending {
            let sum = word(bytes, counters + FIRST_PENDING_ID as usize + index);
            add_entry(&mut totals, pending_entry_offset(slot, index), sum);
        }
    }
    debug_assert_eq!(FILE_WORDS * 8, FILE_BYTES);
    Ok(totals)
}
