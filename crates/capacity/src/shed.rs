//! The shed search: the weight changes that come closest to taking a given fraction of an
//! origin's load off it.
//!
//! The levers are, per region listing the origin, its weight and its membership: a
//! candidate value gives the origin a share `s / 1000` of the region (`s` from 1 up to its
//! current share, in at most [`SHARE_STEPS`] steps, or in steps of at most `1000 / N`
//! where the region has bucketed traffic, so that bucketed load moves within a bucket of
//! its aim), the other listed origins keeping their
//! proportions ([`crate::renormalise`] to `1000 - s`), or takes it out of the list (the
//! drain's value, the others renormalised to 100). Every candidate is evaluated with the
//! routing core on the region's geos: under the legacy pick a changed weight rehashes the
//! region's plain geos, so a candidate may move geos between other origins, and may move
//! none off the shed origin. Then one candidate per region is chosen so that the sum of
//! the reductions comes closest to the target: each region first takes the candidate
//! closest to the target's proportion of its own part, then single changes that bring the
//! total closer are made, best first (ties: the one moving less traffic), until none
//! does. Regions where the origin carries no predicted traffic are left alone.
//!
//! `PERCENT` is of the origin's predicted load from the selected regions (all regions
//! listing it when none is named). `shed 100` is a drain: every selected region listing
//! the origin gets the drain's value, whatever its traffic. A shed composes: the next one
//! starts from the values this one leaves ([`shed_from`]).

use std::collections::BTreeMap;

use dw_routing::{Region, Table};

use crate::compare::{Comparison, compare};
use crate::edit::{RegionEdit, SHED_TOTAL, drained, with_share};
use crate::error::{Error, shown};
use crate::predict::{Load, Placed, View, origin_rates, predict_edited};
use crate::traffic::Traffic;

/// The most share values tried per region.
pub const SHARE_STEPS: u32 = 100;

/// The most rounds of single changes after the first, proportional choice.
const IMPROVEMENT_ROUNDS: usize = 64;

/// What to shed.
#[derive(Debug, Clone, PartialEq)]
pub struct ShedRequest {
    /// The origin whose load is lowered.
    pub origin: String,
    /// How much of its load, in percent: `(0, 100]`.
    pub percent: f64,
    /// The regions (geos) whose values may change; empty for every region.
    pub regions: Vec<String>,
}

/// A shed's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct ShedPlan {
    /// The shed origin.
    pub origin: String,
    /// The new values, by geo: every region the plan changes (a base plan's included).
    pub edits: Vec<RegionEdit>,
    /// The load before (with the base plan's values) and after.
    pub before: Load,
    /// The load after the plan.
    pub after: Load,
    /// Every origin's change and every geo that moves.
    pub comparison: Comparison,
    /// The origin's load from the selected regions before, answers per second: what
    /// `percent` is of.
    pub base_load: f64,
    /// The percent asked.
    pub target_percent: f64,
    /// The percent of `base_load` the plan takes off.
    pub achieved_percent: f64,
    /// Selected regions where the origin is the last one with weight: left alone (a
    /// spill, [`crate::spill`], can add origins to them).
    pub blocked: Vec<String>,
}

/// Searches the weight changes that come closest to lowering `request.origin`'s load by
/// `request.percent` (see the module's documentation).
pub fn shed(table: &Table, traffic: &Traffic, request: &ShedRequest) -> Result<ShedPlan, Error> {
    shed_from(table, traffic, &[], request)
}

/// [`shed`] starting from a plan's values (`base`, not yet in the table): a second shed
/// sheds from what the first left. The result's edits hold the base's too.
pub fn shed_from(
    table: &Table,
    traffic: &Traffic,
    base: &[RegionEdit],
    request: &ShedRequest,
) -> Result<ShedPlan, Error> {
    let origin = request.origin.as_str();
    if origin.is_empty() {
        return Err(Error::invalid("origin", "must not be empty"));
    }
    if !(request.percent > 0.0 && request.percent <= 100.0) {
        return Err(Error::invalid(
            "percent",
            format!("{} is not in (0, 100]", request.percent),
        ));
    }
    let view = View::with_edits(table, base)?;
    let selected = selected_regions(&view, origin, &request.regions)?;
    let (by_region, _) = view.placement(traffic.geos());
    let no_geos = Vec::new();

    let mut choices: Vec<RegionChoice> = Vec::new();
    let mut blocked = Vec::new();
    let drain = request.percent >= 100.0;
    for &index in &selected {
        let geo = view.region_geos[index as usize];
        let Some(region) = view.region(index) else {
            continue;
        };
        let placed = by_region.get(&index).unwrap_or(&no_geos);
        let at = region.origins().iter().position(|name| name == origin);
        let Some(at) = at else { continue };
        let current = origin_rates(region, view.mode, view.buckets, placed);
        let load = current[at];
        if drained(geo, region, origin).is_none() {
            if drain || load > 0.0 {
                blocked.push(geo.to_owned());
            }
            continue;
        }
        if drain {
            choices.push(RegionChoice {
                load,
                candidates: vec![candidate(
                    &view, geo, region, placed, origin, &current, None,
                )?],
                chosen: 0,
            });
        } else if load > 0.0 {
            choices.push(RegionChoice {
                load,
                candidates: candidates(&view, geo, region, placed, origin, &current)?,
                chosen: 0,
            });
        }
    }
    let base_load: f64 = choices.iter().map(|choice| choice.load).sum::<f64>()
        + blocked_load(&view, &by_region, &blocked, origin);
    if !drain {
        choose(&mut choices, request.percent / 100.0 * base_load);
    }

    let mut edits: BTreeMap<String, RegionEdit> = base
        .iter()
        .map(|edit| (edit.geo.clone(), edit.clone()))
        .collect();
    for choice in &choices {
        if let Some(edit) = &choice.candidates[choice.chosen].edit {
            edits.insert(edit.geo.clone(), edit.clone());
        }
    }
    let edits: Vec<RegionEdit> = edits.into_values().collect();
    let before = predict_edited(table, traffic, base)?;
    let after = predict_edited(table, traffic, &edits)?;
    let achieved_percent = if base_load > 0.0 {
        100.0 * (before.of(origin) - after.of(origin)) / base_load
    } else {
        0.0
    };
    Ok(ShedPlan {
        origin: origin.to_owned(),
        comparison: compare(&before, &after),
        edits,
        before,
        after,
        base_load,
        target_percent: request.percent,
        achieved_percent,
        blocked,
    })
}

/// The indexes of the regions a shed may change: the named ones (each must exist and
/// list the origin), or every region listing it.
fn selected_regions(view: &View<'_>, origin: &str, named: &[String]) -> Result<Vec<u32>, Error> {
    let lists = |index: u32| {
        view.region(index)
            .is_some_and(|region| region.origins().iter().any(|name| name == origin))
    };
    if named.is_empty() {
        let all: Vec<u32> = (0..view.region_geos.len() as u32)
            .filter(|&i| lists(i))
            .collect();
        if all.is_empty() {
            return Err(Error::invalid(
                "origin",
                format!("{} is not listed in any region", shown(origin)),
            ));
        }
        return Ok(all);
    }
    let mut indexes = Vec::new();
    for geo in named {
        let index = view.index_of(geo).ok_or_else(|| {
            Error::invalid("region", format!("there is no valid region {}", shown(geo)))
        })?;
        if !lists(index) {
            return Err(Error::invalid(
                "region",
                format!("region {} does not list {}", shown(geo), shown(origin)),
            ));
        }
        if !indexes.contains(&index) {
            indexes.push(index);
        }
    }
    indexes.sort_unstable();
    Ok(indexes)
}

fn blocked_load(
    view: &View<'_>,
    by_region: &BTreeMap<u32, Vec<Placed<'_>>>,
    blocked: &[String],
    origin: &str,
) -> f64 {
    blocked
        .iter()
        .filter_map(|geo| {
            let index = view.index_of(geo)?;
            let region = view.region(index)?;
            let at = region.origins().iter().position(|name| name == origin)?;
            let placed = by_region.get(&index)?;
            Some(origin_rates(region, view.mode, view.buckets, placed)[at])
        })
        .sum()
}

/// One region's candidate values and the one chosen.
struct RegionChoice {
    /// The origin's load from this region now.
    load: f64,
    candidates: Vec<Candidate>,
    chosen: usize,
}

/// One value a region could take.
struct Candidate {
    /// `None`: the region unchanged.
    edit: Option<RegionEdit>,
    /// How much load it takes off the origin (negative: it adds).
    reduction: f64,
    /// How much of the region's traffic changes origin (half the L1 change of the
    /// per-origin rates): the tie-break, less is better.
    moved: f64,
}

fn candidate(
    view: &View<'_>,
    geo: &str,
    region: &Region,
    placed: &[Placed<'_>],
    origin: &str,
    current: &[f64],
    share: Option<u32>,
) -> Result<Candidate, Error> {
    let edit = match share {
        None => drained(geo, region, origin),
        Some(share) => with_share(geo, region, origin, share),
    }
    .ok_or_else(|| Error::invalid("region", format!("{} has no other origin", shown(geo))))?;
    let changed = edit.region()?;
    let rates = origin_rates(&changed, view.mode, view.buckets, placed);
    let rate_of = |origins: &[String], rates: &[f64], name: &str| {
        origins
            .iter()
            .position(|other| other == name)
            .map_or(0.0, |at| rates[at])
    };
    let before_origin = rate_of(region.origins(), current, origin);
    let after_origin = rate_of(changed.origins(), &rates, origin);
    let moved = region
        .origins()
        .iter()
        .map(|name| {
            (rate_of(changed.origins(), &rates, name) - rate_of(region.origins(), current, name))
                .abs()
        })
        .sum::<f64>()
        / 2.0;
    Ok(Candidate {
        edit: Some(edit),
        reduction: before_origin - after_origin,
        moved,
    })
}

fn candidates(
    view: &View<'_>,
    geo: &str,
    region: &Region,
    placed: &[Placed<'_>],
    origin: &str,
    current: &[f64],
) -> Result<Vec<Candidate>, Error> {
    let mut list = vec![Candidate {
        edit: None,
        reduction: 0.0,
        moved: 0.0,
    }];
    list.push(candidate(view, geo, region, placed, origin, current, None)?);
    let listed_total: u64 = region
        .origins()
        .iter()
        .map(|name| u64::from(region.weight(name)))
        .sum();
    let own = u64::from(region.weight(origin));
    let share_now = ((own * u64::from(SHED_TOTAL) + listed_total / 2) / listed_total.max(1))
        .clamp(1, u64::from(SHED_TOTAL) - 1) as u32;
    let mut stride = (share_now / SHARE_STEPS).max(1);
    // Bucketed traffic moves in whole buckets, 1/N of the region each: a share step finer
    // than a bucket (per mille, so at most SHED_TOTAL / N), so that the search reaches the
    // count closest to its aim within one bucket (up to `share_now` candidates at N of 1,000
    // and more, where SHARE_STEPS would skip about five buckets at a time).
    if let Some(n) = view.buckets
        && placed.iter().any(|geo| geo.rate.bucket > 0.0)
    {
        stride = stride.min((SHED_TOTAL / u32::from(n.get())).max(1));
    }
    let mut share = 1;
    while share <= share_now {
        list.push(candidate(
            view,
            geo,
            region,
            placed,
            origin,
            current,
            Some(share),
        )?);
        share += stride;
    }
    Ok(list)
}

/// Chooses one candidate per region so that the reductions sum closest to `target`.
fn choose(choices: &mut [RegionChoice], target: f64) {
    let whole: f64 = choices.iter().map(|choice| choice.load).sum();
    let fraction = if whole > 0.0 { target / whole } else { 0.0 };
    // First, each region its proportional part.
    for choice in choices.iter_mut() {
        let aim = fraction * choice.load;
        choice.chosen = best_index(&choice.candidates, |c| (c.reduction - aim).abs());
    }
    let total = |choices: &[RegionChoice]| -> f64 {
        choices
            .iter()
            .map(|choice| choice.candidates[choice.chosen].reduction)
            .sum()
    };
    for _ in 0..IMPROVEMENT_ROUNDS {
        let now = total(choices);
        let error = (now - target).abs();
        let mut best: Option<(f64, f64, usize, usize)> = None;
        for (region, choice) in choices.iter().enumerate() {
            let current = &choice.candidates[choice.chosen];
            for (index, candidate) in choice.candidates.iter().enumerate() {
                if index == choice.chosen {
                    continue;
                }
                let new_error = (now - current.reduction + candidate.reduction - target).abs();
                let extra_moved = candidate.moved - current.moved;
                let better = match best {
                    None => true,
                    Some((best_error, best_moved, _, _)) => {
                        new_error < best_error - 1e-12
                            || (new_error <= best_error + 1e-12 && extra_moved < best_moved)
                    }
                };
                if better {
                    best = Some((new_error, extra_moved, region, index));
                }
            }
        }
        match best {
            Some((new_error, _, region, index)) if new_error < error - 1e-9 => {
                choices[region].chosen = index;
            }
            _ => break,
        }
    }
}

/// The index of the candidate with the least `distance`, ties to the one moving less.
fn best_index(candidates: &[Candidate], distance: impl Fn(&Candidate) -> f64) -> usize {
    let mut best = 0;
    for (index, candidate) in candidates.iter().enumerate() {
        let (d, b) = (distance(candidate), distance(&candidates[best]));
        if d < b - 1e-12 || (d <= b + 1e-12 && candidate.moved < candidates[best].moved) {
            best = index;
        }
    }
    best
}

/// The largest shed within the guard: the largest whole `PERCENT` from 1 to
/// `request.percent` whose plan ([`shed`]) raises no origin above its limit
/// ([`crate::GuardReport::rising`]), found by bisection over whole percents (at most 7
/// searches for 100; the search's achieved load is taken as growing with the percent
/// asked). `None` when not even 1 % fits. What a refused drain or shed reports as "the
/// largest shed that would fit", exactly, beside [`crate::largest_fitting_shed`]'s
/// linear estimate.
pub fn largest_shed_within_guard(
    table: &Table,
    traffic: &Traffic,
    request: &ShedRequest,
    capacities: &BTreeMap<String, f64>,
    headroom: f64,
) -> Result<Option<ShedPlan>, Error> {
    crate::guard::check_guard_inputs(capacities, headroom)?;
    let fits = |percent: u32| -> Result<Option<ShedPlan>, Error> {
        let plan = shed(
            table,
            traffic,
            &ShedRequest {
                percent: f64::from(percent),
                ..request.clone()
            },
        )?;
        let report = crate::guard::guard(&plan.after, capacities, headroom)?;
        Ok((report.rising(&plan.before).count() == 0).then_some(plan))
    };
    if !(request.percent > 0.0 && request.percent <= 100.0) {
        return Err(Error::invalid(
            "percent",
            format!("{} is not in (0, 100]", request.percent),
        ));
    }
    let most = request.percent.floor() as u32;
    let (mut low, mut high) = (0u32, most);
    let mut best = None;
    // Invariant: `low` fits (0 trivially), every percent above `high` does not.
    while low < high {
        let middle = low + (high - low).div_ceil(2);
        match fits(middle)? {
            Some(plan) => {
                low = middle;
                best = Some(plan);
            }
            None => high = middle - 1,
        }
    }
    if low > 0 && best.is_none() {
        best = fits(low)?;
    }
    Ok(best)
}
