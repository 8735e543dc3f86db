//! dw-traffic: the answer counters shared by `dw_router.so`'s workers on a node and read
//! by `dw-agent` (docs/traffic.md).
//!
//! A counter file has a fixed layout ([`layout`]): a registry of label sets
//! (`geo`, `step`, `key`, `origin`, `shard`, `sticky`) that any worker adds to without
//! duplicates, and a slot per worker, written only by its worker. The writer's protocol is
//! [`Counters`] (over words mapped by [`MappedFile`], locked by [`FileLocks`]); the reader
//! parses the bytes as hostile input ([`parse`], [`read_directory`]). The crate links no
//! async runtime and no etcd client: the extension links it.
//!
//! ```
//! use dw_traffic::{Counters, LabelSet, ProcessLocks, Step, count, parse, words_to_bytes, zeroed_words};
//!
//! let words = zeroed_words();
//! let counters = Counters::open(&words, ProcessLocks::default(), 1)?;
//! let slot = counters.claim_slot(1).expect("a free slot");
//! let labels = LabelSet::new(b"DE", Step::Country, b"DE", b"fra-a", b"eu-1", false);
//! let id = counters.label_id(&labels);
//! count(counters.slot_counters(slot), id);
//! count(counters.slot_counters(slot), id);
//! let totals = parse(&words_to_bytes(&words))?;
//! assert_eq!(totals.series.get(&labels), Some(&2));
//! # Ok::<(), dw_traffic::Error>(())
//! ```

#![deny(missing_docs)]

mod counters;
mod error;
mod file;
mod labels;
pub mod layout;
mod reader;

pub use crate::{
    counters::{Counters, Locks, ProcessLocks, count, words_to_bytes, zeroed_words},
    error::Error,
    file::{
        DirectoryTotals, FileLocks, MAX_FILES, MAX_REFUSALS_KEPT, MAX_SCANNED_ENTRIES, MappedFile,
        file_name, read_directory, read_file, uid_of_file_name,
    },
    labels::{LabelSet, Step, bounded},
    reader::{Totals, parse},
};
