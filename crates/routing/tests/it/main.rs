//! dw-routing's integration tests, one binary (`cargo test -p dw-routing --test it`): each
//! former `tests/*.rs` file is a module here, so the crate's tests compile and link once.
//! No test relies on being alone in its process: none sets an environment variable, the
//! current directory, a signal handler or a process-wide once-cell. proptest's regression
//! seeds are in `tests/proptest-regressions/chain.txt`: for a module of a binary with a
//! `main.rs`, that is where its default `FileFailurePersistence::SourceParallel` looks.
//!
//! The shared case files (`../bucket-cases.json`, `../cache-tags-cases.json`,
//! `../overlay-cases.json`) stay in `crates/routing/tests/`, where the userland twin's
//! self-test reads them too.

mod bucket_cases;
mod bucketed_table;
mod buckets;
mod cache_tags_cases;
mod chain;
mod overlay_cases;
mod properties;
mod stage;
mod table;
