//! The prediction at scale (bench/61-capacity.sh): a drain planned on 20,000 regions with
//! 5,000 geos of plain and sticky traffic, beside the time to read the state.
//!
//! Prints one line per measurement, `capacity-bench<TAB>name<TAB>median ms<TAB>min ms
//! <TAB>runs`, then a `capacity-facts` line describing the input.

use std::time::Instant;

use dw_capacity::{
    DEFAULT_HEADROOM, ShedPlan, ShedRequest, Traffic, compare, guard, largest_fitting_shed,
    predict, shed,
};
use dw_routing::{Snapshot, SnapshotWriter, Table};

const REGIONS: usize = 20_000;
const GEOS: usize = 5_000;
/// Runs per measurement, unless `DW_CAPACITY_BENCH_RUNS` says otherwise (callgrind: 1).
const RUNS: usize = 7;

fn runs() -> usize {
    std::env::var("DW_CAPACITY_BENCH_RUNS")
        .ok()
        .and_then(|runs| runs.parse().ok())
        .filter(|&runs| runs > 0)
        .unwrap_or(RUNS)
}

/// What callgrind counts (`--toggle-collect=*measured_read_state*`): not inlined, so that
/// the function is there to be named.
#[inline(never)]
fn measured_read_state(snapshot: &[u8]) -> Table {
    Table::parse(snapshot).unwrap()
}

/// What callgrind counts (`--toggle-collect=*measured_drain_plan*`).
#[inline(never)]
fn measured_drain_plan(table: &Table, traffic: &Traffic, request: &ShedRequest) -> ShedPlan {
    shed(table, traffic, request).unwrap()
}

/// `CC-XYZ` subdivision geos, the country from `index`, the part from its higher digits.
fn subdivision(index: usize) -> String {
    const CODE: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let country = [b'A' + (index % 26) as u8, b'A' + (index / 26 % 26) as u8];
    let rest = index / 676;
    let part = [
        CODE[rest % 36],
        CODE[rest / 36 % 36],
        CODE[rest / 1296 % 36],
    ];
    format!(
        "{}-{}",
        std::str::from_utf8(&country).unwrap(),
        std::str::from_utf8(&part).unwrap()
    )
}

fn state(pick: &str) -> (Vec<u8>, Vec<u8>) {
    let mut snapshot = Snapshot::new(1, "/dw/routing/");
    snapshot.kvs.insert(
        "/dw/routing/policy/global".into(),
        format!(r#"{{"default":"US","failover":["GB"],"pick":"{pick}"}}"#),
    );
    let mut geos = Vec::with_capacity(REGIONS);
    for index in 0..676 {
        let country = [b'A' + (index % 26) as u8, b'A' + (index / 26) as u8];
        geos.push(String::from_utf8(country.to_vec()).unwrap());
    }
    let mut index = 0;
    while geos.len() < REGIONS {
        geos.push(subdivision(index));
        index += 1;
    }
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move |bound: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % bound
    };
    for (index, geo) in geos.iter().enumerate() {
        let count = 2 + next(3) as usize;
        let mut origins: Vec<String> = Vec::new();
        if next(10) == 0 {
            origins.push("fra-a".into());
        }
        while origins.len() < count {
            let origin = format!("o-{:03}", next(200));
            if !origins.contains(&origin) {
                origins.push(origin);
            }
        }
        let weight: Vec<String> = origins
            .iter()
            .map(|origin| format!(r#"\"{origin}\":{}"#, 1 + next(100)))
            .collect();
        let quoted: Vec<String> = origins.iter().map(|o| format!(r#"\"{o}\""#)).collect();
        let value = format!(
            r#"{{"shard":"s-{}","origins":[{}],"weight":{{{}}}}}"#,
            index % 50,
            quoted.join(","),
            weight.join(",")
        )
        .replace('\\', "");
        snapshot
            .kvs
            .insert(format!("/dw/routing/region/{geo}"), value);
    }
    let mut traffic = Vec::with_capacity(GEOS);
    for geo in geos.iter().take(GEOS) {
        traffic.push(format!(
            r#""{geo}":{{"plain":{},"sticky":{}}}"#,
            1 + next(100),
            1 + next(100)
        ));
    }
    let traffic = format!(r#"{{"format":1,"geos":{{{}}}}}"#, traffic.join(","));
    (
        SnapshotWriter::new().to_json(&snapshot),
        traffic.into_bytes(),
    )
}

fn time<T>(name: &str, mut work: impl FnMut() -> T) -> T {
    let runs = runs();
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let value = work();
        times.push(start.elapsed().as_secs_f64() * 1000.0);
        last = Some(value);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "capacity-bench\t{name}\t{:.2}\t{:.2}\t{runs}",
        times[runs / 2],
        times[0]
    );
    last.expect("RUNS > 0")
}

fn main() {
    // DW_CAPACITY_BENCH_PICKS: the picks to run (default both); DW_CAPACITY_BENCH_SHED=0
    // leaves the shed search out (for callgrind).
    let picks =
        std::env::var("DW_CAPACITY_BENCH_PICKS").unwrap_or_else(|_| "legacy,rendezvous".into());
    let with_shed = std::env::var("DW_CAPACITY_BENCH_SHED").as_deref() != Ok("0");
    for pick in picks.split(',') {
        let (snapshot, traffic_file) = state(pick);
        let table = time(&format!("{pick}: read the state (Table::parse)"), || {
            measured_read_state(&snapshot)
        });
        let traffic = time(
            &format!("{pick}: read the traffic (Traffic::parse)"),
            || Traffic::parse(&traffic_file).unwrap(),
        );
        let before = time(&format!("{pick}: predict the load"), || {
            predict(&table, &traffic)
        });
        let request = ShedRequest {
            origin: "fra-a".into(),
            percent: 100.0,
            regions: vec![],
        };
        let drain = time(
            &format!("{pick}: plan the drain (before, after, every move)"),
            || measured_drain_plan(&table, &traffic, &request),
        );
        let capacities = before
            .origins
            .iter()
            .map(|(origin, load)| (origin.clone(), load * 1.3))
            .collect();
        time(&format!("{pick}: guard and largest fitting shed"), || {
            let report = guard(&drain.after, &capacities, DEFAULT_HEADROOM).unwrap();
            let fit = largest_fitting_shed(&drain.before, &drain.after, "fra-a", &capacities, 0.8)
                .unwrap();
            (report, fit)
        });
        time(&format!("{pick}: compare alone"), || {
            compare(&drain.before, &drain.after)
        });
        let shed_request = ShedRequest {
            percent: 30.0,
            ..request
        };
        if !with_shed {
            continue;
        }
        let plan = time(&format!("{pick}: shed 30 % (search)"), || {
            shed(&table, &traffic, &shed_request).unwrap()
        });
        println!(
            "capacity-facts\t{pick}\t{} regions\t{} geos\t{:.0} answers/s\tfra-a in {} regions, {} drained, {} moves\tshed 30 % achieved {:.1} % with {} edits\t{} snapshot bytes",
            table.region_count(),
            traffic.geos().len(),
            traffic.total(),
            drain.edits.len() + drain.blocked.len(),
            drain.edits.len(),
            drain.comparison.moves.len(),
            plan.achieved_percent,
            plan.edits.len(),
            snapshot.len()
        );
    }
}
