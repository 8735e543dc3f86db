//! Spill beyond the anchors: when the origins left in a region cannot take a shed or a
//! drain within their guard, add origins from the region's next steps in the chain, with
//! just the weight that keeps every origin under its guard.
//!
//! For a region `R` the plan changes, the next steps are those [`Table::resolve`] would
//! walk after `R` for `R`'s own geo (docs/routing.md, as `Table::walk` orders them): for a
//! subdivision its country, then the country's continent bucket; for a country its
//! continent bucket; then `policy.default` and each `policy.failover` (a bucket or any
//! other geo: only those). The candidates are the listed origins with weight of those
//! steps' regions, in step order then list order, that already serve `R`'s shard (listed
//! with weight in some region of that shard, in the table before the plan), then the
//! origins an operator declared for the shard; never the shed origin, an origin already in
//! `R`, an origin without a capacity (the guard could not judge it) or one already above
//! its limit.
//!
//! Regions are taken in the order of how much they put on overloaded origins, most first.
//! For each, the first candidate is appended to `R`'s list with the smallest weight (from 1
//! up to three times `R`'s total weight, in at most [`WEIGHT_STEPS`] steps) with which, by
//! the routing core, every origin `R` serves is within its limit; if no weight does it, the
//! largest weight that keeps the candidate within its own limit is taken and the next
//! candidate is tried. What is still over at the end is reported.

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::{Region, Table};

use crate::edit::RegionEdit;
use crate::error::Error;
use crate::guard::{Overload, check_guard_inputs, guard};
use crate::predict::{Load, Placed, View, origin_rates, predict_edited};
use crate::traffic::Traffic;

/// The most weights tried per candidate.
pub const WEIGHT_STEPS: u32 = 400;

/// What a spill may use.
#[derive(Debug, Clone, PartialEq)]
pub struct SpillRequest {
    /// The origin being shed or drained: never added back.
    pub origin: String,
    /// Capacities, answers per second, by origin.
    pub capacities: BTreeMap<String, f64>,
    /// The guard's headroom.
    pub headroom: f64,
    /// Origins an operator declared may serve a shard (shard → origins), tried after the
    /// chain's.
    pub declared: BTreeMap<String, Vec<String>>,
}

/// An origin a spill added to a region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpilledOrigin {
    /// The region's geo.
    pub region: String,
    /// The origin added.
    pub origin: String,
    /// Its weight in the region (the others keep theirs).
    pub weight: u32,
    /// Where it came from: the chain step's region geo, or `declared`.
    pub from: String,
}

/// A plan with spill origins added.
#[derive(Debug, Clone, PartialEq)]
pub struct SpillPlan {
    /// The plan's edits with the spill origins in them, by geo.
    pub edits: Vec<RegionEdit>,
    /// The origins added, in the order they were.
    pub added: Vec<SpilledOrigin>,
    /// The load after the plan with the spill.
    pub after: Load,
    /// Origins still above their limit after the spill (none when it succeeded).
    pub overloads: Vec<Overload>,
}

/// Adds spill origins to the regions `edits` changes until no origin is above its guard,
/// or no candidate is left (see the module's documentation).
pub fn spill(
    table: &Table,
    traffic: &Traffic,
    edits: &[RegionEdit],
    request: &SpillRequest,
) -> Result<SpillPlan, Error> {
    check_guard_inputs(&request.capacities, request.headroom)?;
    let limit = |origin: &str| {
        request
            .capacities
            .get(origin)
            .map(|capacity| capacity * request.headroom)
    };
    let mut view = View::with_edits(table, edits)?;
    let mut edits: BTreeMap<String, RegionEdit> = edits
        .iter()
        .map(|edit| (edit.geo.clone(), edit.clone()))
        .collect();
    let mut added = Vec::new();
    let mut load = predict_edited(table, traffic, &edits.values().cloned().collect::<Vec<_>>())?;
    let (by_region, _) = view.placement(traffic.geos());
    let no_geos = Vec::new();
    let serving = shard_servers(table);

    // The edited regions, most load on overloaded origins first.
    let over: BTreeSet<String> = guard(&load, &request.capacities, request.headroom)?
        .overloads
        .into_iter()
        .map(|overload| overload.origin)
        .collect();
    let mut order: Vec<(f64, String)> = Vec::new();
    for geo in edits.keys() {
        let Some(index) = view.index_of(geo) else {
            continue;
        };
        let Some(region) = view.region(index) else {
            continue;
        };
        let placed = by_region.get(&index).unwrap_or(&no_geos);
        let rates = origin_rates(region, view.mode, view.buckets, placed);
        let on_over: f64 = region
            .origins()
            .iter()
            .zip(&rates)
            .filter(|(name, _)| over.contains(*name))
            .map(|(_, rate)| rate)
            .sum();
        if on_over > 0.0 {
            order.push((on_over, geo.clone()));
        }
    }
    order.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));

    for (_, geo) in order {
        let index = view.index_of(&geo).expect("an edited region of the table");
        let placed = by_region.get(&index).unwrap_or(&no_geos);
        for (candidate, from) in candidates(&view, &geo, &serving, request) {
            let region = view.region(index).expect("an edited region").clone();
            let fits = |origin: &str, load: f64| limit(origin).is_none_or(|limit| load <= limit);
            let rates = origin_rates(&region, view.mode, view.buckets, placed);
            let over_here = region
                .origins()
                .iter()
                .zip(&rates)
                .any(|(name, rate)| *rate > 0.0 && !fits(name, load.of(name)));
            if !over_here {
                break;
            }
            if candidate == request.origin
                || region.origins().contains(&candidate)
                || !fits(&candidate, load.of(&candidate))
                || limit(&candidate).is_none()
            {
                continue;
            }
            let Some((weight, edit, changed)) =
                smallest_fitting_weight(&view, &geo, &region, placed, &load, &candidate, &fits)?
            else {
                continue;
            };
            // The load with the region's new value in place of its old.
            let new_rates = origin_rates(&changed, view.mode, view.buckets, placed);
            for (name, rate) in region.origins().iter().zip(&rates) {
                *load.origins.entry(name.clone()).or_default() -= rate;
            }
            for (name, rate) in changed.origins().iter().zip(&new_rates) {
                *load.origins.entry(name.clone()).or_default() += rate;
            }
            view.set(&edit)?;
            edits.insert(geo.clone(), edit);
            added.push(SpilledOrigin {
                region: geo.clone(),
                origin: candidate,
                weight,
                from,
            });
        }
    }
    let edits: Vec<RegionEdit> = edits.into_values().collect();
    let after = predict_edited(table, traffic, &edits)?;
    let overloads = guard(&after, &request.capacities, request.headroom)?.overloads;
    Ok(SpillPlan {
        edits,
        added,
        after,
        overloads,
    })
}

/// The smallest weight for `candidate` in `region` with which every origin the region
/// serves fits; else the largest with which the candidate itself fits and some load moves
/// to it. `None` when no weight moves load to it within its limit.
#[allow(clippy::type_complexity)]
fn smallest_fitting_weight(
    view: &View<'_>,
    geo: &str,
    region: &Region,
    placed: &[Placed<'_>],
    load: &Load,
    candidate: &str,
    fits: &dyn Fn(&str, f64) -> bool,
) -> Result<Option<(u32, RegionEdit, Region)>, Error> {
    let current = RegionEdit::of_region(geo, region);
    let rates = origin_rates(region, view.mode, view.buckets, placed);
    let base = |name: &str| {
        let here = region
            .origins()
            .iter()
            .position(|other| other == name)
            .map_or(0.0, |at| rates[at]);
        load.of(name) - here
    };
    let total: u32 = current.weight.iter().map(|(_, weight)| *weight).sum();
    let most = total.saturating_mul(3).max(1);
    let stride = (most / WEIGHT_STEPS).max(1);
    let mut fallback = None;
    let mut weight = 1;
    while weight <= most {
        let mut edit = current.clone();
        edit.origins.push(candidate.to_owned());
        edit.weight.push((candidate.to_owned(), weight));
        let changed = edit.region()?;
        let new_rates = origin_rates(&changed, view.mode, view.buckets, placed);
        let all_fit = changed
            .origins()
            .iter()
            .zip(&new_rates)
            .all(|(name, rate)| fits(name, base(name) + rate));
        let candidate_rate = *new_rates.last().unwrap_or(&0.0);
        if all_fit {
            return Ok(Some((weight, edit, changed)));
        }
        if fits(candidate, base(candidate) + candidate_rate) && candidate_rate > 0.0 {
            fallback = Some((weight, edit, changed));
        }
        weight += stride;
    }
    Ok(fallback)
}

/// For each shard, the origins listed with weight in some region of it.
fn shard_servers(table: &Table) -> BTreeMap<&str, BTreeSet<&str>> {
    let mut servers: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (_, region) in table.regions() {
        let set = servers.entry(region.shard()).or_default();
        for origin in region.origins() {
            if region.weight(origin) > 0 {
                set.insert(origin);
            }
        }
    }
    servers
}

/// The geos of the chain's steps after a region's own, for the region's geo.
pub(crate) fn next_steps(table: &Table, geo: &str) -> Vec<String> {
    let bytes = geo.as_bytes();
    let mut steps = Vec::new();
    let continent_step = |country: &[u8]| {
        table
            .continent_of(country)
            .map(|(continent, _)| continent.bucket_geo())
    };
    if dw_routing::bucket_of_geo(bytes).is_some() {
        // A bucket: only the defaults follow.
    } else if let Some(country) = dw_routing::subdivision_country(bytes) {
        steps.push(String::from_utf8_lossy(country).into_owned());
        steps.extend(continent_step(country));
    } else if dw_routing::is_country(bytes) {
        steps.extend(continent_step(bytes));
    }
    let policy = table.policy();
    steps.push(policy.default.clone());
    steps.extend(policy.failover.iter().cloned());
    steps
}

/// The spill candidates of a region, in order, with where each came from.
fn candidates(
    view: &View<'_>,
    geo: &str,
    serving: &BTreeMap<&str, BTreeSet<&str>>,
    request: &SpillRequest,
) -> Vec<(String, String)> {
    let Some(index) = view.index_of(geo) else {
        return Vec::new();
    };
    let Some(region) = view.region(index) else {
        return Vec::new();
    };
    let shard = region.shard();
    let serves = serving.get(shard);
    let mut seen = BTreeSet::new();
    let mut list = Vec::new();
    for step in next_steps(view.table, geo) {
        let Some(step_index) = view.index_of(&step) else {
            continue;
        };
        if step_index == index {
            continue;
        }
        let Some(step_region) = view.region(step_index) else {
            continue;
        };
        for origin in step_region.origins() {
            if step_region.weight(origin) > 0
                && serves.is_some_and(|set| set.contains(origin.as_str()))
                && seen.insert(origin.clone())
            {
                list.push((origin.clone(), step.clone()));
            }
        }
    }
    for origin in request.declared.get(shard).into_iter().flatten() {
        if seen.insert(origin.clone()) {
            list.push((origin.clone(), "declared".to_owned()));
        }
    }
    list
}
