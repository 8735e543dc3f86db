//! `traffic [--window 5m] [--origin ID] [--geo G] [--by-node]`: where the answers go, per
//! origin, from the counters every node serves (`dw_router_answers_total`, read through
//! Prometheus' HTTP API, [`crate::prometheus`]), beside what etcd says of each origin
//! (its regions and weights, registered, drained, staged). One place to answer "why
//! does this origin get no traffic?".
//!
//! The I/O ([`run`]) asks Prometheus first (its failures exit 1 before etcd is dialled),
//! then reads etcd at one revision; [`report`] is a pure function of both readings, and
//! [`describe`] turns its JSON into text, every value from Prometheus or etcd escaped.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cli::TrafficArgs;
use crate::context::Context;
use crate::daemons::origin::OriginListing;
use crate::error::Error;
use crate::ops::commit::State;
use crate::ops::prometheus::{Prometheus, Sample, promql_string};
use crate::output::{Outcome, Shown};
use crate::plan::answer_shares::{PlainRoute, hashed_elsewhere, plain_routes};
use crate::plan::capacity::{DEFAULT_HEADROOM, number_json, percent, used_share};
use crate::plan::stage::{cohort_text, open_stages};
use crate::plan::value::RegionValue;

/// The counter of answers every node's dw-agent serves.
pub const ANSWERS: &str = "dw_router_answers_total";
/// Answers whose label set did not fit the node's bounds.
pub const OVERFLOW: &str = "dw_router_answers_overflow_total";
/// The most regions the text output names per origin (JSON names them all).
pub const SHOWN_REGIONS: usize = 8;

/// Runs `dwctl traffic`.
pub async fn run(context: &Context, args: TrafficArgs) -> Result<Outcome, Error> {
    let prometheus = Prometheus::new(&args.prometheus.options()?)?;
    let readings = read_prometheus(&prometheus, &args).await?;
    let mut client = context.etcd.connect().await?;
    let state = crate::ops::commit::read_state(&mut client, &context.layout).await?;
    let listing = crate::daemons::origin::list_origins(&mut client, &context.layout).await?;
    let mut json = report(&readings, &state, &listing, &args.origins);
    json["prometheus"] = json!(prometheus.url());
    json["window"] = json!(args.window.to_string());
    json["geo"] = json!(args.geo);
    let text = describe(&json);
    Ok(Outcome { text, json })
}

/// What Prometheus said, each as an instant vector of rates (answers per second).
#[derive(Debug, Default, Clone)]
pub struct Readings {
    /// All answers (of `--geo`'s, with `--geo`): one sample, none when no series.
    pub total: Vec<Sample>,
    /// Answers past the nodes' label bounds.
    pub overflow: Vec<Sample>,
    /// By `origin`.
    pub origins: Vec<Sample>,
    /// Top geos by `origin, geo`.
    pub geos: Vec<Sample>,
    /// Top keys by `origin, key`.
    pub keys: Vec<Sample>,
    /// By `origin, step`.
    pub steps: Vec<Sample>,
    /// Top nodes by `origin, node` (with `--by-node`).
    pub nodes: Vec<Sample>,
    /// By `key`, whichever origin answered (for the "why no traffic" line).
    pub regions: Vec<Sample>,
}

/// The PromQL `dwctl traffic` sends, in [`Readings`] order (`nodes` only with
/// `--by-node`).
pub fn queries(args: &TrafficArgs) -> Vec<(&'static str, String)> {
    let selector = match &args.geo {
        Some(geo) => format!("{{geo={}}}", promql_string(geo)),
        None => String::new(),
    };
    let window = format!("{}s", args.window.0);
    let rate = format!("rate({ANSWERS}{selector}[{window}])");
    let top = args.top;
    let mut queries = vec![
        ("total", format!("sum({rate})")),
        ("overflow", format!("sum(rate({OVERFLOW}[{window}]))")),
        ("origins", format!("sum by (origin) ({rate})")),
        (
            "geos",
            format!("topk by (origin) ({top}, sum by (origin, geo) ({rate}))"),
        ),
        (
            "keys",
            format!("topk by (origin) ({top}, sum by (origin, key) ({rate}))"),
        ),
        ("steps", format!("sum by (origin, step) ({rate})")),
        ("regions", format!("sum by (key) ({rate})")),
    ];
    if args.by_node {
        queries.push((
            "nodes",
            format!("topk by (origin) ({top}, sum by (origin, node) ({rate}))"),
        ));
    }
    queries
}

async fn read_prometheus(prometheus: &Prometheus, args: &TrafficArgs) -> Result<Readings, Error> {
    let mut readings = Readings::default();
    for (name, promql) in queries(args) {
        let samples = prometheus.query(&promql).await?;
        let slot = match name {
            "total" => &mut readings.total,
            "overflow" => &mut readings.overflow,
            "origins" => &mut readings.origins,
            "geos" => &mut readings.geos,
            "keys" => &mut readings.keys,
            "steps" => &mut readings.steps,
            "regions" => &mut readings.regions,
            _ => &mut readings.nodes,
        };
        *slot = samples;
    }
    Ok(readings)
}

/// How many samples of `readings` are not a rate: NaN, infinite or below 0. They are
/// shown as 0 ([`finite`]) and counted here, never silently.
fn not_numbers(readings: &Readings) -> usize {
    [
        &readings.total,
        &readings.overflow,
        &readings.origins,
        &readings.geos,
        &readings.keys,
        &readings.steps,
        &readings.nodes,
        &readings.regions,
    ]
    .iter()
    .flat_map(|samples| samples.iter())
    .filter(|sample| !(sample.value.is_finite() && sample.value >= 0.0))
    .count()
}

/// A rate as shown: a finite number >= 0, else 0 (counted by [`not_numbers`]).
fn finite(value: f64) -> f64 {
    if value.is_finite() && value >= 0.0 {
        value
    } else {
        0.0
    }
}

/// `(label value, rate)` of the samples of `origin`, largest first.
fn ranked(samples: &[Sample], origin: &str, label: &str) -> Vec<(String, f64)> {
    let mut rows: Vec<(String, f64)> = samples
        .iter()
        .filter(|sample| sample.label("origin") == origin)
        .map(|sample| (sample.label(label).to_string(), finite(sample.value)))
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    rows
}

fn rows_json(rows: &[(String, f64)], label: &str) -> Value {
    Value::Array(
        rows.iter()
            .map(|(name, rate)| json!({label: name, "per_second": rate}))
            .collect(),
    )
}

/// The report as JSON: the totals, then one object per origin (in Prometheus, in etcd, or
/// asked for with `--origin`), busiest first.
pub fn report(
    readings: &Readings,
    state: &State,
    listing: &OriginListing,
    only: &[String],
) -> Value {
    let total = readings.total.first().map(|sample| finite(sample.value));
    let overflow = readings.overflow.first().map(|sample| finite(sample.value));
    // Regions as etcd holds them; a value that does not parse is listed, not used.
    let mut regions: BTreeMap<&str, RegionValue> = BTreeMap::new();
    let mut unreadable = Vec::new();
    for (name, entry) in &state.regions {
        match RegionValue::from_stored(&entry.raw) {
            Ok(value) => {
                regions.insert(name, value);
            }
            Err(_) => unreadable.push(name.clone()),
        }
    }
    let stages: Vec<(String, dw_routing::stage::Stage)> = open_stages(state)
        .into_iter()
        .filter_map(|(id, stage)| stage.ok().map(|stage| (id, stage)))
        .collect();
    // Answers per region key, whichever origin answered.
    let by_key: BTreeMap<&str, f64> = readings
        .regions
        .iter()
        .map(|sample| (sample.label("key"), finite(sample.value)))
        .collect();
    // Where the routing core sends each geo's answers without a sticky key.
    let plain = plain_routes(&crate::plan::prediction::table(
        state,
        dw_routing::DEFAULT_PREFIX,
        None,
    ));
    let mut names: BTreeSet<String> = BTreeSet::new();
    if only.is_empty() {
        names.extend(
            readings
                .origins
                .iter()
                .map(|sample| sample.label("origin").to_string()),
        );
        for value in regions.values() {
            names.extend(value.origins.iter().cloned());
        }
        names.extend(listing.live.keys().cloned());
        names.extend(listing.registered.iter().cloned());
        names.extend(listing.drains.keys().cloned());
        names.extend(listing.capacities.keys().cloned());
    } else {
        names.extend(only.iter().cloned());
    }
    let mut origins: Vec<Value> = names
        .iter()
        .map(|origin| {
            let per_second = readings
                .origins
                .iter()
                .find(|sample| sample.label("origin") == origin)
                .map_or(0.0, |sample| finite(sample.value));
            let share = match total {
                Some(total) if total > 0.0 => Some(per_second / total),
                _ => None,
            };
            let in_regions: BTreeMap<&str, u32> = regions
                .iter()
                .filter(|(_, value)| value.origins.iter().any(|o| o == origin))
                .map(|(name, value)| (*name, value.weight.get(origin).copied().unwrap_or(0)))
                .collect();
            let weight_zero: Vec<&str> = in_regions
                .iter()
                .filter(|(_, weight)| **weight == 0)
                .map(|(name, _)| *name)
                .collect();
            let registered = if listing.live.contains_key(origin) {
                "live"
            } else if listing.registered.contains(origin) {
                "down"
            } else {
                "never"
            };
            let drained = listing.drains.get(origin).map(|record| {
                json!({"reason": record.reason, "by": record.by, "at": record.at,
                       "source": record.source, "regions": record.regions.keys().collect::<Vec<_>>(),
                       "state": record.state_label()})
            });
            let malformed_drain = listing.malformed_drains.get(origin);
            let in_stages: Vec<Value> = stages
                .iter()
                .filter_map(|(id, stage)| {
                    let keys: Vec<&str> = stage
                        .kvs
                        .iter()
                        .filter(|(key, value)| {
                            key.starts_with("region/")
                                && value.as_deref().is_some_and(|value| {
                                    RegionValue::from_stored(value.as_bytes())
                                        .is_ok_and(|region| region.origins.iter().any(|o| o == origin))
                                })
                        })
                        .map(|(key, _)| key.as_str())
                        .collect();
                    (!keys.is_empty()).then(|| {
                        json!({"stage": id, "cohort": cohort_text(&stage.cohort), "keys": keys})
                    })
                })
                .collect();
            let weighted: Vec<&str> = in_regions
                .iter()
                .filter(|(_, weight)| **weight > 0)
                .map(|(name, _)| *name)
                .collect();
            let region_rate = weighted
                .iter()
                .fold(0.0, |sum, name| sum + region_answers(&by_key, name));
            let why = (per_second <= 0.0).then(|| {
                why_no_traffic(
                    origin,
                    total,
                    &in_regions,
                    &weighted,
                    region_rate,
                    drained.is_some(),
                    registered,
                    !in_stages.is_empty(),
                    &hashed_elsewhere_text(&plain, &weighted, origin),
                )
            });
            let geos = ranked(&readings.geos, origin, "geo");
            let keys = ranked(&readings.keys, origin, "key");
            let steps = ranked(&readings.steps, origin, "step");
            let nodes = ranked(&readings.nodes, origin, "node");
            let capacity = listing.capacities.get(origin).map(|capacity| {
                json!({
                    "answers_per_s": number_json(*capacity),
                    "used": used_share(per_second, *capacity),
                    "over_guard": per_second > capacity * listing.headroom,
                })
            });
            json!({
                "capacity": capacity,
                "origin": origin,
                "per_second": per_second,
                "share": share,
                "geos": rows_json(&geos, "geo"),
                "keys": rows_json(&keys, "key"),
                "steps": rows_json(&steps, "step"),
                "nodes": rows_json(&nodes, "node"),
                "etcd": {
                    "regions": in_regions,
                    "weight_zero": weight_zero,
                    "registered": registered,
                    "drained": drained,
                    "malformed_drain": malformed_drain,
                    "stages": in_stages,
                    "weighted_regions_per_second": region_rate,
                },
                "why": why,
            })
        })
        .collect();
    origins.sort_by(|a, b| {
        let rate = |v: &Value| v["per_second"].as_f64().unwrap_or(0.0);
        rate(b)
            .total_cmp(&rate(a))
            .then_with(|| a["origin"].as_str().cmp(&b["origin"].as_str()))
    });
    json!({
        "per_second": total,
        "overflow_per_second": overflow,
        "revision": state.revision,
        "unreadable_regions": unreadable,
        "not_numbers": not_numbers(readings),
        "capacity_headroom": number_json(listing.headroom),
        "capacities_unreadable": listing.capacities_unreadable,
        "origins": origins,
    })
}

/// The answers per second of the region `name` (a name under `region/`), however the
/// counters wrote its key (encoded as cache tags are, with or without `region/`).
fn region_answers(by_key: &BTreeMap<&str, f64>, name: &str) -> f64 {
    let encoded = dw_routing::encode_tag_key(name.as_bytes());
    by_key
        .iter()
        .filter(|(key, _)| {
            let key: &str = key.strip_prefix("region/").unwrap_or(key);
            key == encoded || key == name
        })
        .fold(0.0, |sum, (_, rate)| sum + rate)
}

/// The most geos named in "the whole geo JP hashes to sjc-a" per origin.
pub const SHOWN_HASHED_GEOS: usize = 3;

/// "the whole geo JP hashes to sjc-a", for the geos of `origin`'s weighted regions, when
/// none of them sends its plain answers to `origin`; empty when one does (or the regions
/// answer no geo).
fn hashed_elsewhere_text(plain: &[PlainRoute], weighted: &[&str], origin: &str) -> Vec<String> {
    let mut routes = Vec::new();
    for region in weighted {
        let elsewhere = hashed_elsewhere(plain, region, origin);
        if elsewhere.is_empty() {
            return Vec::new();
        }
        routes.extend(elsewhere);
    }
    let mut text: Vec<String> = routes
        .iter()
        .take(SHOWN_HASHED_GEOS)
        .map(|route| {
            format!(
                "the whole geo {} hashes to {}",
                Shown(&route.geo),
                Shown(&route.origin)
            )
        })
        .collect();
    if routes.len() > SHOWN_HASHED_GEOS {
        text.push(format!(
            "and {} more geos to other origins",
            routes.len() - SHOWN_HASHED_GEOS
        ));
    }
    text
}

/// Why an origin got no answers, most likely cause first.
#[allow(clippy::too_many_arguments)]
fn why_no_traffic(
    origin: &str,
    total: Option<f64>,
    in_regions: &BTreeMap<&str, u32>,
    weighted: &[&str],
    region_rate: f64,
    drained: bool,
    registered: &str,
    staged: bool,
    hashed: &[String],
) -> Vec<String> {
    let shown = Shown(origin);
    let mut why = Vec::new();
    if total.is_none_or(|total| total <= 0.0) {
        why.push(
            "Prometheus has no answers at all in the window: is it scraping every dw-agent's \
             /metrics, and do the nodes count (dw_router.count_answers)?"
                .to_string(),
        );
        return why;
    }
    if drained {
        why.push(format!("drained (`dwctl restore {shown}`)"));
    }
    if in_regions.is_empty() {
        // A drain took it out of its regions: nothing more to say then.
        if staged {
            why.push(
                "in no current region, only in an open stage: only the stage's cohort routes                  to it"
                    .to_string(),
            );
        } else if !drained {
            why.push("in no region (`dwctl region list`, `dwctl apply`)".to_string());
        }
    } else if weighted.is_empty() {
        why.push("weight 0 in every region it is in".to_string());
    } else if region_rate <= 0.0 {
        why.push(format!(
            "its weighted regions ({}) answered no one in the window: no visitors from \
             there, or the nodes answer them elsewhere (`dwctl route GEO`, `dwctl status`)",
            weighted
                .iter()
                .map(|name| Shown(name).to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    } else if !hashed.is_empty() {
        why.push(format!(
            "its weighted regions answer {region_rate:.2}/s, none of it with this origin: {} \
             (a geo's answers without a sticky key all go to the one origin its hash picks, \
             whatever the weights; only sticky answers spread by weight)",
            hashed.join("; ")
        ));
    } else {
        why.push(format!(
            "its weighted regions answer {region_rate:.2}/s, none of it with this origin: are \
             the nodes current (`dwctl status`)? is a stage serving them other values?"
        ));
    }
    if registered == "down" {
        why.push("registered once, its lease is gone (rebalance drains such origins)".into());
    }
    why
}

fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}/s")
    } else if rate >= 1.0 {
        format!("{rate:.1}/s")
    } else {
        format!("{rate:.3}/s")
    }
}

fn list_text(rows: &Value, label: &str) -> String {
    rows.as_array()
        .into_iter()
        .flatten()
        .map(|row| {
            format!(
                "{} {}",
                Shown(row[label].as_str().unwrap_or("")),
                rate_text(row["per_second"].as_f64().unwrap_or(0.0))
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report as text, every value from Prometheus or etcd escaped.
pub fn describe(json: &Value) -> String {
    let mut out = String::new();
    let window = json["window"].as_str().unwrap_or("?");
    let geo = match json["geo"].as_str() {
        Some(geo) => format!(" to geo {}", Shown(geo)),
        None => String::new(),
    };
    match json["per_second"].as_f64() {
        Some(total) => out.push_str(&format!(
            "{} answers{geo} over the last {window} (Prometheus {}, etcd revision {})\n",
            rate_text(total),
            Shown(json["prometheus"].as_str().unwrap_or("")),
            json["revision"]
        )),
        None => out.push_str(&format!(
            "no {ANSWERS}{geo} in Prometheus over the last {window} ({}): it does not scrape \
             the dw-agents' /metrics, or no node counts\n",
            Shown(json["prometheus"].as_str().unwrap_or(""))
        )),
    }
    out.push_str(
        "(answers of resolve(), not requests: pages served from LSCache are not counted)\n",
    );
    if let Some(overflow) = json["overflow_per_second"].as_f64().filter(|o| *o > 0.0) {
        out.push_str(&format!(
            "{} answers past the nodes' label bounds ({OVERFLOW}): not in the origins below\n",
            rate_text(overflow)
        ));
    }
    if let Some(count) = json["not_numbers"].as_u64().filter(|count| *count > 0) {
        out.push_str(&format!(
            "{count} rate(s) from Prometheus were not numbers (NaN, infinite or below 0): shown \
             as 0, and a load prediction leaves their nodes out\n"
        ));
    }
    if let Some(why) = json["capacities_unreadable"].as_str() {
        out.push_str(&format!("capacities not shown: {}\n", Shown(why)));
    }
    for name in json["unreadable_regions"].as_array().into_iter().flatten() {
        out.push_str(&format!(
            "region {} does not parse: not counted for any origin\n",
            Shown(name.as_str().unwrap_or(""))
        ));
    }
    let origins = json["origins"].as_array().cloned().unwrap_or_default();
    if origins.is_empty() {
        out.push_str("no origins in Prometheus or etcd\n");
    }
    for origin in &origins {
        let etcd = &origin["etcd"];
        let share = origin["share"]
            .as_f64()
            .map_or("-".to_string(), |share| format!("{:.1}%", share * 100.0));
        let regions: Vec<String> = etcd["regions"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, weight)| format!("{} {}", Shown(name), weight))
            .collect();
        let placed = match regions.len() {
            0 => "in no region".to_string(),
            n if n > SHOWN_REGIONS => format!(
                "regions: {}, and {} more (--output json lists them)",
                regions[..SHOWN_REGIONS].join(", "),
                n - SHOWN_REGIONS
            ),
            _ => format!("regions: {}", regions.join(", ")),
        };
        out.push_str(&format!(
            "\n{}  {}  {share}  {}, registered: {}\n",
            Shown(origin["origin"].as_str().unwrap_or("")),
            rate_text(origin["per_second"].as_f64().unwrap_or(0.0)),
            placed,
            etcd["registered"].as_str().unwrap_or("?"),
        ));
        match origin["capacity"].as_object() {
            Some(capacity) => out.push_str(&format!(
                "  capacity {}/s, {}% used (the guard refuses above {}%){}\n",
                capacity["answers_per_s"],
                percent(capacity["used"].as_f64().unwrap_or(0.0)),
                percent(
                    json["capacity_headroom"]
                        .as_f64()
                        .unwrap_or(DEFAULT_HEADROOM)
                ),
                if capacity["over_guard"].as_bool() == Some(true) {
                    ": ABOVE THE GUARD"
                } else {
                    ""
                },
            )),
            None => out.push_str("  capacity not set (`dwctl origin capacity`)\n"),
        }
        for (what, label) in [
            ("geos", "geo"),
            ("keys", "key"),
            ("steps", "step"),
            ("nodes", "node"),
        ] {
            let list = list_text(&origin[what], label);
            if !list.is_empty() {
                out.push_str(&format!("  {what}: {list}\n"));
            }
        }
        let zero = etcd["weight_zero"].as_array().cloned().unwrap_or_default();
        if !zero.is_empty() {
            out.push_str(&format!(
                "  weight 0 in: {}\n",
                zero.iter()
                    .map(|name| Shown(name.as_str().unwrap_or("")).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(drain) = etcd["drained"].as_object() {
            out.push_str(&format!(
                "  {} by {} at {} ({}): {}\n",
                Shown(drain["state"].as_str().unwrap_or("drained")),
                Shown(drain["by"].as_str().unwrap_or("")),
                Shown(drain["at"].as_str().unwrap_or("")),
                Shown(drain["source"].as_str().unwrap_or("")),
                Shown(drain["reason"].as_str().unwrap_or("")),
            ));
        }
        if let Some(reason) = etcd["malformed_drain"].as_str() {
            out.push_str(&format!(
                "  its drain record does not parse ({}): `dwctl drain --repair`\n",
                Shown(reason)
            ));
        }
        for stage in etcd["stages"].as_array().into_iter().flatten() {
            out.push_str(&format!(
                "  in stage {} (cohort {}): {}\n",
                Shown(stage["stage"].as_str().unwrap_or("")),
                Shown(stage["cohort"].as_str().unwrap_or("")),
                stage["keys"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|key| Shown(key.as_str().unwrap_or("")).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for why in origin["why"].as_array().into_iter().flatten() {
            // Built from values already shown.
            out.push_str(&format!(
                "  why no answers: {}\n",
                why.as_str().unwrap_or("")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
