//! The predictor against an independent oracle: the userland twin (`php/RegionRouter.php`,
//! run by `twin_oracle.php`) resolves each geo and each sticky key one at a time, on random
//! tables (policies with both picks, defaults, failover, buckets, subdivisions, opaque
//! geos, unlisted and zero weights, invalid values) and random traffic.
//!
//! - Plain traffic: each origin's predicted load equals the twin's count exactly, and the
//!   predicted `no_route` equals the twin's fail-open count.
//! - Sticky traffic: the predicted split of each geo equals, under the legacy pick, the
//!   enumeration of every modulus point with the number of crc32 values that hit it
//!   (exactly), and under both picks the twin's counts over `KEYS` distinct keys lie within
//!   5 binomial standard deviations (+1) of the prediction. The keys are fixed, so the test
//!   is deterministic; with about 1,000 comparisons at 5 sigma, the odds that a correct
//!   predictor fails for some seed are about 1 in 2,000.
//! - Plans: a shed or drain of each table's busiest origin predicts, for plain traffic,
//!   exactly the twin's counts on the snapshot with the plan's values written in.
//!
//! Needs `php` (8.4, as in the devenv): inside the devenv (`DW_IN_DEVENV=1`) a missing
//! `php` fails the test; outside it the test says it skipped, on stderr.

use std::collections::BTreeMap;
use std::process::Command;

use dw_capacity::{GeoRate, ShedRequest, Traffic, Unplaced, predict, shed};
use dw_routing::buckets::{BucketCount, default_assignment};
use dw_routing::{PickMode, Snapshot, SnapshotWriter, Table};
use serde_json::{Value, json};

/// Distinct sticky keys per sticky geo.
const KEYS: u32 = 1_000;
/// Random tables.
const CASES: u64 = 40;

const ORIGINS: [&str; 6] = ["fra-a", "fra-b", "ams-a", "iad-a", "sfo-a", "nrt-a"];
const REGION_GEOS: [&str; 16] = [
    "DE",
    "FR",
    "GB",
    "US",
    "JP",
    "BR",
    "IT",
    "CA",
    "US-CA",
    "DE-BY",
    "GB-ENG",
    "pop-1",
    "pop-2",
    "continent/EU",
    "continent/NA",
    "continent/AS",
];
const TRAFFIC_GEOS: [&str; 26] = [
    "DE",
    "FR",
    "GB",
    "US",
    "JP",
    "BR",
    "IT",
    "CA",
    "ES",
    "NL",
    "MX",
    "CN",
    "AU",
    "XX",
    "T1",
    "US-CA",
    "US-NY",
    "DE-BY",
    "DE-HH",
    "GB-ENG",
    "pop-1",
    "pop-2",
    "pop-3",
    "",
    "continent/EU",
    "zz",
];
const DEFAULTS: [&str; 6] = ["US", "GB", "ZZ", "continent/EU", "pop-1", "JP"];

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
    fn chance(&mut self, one_in: u64) -> bool {
        self.below(one_in) == 0
    }
}

fn random_region(rng: &mut Rng, shard: usize) -> String {
    if rng.chance(12) {
        // Invalid: every listed weight 0. Both readers leave it out of the chain.
        return r#"{"shard":"bad","origins":["fra-a"],"weight":{"fra-a":0}}"#.into();
    }
    let count = 1 + rng.below(4) as usize;
    let mut origins: Vec<&str> = Vec::new();
    while origins.len() < count {
        let origin = ORIGINS[rng.below(ORIGINS.len() as u64) as usize];
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    let mut weight = serde_json::Map::new();
    for origin in &origins {
        if !rng.chance(6) {
            weight.insert(origin.to_string(), json!(rng.below(30)));
        }
    }
    if !origins
        .iter()
        .any(|o| weight.get(*o).and_then(Value::as_u64).unwrap_or(0) > 0)
    {
        weight.insert(origins[0].to_string(), json!(1 + rng.below(9)));
    }
    if rng.chance(4) {
        weight.insert("gone".into(), json!(rng.below(40)));
    }
    json!({"shard": format!("s{}", shard % 3), "origins": origins, "weight": weight}).to_string()
}

#[derive(Clone)]
struct Case {
    snapshot: Vec<u8>,
    plain: Vec<(String, u64)>,
    sticky: Vec<(String, u32)>,
    /// Geos answered once for each visitor bucket `0..n` (empty: none).
    bucket: Vec<(String, u16)>,
}

fn random_case(seed: u64) -> Case {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut snapshot = Snapshot::new(seed + 1, "/dw/routing/");
    let pick = if rng.chance(2) {
        "rendezvous"
    } else {
        "legacy"
    };
    let failover: Vec<&str> = (0..rng.below(3))
        .map(|_| DEFAULTS[rng.below(DEFAULTS.len() as u64) as usize])
        .collect();
    let policy = json!({
        "default": DEFAULTS[rng.below(DEFAULTS.len() as u64) as usize],
        "failover": failover,
        "pick": pick,
    });
    snapshot
        .kvs
        .insert("/dw/routing/policy/global".into(), policy.to_string());
    for (index, geo) in REGION_GEOS.iter().enumerate() {
        if rng.chance(3) {
            continue;
        }
        snapshot.kvs.insert(
            format!("/dw/routing/region/{geo}"),
            random_region(&mut rng, index),
        );
    }
    let mut plain = Vec::new();
    let mut sticky = Vec::new();
    for geo in TRAFFIC_GEOS {
        if rng.chance(4) {
            continue;
        }
        plain.push((geo.to_owned(), rng.below(50)));
        if rng.chance(5) {
            sticky.push((geo.to_owned(), KEYS));
        }
    }
    Case {
        snapshot: SnapshotWriter::new().to_json(&snapshot),
        plain,
        sticky,
        bucket: Vec::new(),
    }
}

/// [`random_case`] with visitor buckets: the policy's `buckets` N (one case in six off,
/// where a bucket answers as plain), some regions carrying a stored assignment (one off
/// their weights, reassigned by the readers, or one that does not decode, ignored), and
/// every plain geo answered once for each bucket.
fn bucketed_case(seed: u64) -> Case {
    let mut case = random_case(seed);
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
    let n: u16 = [0, 2, 3, 7, 16, 64, 1024][(seed % 7) as usize];
    let mut snapshot = Snapshot::parse(&case.snapshot).unwrap();
    let policy_key = "/dw/routing/policy/global".to_string();
    let mut policy: Value = serde_json::from_str(&snapshot.kvs[&policy_key]).unwrap();
    policy["buckets"] = json!(n);
    snapshot.kvs.insert(policy_key, policy.to_string());
    for value in snapshot.kvs.values_mut() {
        let Ok(mut region) = serde_json::from_str::<Value>(value) else {
            continue;
        };
        let Some(origins) = region["origins"].as_array().map(Vec::len) else {
            continue;
        };
        match rng.below(3) {
            0 if n >= 2 => {
                // The default blocks of other weights: decodes, counts off the weights.
                let weights: Vec<u32> = (0..origins).map(|_| 1 + rng.below(9) as u32).collect();
                let stored =
                    default_assignment(&weights, BucketCount::new(i64::from(n)).unwrap()).unwrap();
                region["buckets"] = json!(stored.encode());
            }
            1 => region["buckets"] = json!("9:1"),
            _ => continue,
        }
        *value = region.to_string();
    }
    case.snapshot = SnapshotWriter::new().to_json(&snapshot);
    case.bucket = case
        .plain
        .iter()
        .map(|(geo, _)| (geo.clone(), n.max(1)))
        .collect();
    case
}

/// Bucketed traffic: one answer for each bucket of each geo, predicted by the answering
/// region's assignment, equals the twin's answers bucket by bucket exactly (and with
/// buckets off, the plain answer for each).
#[test]
fn bucketed_predictions_match_the_userland_twin() {
    if !php_available() {
        return;
    }
    let temp = tempfile::Builder::new()
        .prefix("dw-capacity-buckets")
        .tempdir()
        .unwrap();
    let dir = temp.path();
    let (mut compared, mut on, mut plans) = (0, 0, 0);
    for seed in 0..CASES {
        let case = bucketed_case(seed);
        let table = Table::parse(&case.snapshot).unwrap();
        on += usize::from(table.buckets().is_some());
        let answers = twin(dir, seed, &case);
        let traffic = Traffic::from_geos(
            case.bucket.iter().map(|(geo, n)| {
                let rate = GeoRate {
                    plain: 0.0,
                    sticky: 0.0,
                    bucket: f64::from(*n),
                };
                (geo.clone(), rate)
            }),
            Unplaced::default(),
        )
        .unwrap();
        let load = predict(&table, &traffic);
        let counted = answers["bucket"].as_object().unwrap();
        for (origin, count) in counted {
            let count = count.as_f64().unwrap();
            let predicted = if origin == "__fail_open__" {
                load.no_route
            } else {
                load.of(origin)
            };
            // Each origin's buckets / N times N answers: exact up to float rounding.
            assert!(
                (predicted - count).abs() < 1e-6,
                "seed {seed}: origin {origin}: predicted {predicted}, the twin {count}"
            );
            compared += 1;
        }
        for (origin, predicted) in &load.origins {
            if *predicted > 1e-9 {
                assert!(counted.contains_key(origin), "seed {seed}: {origin}");
            }
        }
        // A shed of the busiest origin's bucketed load: the plan's predicted load is what
        // the twin answers, bucket by bucket, on the snapshot with the plan's values.
        let Some((origin, _)) = load
            .origins
            .iter()
            .filter(|(_, load)| **load > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1))
        else {
            continue;
        };
        let request = ShedRequest {
            origin: origin.clone(),
            percent: [100.0, 40.0, 70.0][(seed % 3) as usize],
            regions: vec![],
        };
        let plan = shed(&table, &traffic, &request).unwrap();
        let mut snapshot = Snapshot::parse(&case.snapshot).unwrap();
        for edit in &plan.edits {
            snapshot
                .kvs
                .insert(format!("/dw/routing/region/{}", edit.geo), edit.to_json());
        }
        let changed = Case {
            snapshot: SnapshotWriter::new().to_json(&snapshot),
            ..case.clone()
        };
        let answers = twin(dir, seed, &changed);
        for (origin, count) in answers["bucket"].as_object().unwrap() {
            let count = count.as_f64().unwrap();
            let predicted = if origin == "__fail_open__" {
                plan.after.no_route
            } else {
                plan.after.of(origin)
            };
            assert!(
                (predicted - count).abs() < 1e-6,
                "seed {seed}: after the shed, origin {origin}: predicted {predicted}, the twin \
                 {count}"
            );
        }
        plans += 1;
    }
    eprintln!(
        "twin_oracle: {CASES} bucketed tables ({on} with buckets on), {compared} origin loads \
         equal the twin's, {plans} shed plans too"
    );
    assert!(
        on > 20 && compared > 100 && plans > 20,
        "{on} {compared} {plans}"
    );
}

/// `php`, or `None` (said on stderr) outside the devenv when it is missing.
fn php_available() -> bool {
    match Command::new("php").arg("-v").output() {
        Ok(output) if output.status.success() => true,
        _ if std::env::var("DW_IN_DEVENV").as_deref() == Ok("1") => {
            panic!("php is missing inside the devenv: the twin oracle cannot run")
        }
        _ => {
            eprintln!("twin_oracle: SKIPPED, no php (run inside scripts/devenv)");
            false
        }
    }
}

fn twin(dir: &std::path::Path, seed: u64, case: &Case) -> Value {
    let snapshot = dir.join(format!("snapshot-{seed}.json"));
    std::fs::write(&snapshot, &case.snapshot).unwrap();
    let input = dir.join(format!("input-{seed}.json"));
    let sticky: Vec<Value> = case
        .sticky
        .iter()
        .map(|(geo, keys)| json!([geo, keys, format!("k{seed}-")]))
        .collect();
    let request = json!({
        "snapshot": snapshot,
        "plain": case.plain,
        "sticky": sticky,
        "bucket": case.bucket,
    });
    std::fs::write(&input, request.to_string()).unwrap();
    let driver = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/twin_oracle.php");
    let output = Command::new("php")
        .args(["-n", "-d", "memory_limit=256M", driver])
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "twin driver failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The legacy split by enumerating every point of the modulus with its number of hits.
fn enumerated_legacy_shares(table: &Table, geo: &str) -> Option<BTreeMap<String, f64>> {
    let route = table.resolve(geo.as_bytes(), Some(b"any"))?;
    let region = table.region_at(route.region_index)?;
    let sum: u64 = region
        .weights()
        .map(|(_, w)| u64::from(w))
        .sum::<u64>()
        .max(1);
    let points = 1u64 << 32;
    let mut hits: BTreeMap<String, u64> = BTreeMap::new();
    for point in 0..sum {
        let count = points / sum + u64::from(point < points % sum);
        let mut rest = point as i64;
        let mut answer = &region.origins()[0];
        for origin in region.origins() {
            rest -= i64::from(region.weight(origin));
            if rest < 0 {
                answer = origin;
                break;
            }
        }
        *hits.entry(answer.clone()).or_default() += count;
    }
    Some(
        hits.into_iter()
            .map(|(origin, count)| (origin, count as f64 / points as f64))
            .collect(),
    )
}

/// The case's plain traffic, as a prediction takes it.
fn plain_traffic(case: &Case) -> Traffic {
    Traffic::from_geos(
        case.plain.iter().map(|(geo, count)| {
            let rate = GeoRate {
                plain: *count as f64,
                sticky: 0.0,
                bucket: 0.0,
            };
            (geo.clone(), rate)
        }),
        Unplaced::default(),
    )
    .unwrap()
}

/// Asserts that each origin's predicted plain load equals the twin's count, fail-open
/// included, and that no origin is predicted load the twin never gave; returns the number
/// of origins compared.
fn same_plain_loads(seed: u64, load: &dw_capacity::Load, answers: &Value) -> usize {
    let counted = answers["plain"].as_object().unwrap();
    for (origin, count) in counted {
        let count = count.as_f64().unwrap();
        let predicted = if origin == "__fail_open__" {
            load.no_route
        } else {
            load.of(origin)
        };
        assert_eq!(predicted, count, "seed {seed}: origin {origin}");
    }
    for (origin, predicted) in &load.origins {
        if *predicted > 0.0 {
            assert!(counted.contains_key(origin), "seed {seed}: {origin}");
        }
    }
    counted.len()
}

/// A plan's predicted load is what the twin does with the plan's values: for each random
/// table, shed (or drain) the busiest origin and resolve every geo again on the snapshot
/// with the plan's values written in.
#[test]
fn shed_plans_match_the_userland_twin() {
    if !php_available() {
        return;
    }
    let temp = tempfile::Builder::new()
        .prefix("dw-capacity-plans")
        .tempdir()
        .unwrap();
    let dir = temp.path();
    let (mut plans, mut compared) = (0, 0);
    for seed in 0..CASES {
        let case = random_case(seed);
        let table = Table::parse(&case.snapshot).unwrap();
        let traffic = plain_traffic(&case);
        let before = predict(&table, &traffic);
        let Some((origin, _)) = before
            .origins
            .iter()
            .filter(|(_, load)| **load > 0.0)
            .max_by(|a, b| a.1.total_cmp(b.1))
        else {
            continue;
        };
        let percent = [100.0, 40.0, 70.0][(seed % 3) as usize];
        let request = ShedRequest {
            origin: origin.clone(),
            percent,
            regions: vec![],
        };
        let plan = shed(&table, &traffic, &request).unwrap();
        let mut snapshot = Snapshot::parse(&case.snapshot).unwrap();
        for edit in &plan.edits {
            snapshot
                .kvs
                .insert(format!("/dw/routing/region/{}", edit.geo), edit.to_json());
        }
        let changed = Case {
            snapshot: SnapshotWriter::new().to_json(&snapshot),
            ..case.clone()
        };
        let answers = twin(dir, seed, &changed);
        compared += same_plain_loads(seed, &plan.after, &answers);
        plans += 1;
    }
    eprintln!("twin_oracle: {plans} shed plans, {compared} origin loads after equal the twin's");
    assert!(plans > 20);
}

#[test]
fn predictions_match_the_userland_twin() {
    if !php_available() {
        return;
    }
    let temp = tempfile::Builder::new()
        .prefix("dw-capacity-twin")
        .tempdir()
        .unwrap();
    let dir = temp.path();
    let (mut plain_checks, mut sticky_checks, mut enumerations, mut modes) = (0, 0, 0, [0, 0]);
    for seed in 0..CASES {
        let case = random_case(seed);
        let table = Table::parse(&case.snapshot).unwrap();
        let answers = twin(dir, seed, &case);
        modes[usize::from(table.policy().pick == PickMode::Rendezvous)] += 1;

        // Plain: exact.
        let plain = plain_traffic(&case);
        let load = predict(&table, &plain);
        plain_checks += same_plain_loads(seed, &load, &answers);

        // Sticky: the split of each geo.
        let sticky = Traffic::from_geos(
            case.sticky.iter().map(|(geo, _)| {
                let rate = GeoRate {
                    plain: 0.0,
                    sticky: 1.0,
                    bucket: 0.0,
                };
                (geo.clone(), rate)
            }),
            Unplaced::default(),
        )
        .unwrap();
        let load = predict(&table, &sticky);
        for (geo, keys) in &case.sticky {
            let counts = answers["sticky"][geo.as_str()].as_object().unwrap();
            let split = &load.geos[geo.as_str()];
            if split.no_route > 0.0 {
                assert_eq!(counts.len(), 1, "seed {seed}: {geo:?} fails open");
                assert_eq!(counts["__fail_open__"].as_u64(), Some(u64::from(*keys)));
                continue;
            }
            if table.policy().pick == PickMode::Legacy {
                let enumerated = enumerated_legacy_shares(&table, geo).unwrap();
                for (origin, share) in &enumerated {
                    let predicted = split.sticky.get(origin).copied().unwrap_or(0.0);
                    assert!(
                        (predicted - share).abs() < 1e-12,
                        "seed {seed}: {geo:?} {origin}: {predicted} vs {share}"
                    );
                }
                enumerations += 1;
            }
            let n = f64::from(*keys);
            let names: std::collections::BTreeSet<&String> =
                split.sticky.keys().chain(counts.keys()).collect();
            for origin in names {
                let share = split.sticky.get(origin).copied().unwrap_or(0.0);
                let count = counts.get(origin).and_then(Value::as_f64).unwrap_or(0.0);
                let sigma = (n * share * (1.0 - share)).sqrt();
                assert!(
                    (count - n * share).abs() <= 5.0 * sigma + 1.0,
                    "seed {seed}: {geo:?} {origin}: the twin picked it {count} times of {n}, \
                     predicted {:.1} ± {:.1}",
                    n * share,
                    5.0 * sigma + 1.0
                );
                if share == 0.0 {
                    assert_eq!(count, 0.0, "seed {seed}: {geo:?} {origin} has no share");
                }
                sticky_checks += 1;
            }
        }
    }
    eprintln!(
        "twin_oracle: {CASES} tables ({} legacy, {} rendezvous), {plain_checks} plain origin \
         counts equal, {sticky_checks} sticky splits within bounds, {enumerations} legacy \
         enumerations equal",
        modes[0], modes[1]
    );
    assert!(modes[0] > 5 && modes[1] > 5 && enumerations > 20 && sticky_checks > 100);
}
