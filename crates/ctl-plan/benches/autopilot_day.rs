//! The simulated day of issue 42 (`bench/62-autopilot.sh`, `make bench` only): the
//! routing core's prediction as the plant, 2,000 regions, 200 origins, 4,000 geos, 1 s
//! steps over 24 h, with a diurnal curve, a 5× flash crowd on one geo for 10 minutes and a
//! `health` drain of one origin for an hour in the middle. Three operators run on the same
//! day: nobody, a person who runs the planner's shed 3 minutes after the alert, and the
//! autopilot's control law (`dw_ctl_plan::autopilot`) with its defaults.
//!
//! The plant: every geo's rate is `base × diurnal(t)` (× 5 for the flash geo during the
//! flash), so each origin's load under a table is `diurnal(t) × L(table) + flash part`, with
//! `L` the routing core's prediction ([`dw_capacity::predict`]) of the base rates, computed
//! again whenever the table changes. What the operators see is what the stack shows: rates
//! over a window of the last `WINDOW` seconds of scrapes taken every second, `SCRAPE_LAG`
//! seconds late; the autopilot evaluates every `EVALUATION` seconds; a change reaches the
//! nodes `PROPAGATION` seconds after it is committed. Prints `autopilot-day` TSV lines.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Instant;

use dw_capacity::{
    GeoRate, RegionEdit, ShedRequest, Traffic, Unplaced, drained, largest_shed_within_guard,
    predict,
};
use dw_ctl_plan::autopilot::Settings;
use dw_ctl_plan::autopilot::law::{ActionKind, Memory, Reading, RecordOf, World, assess, plan};
use dw_ctl_plan::autopilot::trend::TREND_SPAN;
use dw_routing::{Table, builtin_table};

const DAY: u64 = 86_400;
const REGIONS: usize = 2_000;
const ORIGINS: usize = 200;
const GEOS: usize = 4_000;
const HEADROOM: f64 = 0.8;
/// Prometheus' rate window over 1 s scrapes, seconds.
const WINDOW: u64 = 5;
/// The newest scrape the evaluation sees is this old.
const SCRAPE_LAG: u64 = 1;
const EVALUATION: u64 = 2;
/// Commit, the agent's publication and the workers' reload.
const PROPAGATION: u64 = 2;
const FLASH_START: u64 = 68_400;
const FLASH_SECONDS: u64 = 600;
const FLASH_FACTOR: f64 = 5.0;
const DRAIN_START: u64 = 43_200;
const DRAIN_SECONDS: u64 = 3_600;
/// The alert's `for`, then the person's delay.
const ALERT_FOR: u64 = 60;
/// After a step (the flash crowd, the drain), the seconds no operator can act within: the
/// scrape lag, a window, an evaluation and the propagation of its first change.
const REACTION_FLOOR: u64 = SCRAPE_LAG + WINDOW + EVALUATION + PROPAGATION;
const PERSON_DELAY: u64 = 180;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn diurnal(t: u64) -> f64 {
    let phase = t as f64 / DAY as f64;
    0.6 + 0.4 * (2.0 * std::f64::consts::PI * (phase - 0.25)).sin()
}

/// The fleet: regions (geo → value JSON), geos with base rates, capacities.
struct Fleet {
    values: BTreeMap<String, String>,
    base: BTreeMap<String, GeoRate>,
    capacities: BTreeMap<String, f64>,
    flash_geo: String,
    drained_origin: String,
}

fn origin_name(index: usize) -> String {
    format!("o{index:03}")
}

fn value_json(shard: &str, origins: &[(String, u32)]) -> String {
    RegionEdit {
        geo: String::new(),
        shard: shard.to_owned(),
        origins: origins.iter().map(|(name, _)| name.clone()).collect(),
        weight: origins.to_vec(),
    }
    .to_json()
}

fn build_fleet() -> Fleet {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let countries: Vec<(String, usize)> = builtin_table()
        .map(|(code, continent)| (code.to_owned(), continent.index()))
        .collect();
    let continents = ["AF", "AN", "AS", "EU", "NA", "OC", "SA"];
    let pool = |continent: usize| -> Vec<usize> {
        (0..ORIGINS)
            .filter(|index| index % 7 == continent)
            .collect()
    };
    let region_for = |rng: &mut Rng, continent: usize| -> String {
        let pool = pool(continent);
        let count = 2 + rng.below(2);
        let mut chosen: Vec<(String, u32)> = Vec::new();
        while chosen.len() < count {
            let name = origin_name(pool[rng.below(pool.len())]);
            if !chosen.iter().any(|(existing, _)| *existing == name) {
                chosen.push((name, 1 + rng.below(100) as u32));
            }
        }
        value_json(&continents[continent].to_lowercase(), &chosen)
    };
    let mut values = BTreeMap::new();
    for (continent, code) in continents.iter().enumerate() {
        values.insert(format!("continent/{code}"), region_for(&mut rng, continent));
    }
    // Three in four countries have a key; subdivisions fill the rest of the regions.
    let mut geos: Vec<(String, usize)> = Vec::new();
    for (code, continent) in &countries {
        geos.push((code.clone(), *continent));
        if rng.below(4) != 0 {
            values.insert(code.clone(), region_for(&mut rng, *continent));
        }
    }
    let mut serial = 0usize;
    while geos.len() < GEOS {
        let (code, continent) = countries[rng.below(countries.len())].clone();
        serial += 1;
        let geo = format!("{code}-{}", serial % 1000);
        if geos.iter().any(|(existing, _)| *existing == geo) {
            continue;
        }
        if values.len() < REGIONS {
            values.insert(geo.clone(), region_for(&mut rng, continent));
        }
        geos.push((geo, continent));
    }
    // Rates: heavy-tailed, 70 % sticky; about 200,000 answers/s at the peak.
    let mut base = BTreeMap::new();
    let mut total = 0.0;
    for (geo, _) in &geos {
        let weight = 1.0 / (0.02 + rng.unit()).powf(1.5);
        total += weight;
        base.insert(geo.clone(), weight);
    }
    let base: BTreeMap<String, GeoRate> = base
        .into_iter()
        .map(|(geo, weight)| {
            let rate = 200_000.0 * weight / total;
            (
                geo,
                GeoRate {
                    plain: 0.3 * rate,
                    sticky: 0.7 * rate,
                    // The day runs without visitor buckets (policy/global has none).
                    bucket: 0.0,
                },
            )
        })
        .collect();
    let table = table_of(&values);
    let peak = predict(&table, &traffic_of(&base, 1.0, None));
    // Capacities: at the day's peak most origins sit at 55-95 % of target; one in twenty
    // is at 102-110 % (the diurnal curve alone overloads it).
    let mut capacities = BTreeMap::new();
    for index in 0..ORIGINS {
        let name = origin_name(index);
        let load = peak.of(&name).max(1.0);
        let at = if rng.below(20) == 0 {
            1.02 + 0.08 * rng.unit()
        } else {
            0.55 + 0.4 * rng.unit()
        };
        capacities.insert(name, load / (HEADROOM * at));
    }
    // The flash geo: the busiest country with a key of its own; the drained origin: the
    // busiest origin of Europe that is not over target at the peak.
    let flash_geo = base
        .iter()
        .filter(|(geo, _)| geo.len() == 2 && values.contains_key(*geo))
        .max_by(|a, b| a.1.total().total_cmp(&b.1.total()))
        .map(|(geo, _)| geo.clone())
        .expect("a country with a key");
    let drained_origin = (0..ORIGINS)
        .filter(|index| index % 7 == 3)
        .map(origin_name)
        .filter(|name| peak.of(name) < HEADROOM * capacities[name])
        .max_by(|a, b| peak.of(a).total_cmp(&peak.of(b)))
        .expect("an origin in Europe");
    Fleet {
        values,
        base,
        capacities,
        flash_geo,
        drained_origin,
    }
}

fn table_of(values: &BTreeMap<String, String>) -> Table {
    let kvs: Vec<String> = values
        .iter()
        .map(|(geo, value)| {
            format!(
                "{}:{}",
                serde_json::to_string(&format!("/dw/routing/region/{geo}")).unwrap(),
                serde_json::to_string(value).unwrap()
            )
        })
        .collect();
    let text = format!(
        r#"{{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{{{}}}}}"#,
        kvs.join(",")
    );
    Table::parse(text.as_bytes()).expect("the simulated table parses")
}

fn traffic_of(
    base: &BTreeMap<String, GeoRate>,
    factor: f64,
    flash: Option<(&str, f64)>,
) -> Traffic {
    Traffic::from_geos(
        base.iter().map(|(geo, rate)| {
            let mut scale = factor;
            if let Some((flash_geo, multiplier)) = flash
                && flash_geo == geo
            {
                scale *= multiplier;
            }
            (
                geo.clone(),
                GeoRate {
                    plain: rate.plain * scale,
                    sticky: rate.sticky * scale,
                    bucket: rate.bucket * scale,
                },
            )
        }),
        Unplaced::default(),
    )
    .expect("simulated traffic")
}

/// A table's loads: the base rates' and the flash geo's alone (unit multiplier).
struct Loads {
    base: BTreeMap<String, f64>,
    flash: BTreeMap<String, f64>,
}

impl Loads {
    fn of(table: &Table, fleet: &Fleet) -> Loads {
        let base = predict(table, &traffic_of(&fleet.base, 1.0, None)).origins;
        let only_flash: BTreeMap<String, GeoRate> = fleet
            .base
            .iter()
            .filter(|(geo, _)| **geo == fleet.flash_geo)
            .map(|(geo, rate)| (geo.clone(), *rate))
            .collect();
        let flash = predict(table, &traffic_of(&only_flash, 1.0, None)).origins;
        Loads { base, flash }
    }

    /// Each origin's load at diurnal `factor` with the flash multiplier `flash`.
    fn at(&self, factor: f64, flash: f64) -> BTreeMap<String, f64> {
        self.base
            .iter()
            .map(|(name, load)| {
                let extra = self.flash.get(name).copied().unwrap_or(0.0) * (flash - 1.0);
                (name.clone(), factor * (load + extra))
            })
            .collect()
    }
}

fn flash_at(t: u64) -> f64 {
    if (FLASH_START..FLASH_START + FLASH_SECONDS).contains(&t) {
        FLASH_FACTOR
    } else {
        1.0
    }
}

/// The window's average diurnal factor and flash multiplier, as the loop sees them at `t`.
fn seen(t: u64) -> (f64, f64) {
    let end = t.saturating_sub(SCRAPE_LAG);
    let start = end.saturating_sub(WINDOW - 1);
    let n = (end - start + 1) as f64;
    let factor: f64 = (start..=end).map(diurnal).sum::<f64>() / n;
    let flash: f64 = (start..=end).map(|s| diurnal(s) * flash_at(s)).sum::<f64>() / n / factor;
    (factor, flash)
}

#[derive(Clone, Copy, PartialEq)]
enum Operator {
    Nobody,
    Person,
    Autopilot,
}

impl Operator {
    fn name(self) -> &'static str {
        match self {
            Operator::Nobody => "no action",
            Operator::Person => "a person, 3 min after the alert",
            Operator::Autopilot => "autopilot (defaults)",
        }
    }
}

#[derive(Default)]
struct Outcome {
    overload_seconds: f64,
    capacity_seconds: f64,
    /// Of `capacity_seconds`, those within [`REACTION_FLOOR`] of a step.
    capacity_floor_seconds: f64,
    /// The band-inclusive minimum: each episode's peak above `target × (1 − band)`.
    episodes_min_band: f64,
    moved_off: f64,
    moved_back: f64,
    actions: u32,
    direction_changes: u32,
    most_changes: u32,
    episodes_min: f64,
    plan_ms: Vec<f64>,
    at_end_records: usize,
    holds: BTreeMap<&'static str, u32>,
    /// Each origin's actions: when, and whether it gave back.
    directions: BTreeMap<String, Vec<(u64, bool)>>,
}

impl Outcome {
    /// The most direction changes of one origin within any `period` seconds.
    fn most_changes_within(&self, period: u64) -> usize {
        let mut most = 0;
        for actions in self.directions.values() {
            let changes: Vec<u64> = actions
                .windows(2)
                .filter(|pair| pair[0].1 != pair[1].1)
                .map(|pair| pair[1].0)
                .collect();
            for (index, at) in changes.iter().enumerate() {
                let within = changes[index..]
                    .iter()
                    .take_while(|later| **later < at + period)
                    .count();
                most = most.max(within);
            }
        }
        most
    }
}

fn run(fleet: &Fleet, operator: Operator) -> Outcome {
    // DW_DAY_TRACE=1 prints every action and each episode's peak (stderr).
    let trace = std::env::var_os("DW_DAY_TRACE").is_some();
    if trace {
        eprintln!("run\t{}", operator.name());
    }
    let mut settings = Settings::default();
    // DW_DAY_TREND=SECONDS sets the trend horizon (0: off), to measure what it does.
    if let Some(horizon) = std::env::var("DW_DAY_TREND")
        .ok()
        .and_then(|text| text.parse().ok())
    {
        settings.trend_horizon = horizon;
    }
    let mut memory = Memory::default();
    let mut values = fleet.values.clone();
    // The table the loop reads (etcd), and the one the nodes run (after propagation).
    let mut table = table_of(&values);
    let mut loads = Loads::of(&table, fleet);
    let mut plant_loads = Loads::of(&table, fleet);
    let mut pending: VecDeque<(u64, BTreeMap<String, String>)> = VecDeque::new();
    let mut records: BTreeMap<String, RecordOf> = BTreeMap::new();
    let (staged, homes) = (BTreeSet::new(), BTreeMap::new());
    let mut outcome = Outcome::default();
    let mut over_since: BTreeMap<String, u64> = BTreeMap::new();
    let mut person_done: BTreeSet<String> = BTreeSet::new();
    let mut drained_before: Vec<RegionEdit> = Vec::new();
    // No-action episodes: the peak above target per episode.
    let mut episode_peak: BTreeMap<String, f64> = BTreeMap::new();
    let mut band_peak: BTreeMap<String, f64> = BTreeMap::new();
    let band_goal = 1.0 - settings.band;

    let apply = |values: &mut BTreeMap<String, String>, edits: &[RegionEdit]| {
        for edit in edits {
            values.insert(edit.geo.clone(), edit.to_json());
        }
    };
    // DW_DAY_SPAN=FROM,TO runs only those seconds (while working on the law; the table's
    // figures are for the whole day).
    let (from, to) = std::env::var("DW_DAY_SPAN")
        .ok()
        .and_then(|span| {
            let (from, to) = span.split_once(',')?;
            Some((from.parse().ok()?, to.parse().ok()?))
        })
        .unwrap_or((0, DAY));
    for t in from..to {
        // The health drain and its restore, as the `health` daemon writes them.
        let mut changed = false;
        if t == DRAIN_START {
            let mut edits = Vec::new();
            for (geo, region) in table.regions() {
                if region.origins().contains(&fleet.drained_origin)
                    && let Some(edit) = drained(geo, region, &fleet.drained_origin)
                {
                    drained_before.push(RegionEdit::of_region(geo, region));
                    edits.push(edit);
                }
            }
            apply(&mut values, &edits);
            records.insert(
                fleet.drained_origin.clone(),
                RecordOf::Other("health".into()),
            );
            changed = true;
        }
        if t == DRAIN_START + DRAIN_SECONDS {
            let before = std::mem::take(&mut drained_before);
            apply(&mut values, &before);
            records.remove(&fleet.drained_origin);
            changed = true;
        }
        // The operator.
        if t % EVALUATION == 0 && operator != Operator::Nobody {
            let (factor, flash) = seen(t);
            let measured = loads.at(factor, flash);
            let world = World {
                now: t,
                capacities: &fleet.capacities,
                headroom: HEADROOM,
                records: &records,
                staged: &staged,
                homes: &homes,
            };
            match operator {
                Operator::Autopilot => {
                    let assessment = assess(&settings, &mut memory, &world, Ok(&measured));
                    if !assessment.due.is_empty() {
                        let started = Instant::now();
                        // The readings of the last evaluations, for the trend: the daemon
                        // keeps each one; here they are built only when a plan is due.
                        for back in (1..=TREND_SPAN / EVALUATION).rev() {
                            let at = t.saturating_sub(back * EVALUATION);
                            if at < t {
                                let (factor, flash) = seen(at);
                                memory.readings.observe(
                                    at,
                                    &traffic_of(
                                        &fleet.base,
                                        factor,
                                        Some((&fleet.flash_geo, flash)),
                                    ),
                                );
                            }
                        }
                        let traffic =
                            traffic_of(&fleet.base, factor, Some((&fleet.flash_geo, flash)));
                        let predicted = predict(&table, &traffic);
                        let reading = Reading {
                            table: &table,
                            traffic: &traffic,
                            loads: &predicted,
                        };
                        let decision = plan(&settings, &mut memory, &world, assessment, &reading)
                            .expect("the law plans");
                        outcome.plan_ms.push(started.elapsed().as_secs_f64() * 1e3);
                        for hold in &decision.holds {
                            *outcome.holds.entry(hold.reason.label()).or_default() += 1;
                        }
                        if decision.action.is_none() {
                            *outcome.holds.entry("plan without action").or_default() += 1;
                        }
                        if let Some(action) = decision.action {
                            outcome.actions += 1;
                            if trace {
                                eprintln!(
                                    "action\t{t}\t{}\t{:?}\t{:.1}\t{:.1}\t{:.1}\t{:.1}",
                                    action.origin,
                                    action.kind,
                                    action.figures.measured,
                                    action.figures.target,
                                    action.figures.capacity,
                                    action.moved
                                );
                            }
                            let up = matches!(
                                action.kind,
                                ActionKind::GiveBackStep | ActionKind::GiveBackAll
                            );
                            outcome
                                .directions
                                .entry(action.origin.clone())
                                .or_default()
                                .push((t, up));
                            match action.kind {
                                ActionKind::Relieve | ActionKind::RelieveAtCeiling => {
                                    outcome.moved_off += action.moved;
                                    let mut own = match records.remove(&action.origin) {
                                        Some(RecordOf::Own(before)) => before,
                                        _ => Vec::new(),
                                    };
                                    for edit in &action.edits {
                                        if !own.iter().any(|kept| kept.geo == edit.geo)
                                            && let Some((geo, region)) =
                                                table.regions().find(|(geo, _)| *geo == edit.geo)
                                        {
                                            own.push(RegionEdit::of_region(geo, region));
                                        }
                                    }
                                    records.insert(action.origin.clone(), RecordOf::Own(own));
                                }
                                ActionKind::GiveBackStep => outcome.moved_back += action.moved,
                                ActionKind::GiveBackAll => {
                                    outcome.moved_back += action.moved;
                                    records.remove(&action.origin);
                                }
                            }
                            apply(&mut values, &action.edits);
                            changed = true;
                        }
                    }
                }
                Operator::Person => {
                    for (name, load) in &measured {
                        let target = HEADROOM * fleet.capacities[name];
                        if *load > target {
                            let since = *over_since.entry(name.clone()).or_insert(t);
                            if t >= since + ALERT_FOR + PERSON_DELAY
                                && !person_done.contains(name)
                                && !records.contains_key(name)
                            {
                                person_done.insert(name.clone());
                                let started = Instant::now();
                                let traffic = traffic_of(
                                    &fleet.base,
                                    factor,
                                    Some((&fleet.flash_geo, flash)),
                                );
                                let percent = (100.0 * (load - target) / load).clamp(1.0, 100.0);
                                let plan = largest_shed_within_guard(
                                    &table,
                                    &traffic,
                                    &ShedRequest {
                                        origin: name.clone(),
                                        percent: percent.ceil(),
                                        regions: Vec::new(),
                                    },
                                    &fleet.capacities,
                                    HEADROOM,
                                )
                                .expect("the planner plans");
                                outcome.plan_ms.push(started.elapsed().as_secs_f64() * 1e3);
                                if let Some(plan) = plan {
                                    outcome.actions += 1;
                                    outcome.moved_off += plan.before.of(name) - plan.after.of(name);
                                    apply(&mut values, &plan.edits);
                                    changed = true;
                                    break;
                                }
                            }
                        } else {
                            over_since.remove(name);
                            person_done.remove(name);
                        }
                    }
                }
                Operator::Nobody => {}
            }
        }
        if changed {
            table = table_of(&values);
            loads = Loads::of(&table, fleet);
            pending.push_back((t + PROPAGATION, values.clone()));
        }
        while pending.front().is_some_and(|(at, _)| *at <= t) {
            let (_, reached) = pending.pop_front().expect("checked");
            plant_loads = Loads::of(&table_of(&reached), fleet);
        }
        // The plant.
        let now = plant_loads.at(diurnal(t), flash_at(t));
        for (name, load) in &now {
            let capacity = fleet.capacities[name];
            let target = HEADROOM * capacity;
            if *load > target {
                outcome.overload_seconds += 1.0;
                let peak = episode_peak.entry(name.clone()).or_insert(0.0);
                *peak = peak.max(load - target);
            } else if let Some(peak) = episode_peak.remove(name) {
                if trace {
                    eprintln!("episode\t{t}\t{name}\t{peak:.1}\t{target:.1}");
                }
                outcome.episodes_min += peak;
            }
            if *load > target * band_goal {
                let peak = band_peak.entry(name.clone()).or_insert(0.0);
                *peak = peak.max(load - target * band_goal);
            } else if let Some(peak) = band_peak.remove(name) {
                outcome.episodes_min_band += peak;
            }
            if *load > capacity {
                if [DRAIN_START, FLASH_START]
                    .iter()
                    .any(|step| (*step..step + REACTION_FLOOR).contains(&t))
                {
                    outcome.capacity_floor_seconds += 1.0;
                }
                if trace {
                    eprintln!("above-capacity\t{t}\t{name}\t{load:.1}\t{capacity:.1}");
                }
                outcome.capacity_seconds += 1.0;
            }
        }
    }
    outcome.episodes_min += episode_peak.values().sum::<f64>();
    outcome.episodes_min_band += band_peak.values().sum::<f64>();
    for origin in memory.origins.values() {
        outcome.direction_changes += origin.direction_changes;
        outcome.most_changes = outcome.most_changes.max(origin.direction_changes);
    }
    outcome.at_end_records = records
        .values()
        .filter(|record| matches!(record, RecordOf::Own(_)))
        .count();
    outcome
}

fn main() {
    let started = Instant::now();
    let fleet = build_fleet();
    let table = table_of(&fleet.values);
    println!(
        "autopilot-fleet\t{}\t{}\t{}\t{}\t{}",
        table.region_count(),
        fleet.capacities.len(),
        fleet.base.len(),
        fleet.flash_geo,
        fleet.drained_origin
    );
    let (mut minimum, mut minimum_band) = (0.0, 0.0);
    // DW_DAY_SKIP_PERSON=1 leaves the person's run out (while working on the law).
    let skip_person = std::env::var_os("DW_DAY_SKIP_PERSON").is_some();
    for operator in [Operator::Nobody, Operator::Person, Operator::Autopilot] {
        if skip_person && operator == Operator::Person {
            continue;
        }
        let run_started = Instant::now();
        let outcome = run(&fleet, operator);
        if operator == Operator::Nobody {
            minimum = outcome.episodes_min;
            minimum_band = outcome.episodes_min_band;
        }
        eprintln!(
            "{}: holds in evaluations that planned {:?}",
            operator.name(),
            outcome.holds
        );
        let mut plan_ms = outcome.plan_ms.clone();
        plan_ms.sort_by(f64::total_cmp);
        let median = plan_ms.get(plan_ms.len() / 2).copied().unwrap_or(0.0);
        let slowest = plan_ms.last().copied().unwrap_or(0.0);
        println!(
            "autopilot-day\t{}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{}\t{}\t{}\t{}\t{}\t{}\t{:.1}\t{:.1}\t{:.1}\t{:.0}\t{:.0}",
            operator.name(),
            outcome.overload_seconds,
            outcome.capacity_seconds,
            outcome.moved_off,
            outcome.moved_back,
            minimum,
            outcome.actions,
            outcome.direction_changes,
            outcome.most_changes,
            outcome.most_changes_within(Settings::default().restore_after),
            outcome.at_end_records,
            plan_ms.len(),
            median,
            slowest,
            run_started.elapsed().as_secs_f64(),
            outcome.capacity_floor_seconds,
            minimum_band
        );
    }
    eprintln!("simulated day: {:.1} s", started.elapsed().as_secs_f64());
}
