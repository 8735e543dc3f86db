//! What reading a snapshot costs in the core, for a snapshot given by path: a first read
//! (`Table::parse_after` an empty table) and a reload where one region changed
//! (`Table::parse_after` the previous table), as the extension does both.
//!
//! `cargo bench -p dw-routing --bench parse -- FILE [ROUNDS]` prints the median wall time of
//! each (as one JSON object when `DW_BENCH_JSON` is set; bench/10-router.sh reads it). Under `valgrind --tool=callgrind --toggle-collect='parse::reload'` (or
//! `parse::cold_start`) and one round, the instruction count of one call alone.

use std::hint::black_box;
use std::time::{Duration, Instant};

use dw_routing::Table;

fn main() {
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let Some(path) = args.next() else {
        eprintln!("usage: parse FILE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|n| n.parse().ok()).unwrap_or(50);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("parse: cannot read {path}: {error}");
            std::process::exit(2);
        }
    };
    // As the extension loads: every table is read after the one before it.
    let empty = Table::empty();
    let before = Table::parse_after(&bytes, &empty).expect("a readable snapshot");
    let changed = change_one_region(&bytes);
    let after = Table::parse_after(&changed, &before).expect("still readable");
    assert_eq!(after.region_count(), before.region_count());

    let cold = median(rounds, || cold_start(&bytes));
    let warm = median(rounds, || reload(&changed, &before));
    // As in a worker, where a reload comes after other work has filled the caches.
    let mut other_work = vec![0u8; 64 << 20];
    let reload_cold = median_after(
        rounds,
        || evict(&mut other_work),
        || reload_cold_caches(&changed, &before),
    );
    if std::env::var_os("DW_BENCH_JSON").is_some() {
        println!(
            r#"{{"bytes":{},"regions":{},"cold_ns":{},"reload_ns":{},"reload_cold_cache_ns":{}}}"#,
            bytes.len(),
            before.region_count(),
            cold.as_nanos(),
            warm.as_nanos(),
            reload_cold.as_nanos()
        );
    } else {
        println!(
            "{} bytes, {} regions: first read {:.3} ms, reload (one region changed) {:.3} ms, \
             the same after other work evicted the caches {:.3} ms",
            bytes.len(),
            before.region_count(),
            cold.as_secs_f64() * 1e3,
            warm.as_secs_f64() * 1e3,
            reload_cold.as_secs_f64() * 1e3
        );
    }
}

/// A first load: nothing to reuse.
#[inline(never)]
fn cold_start(bytes: &[u8]) {
    black_box(Table::parse_after(black_box(bytes), &Table::empty()).ok());
}

/// A reload after one region changed.
#[inline(never)]
fn reload(bytes: &[u8], before: &Table) {
    black_box(Table::parse_after(black_box(bytes), before).ok());
}

/// [`reload`] again, as its own function so that a callgrind run toggled on `reload`
/// counts one reload (a body different enough that the two are not merged).
#[inline(never)]
fn reload_cold_caches(bytes: &[u8], before: &Table) {
    black_box(
        Table::parse_after(black_box(bytes), before)
            .map(|table| table.revision())
            .ok(),
    );
}

/// The same snapshot with one region's shard renamed: the first `\"shard\":\"` value's
/// first character becomes `Z`, a change of one byte that keeps the file valid.
fn change_one_region(bytes: &[u8]) -> Vec<u8> {
    let needle = br#"\"shard\":\""#;
    let mut changed = bytes.to_vec();
    if let Some(at) = changed
        .windows(needle.len())
        .position(|window| window == needle)
    {
        changed[at + needle.len()] = b'Z';
    }
    changed
}

fn median(rounds: usize, run: impl FnMut()) -> Duration {
    median_after(rounds, || {}, run)
}

/// The median time of `run`, each run preceded by an untimed `prepare`.
fn median_after(rounds: usize, mut prepare: impl FnMut(), mut run: impl FnMut()) -> Duration {
    let mut times: Vec<Duration> = (0..rounds.max(1))
        .map(|_| {
            prepare();
            let start = Instant::now();
            run();
            start.elapsed()
        })
        .collect();
    times.sort();
    times[times.len() / 2]
}

/// Writes a buffer larger than the caches, so that the next run starts with cold ones.
fn evict(buffer: &mut [u8]) {
    for (index, byte) in buffer.iter_mut().enumerate().step_by(64) {
        *byte = byte.wrapping_add(index as u8);
    }
    black_box(&buffer);
}
