//! What one `Table::resolve` costs in the core, for a snapshot given by path: a mix of
//! countries (every region's geo, then geos no region has, which take the fallback), each
//! without and with a sticky key.
//!
//! `cargo bench -p dw-routing --bench resolve -- FILE [CALLS]` prints the wall time per
//! call of each variant (median of 11 runs of CALLS calls). Under
//! `valgrind --tool=callgrind --toggle-collect='resolve::calls*'` the instructions of the
//! loops alone: divide each function's inclusive count by CALLS.

use std::hint::black_box;
use std::time::Instant;

use dw_routing::Table;

fn main() {
    let mut args = std::env::args().skip(1).filter(|arg| arg != "--bench");
    let Some(path) = args.next() else {
        eprintln!("usage: resolve FILE [CALLS]");
        std::process::exit(2);
    };
    let calls: usize = args
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2_000_000);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) => {
            eprintln!("resolve: cannot read {path}: {error}");
            std::process::exit(2);
        }
    };
    let table = match Table::parse(&bytes) {
        Ok(table) => table,
        Err(error) => {
            eprintln!("resolve: {path}: {error}");
            std::process::exit(2);
        }
    };
    // What `CF-IPCountry` sends: mostly countries with a region, some without (`XX`, `T1`,
    // codes no region names), and now and then a header that is no country code at all.
    let mut countries: Vec<Vec<u8>> = table
        .regions()
        .map(|(geo, _)| geo.as_bytes().to_vec())
        .collect();
    countries.extend(["XX", "T1", "ZZ", "Q9", "", "not-a-country"].map(|c| c.as_bytes().to_vec()));
    let countries: Vec<&[u8]> = countries.iter().map(Vec::as_slice).collect();

    let without = median_per_call(calls, || calls_without_key(&table, &countries, calls));
    let with = median_per_call(calls, || calls_with_key(&table, &countries, calls));
    println!(
        "{} regions, {} countries in the mix: resolve {:.2} ns per call, with a sticky key {:.2} ns",
        table.region_count(),
        countries.len(),
        without,
        with
    );
}

/// `calls` resolves without a sticky key, cycling through `countries`.
#[inline(never)]
fn calls_without_key(table: &Table, countries: &[&[u8]], calls: usize) {
    for country in countries.iter().cycle().take(calls) {
        black_box(table.resolve(black_box(country), None));
    }
}

/// The same with a sticky key, which the pick hashes instead of the country.
#[inline(never)]
fn calls_with_key(table: &Table, countries: &[&[u8]], calls: usize) {
    for country in countries.iter().cycle().take(calls) {
        black_box(table.resolve(black_box(country), Some(black_box(b"visitor-4711"))));
    }
}

fn median_per_call(calls: usize, mut run: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..11)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64() * 1e9 / calls.max(1) as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
