//! dw-traffic: the answer counters shared by `dw_router.so`'s workers on a node and read
//! by `dw-agent` (docs/traffic.md).
//!
//! A counter file has a fixed layout ([`layout`]): a registry of label sets
//! (`geo`, `step`, `key`, `origin`, `shard`, `kind`: plain, sticky or bucket) that any worker adds to without
//! duplicates, and a slot per worker, written only by its worker. The writer's protocol is
//! [`Counters`] (over words mapped by [`MappedFile`], locked by [`FileLocks`]); the reader
//! opens the configured users' files by name and parses the bytes as hostile input
//! ([`read_users`], [`parse`]). The crate links no
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
    counters::{
        Counters, Locks, ProcessLocks, REGISTRY_LOCK_TRIES, count, words_to_bytes, zeroed_words,
    },
    error::Error,
    file::{
        DirectoryTotals, FILE_MODE, FileLocks, FileState, MAX_FILES, MAX_REFUSALS_KEPT,
        MAX_SCANNED_ENTRIES, MappedFile, UsersTotals, file_name, locate, read_directory, read_file,
        read_users, uid_of_file_name, user_dir,
    },
    labels::{AnswerKind, LabelSet, Step, bounded},
    reader::{Totals, parse, parse_versions},
};
