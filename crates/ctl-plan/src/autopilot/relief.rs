//! A relief's plan: the smallest shed of an overloaded origin that the receivers can take,
//! tier by tier in least-harm order, over dw-capacity's shed search and spill.
//!
//! `want` answers per second are asked off `origin`. Each tier ([`super::harm`]) is shed in
//! turn with [`dw_capacity::shed_from`] (the next tier starts from the values the last one
//! left), the percent asked of a tier being what is still wanted over the origin's load
//! from that tier's regions, until the wanted load is off or the tiers are used up. The
//! receivers are then judged against `limit` (a fraction of their capacity: the target's
//! headroom, or the ceiling when every origin is over target): an origin whose load rises
//! above it is first given a spill ([`dw_capacity::spill`], origins of the chain's next
//! steps that already serve the shard), and when that does not fit either, the shed is
//! halved, at most [`HALVINGS`] times. The result is the largest shed found that fits, or
//! none.

use std::collections::BTreeMap;

use dw_capacity::{Load, RegionEdit, ShedRequest, SpillRequest, Traffic, shed_from, spill};
use dw_routing::Table;

use super::harm::{Harm, Tier};
use crate::Error;

/// How many times a relief that does not fit is halved before it is given up.
pub const HALVINGS: u32 = 6;

/// What a relief is asked to do.
#[derive(Debug, Clone)]
pub struct ReliefAsk<'a> {
    /// The origin relieved.
    pub origin: &'a str,
    /// Answers per second to take off it.
    pub want: f64,
    /// Its regions in least-harm order.
    pub tiers: &'a [Tier],
    /// Its load per region (by geo), [`super::harm::load_by_region`].
    pub by_region: &'a BTreeMap<String, f64>,
    /// Capacities by origin.
    pub capacities: &'a BTreeMap<String, f64>,
    /// What a receiver may reach, as a fraction of its capacity.
    pub limit: f64,
}

/// A relief that fits.
#[derive(Debug, Clone, PartialEq)]
pub struct Relief {
    /// The regions' new values, by geo.
    pub edits: Vec<RegionEdit>,
    /// The load after.
    pub after: Load,
    /// Answers per second taken off the origin, by the prediction.
    pub moved: f64,
    /// The tiers the relief took load from.
    pub harms: Vec<Harm>,
    /// Origins a spill added (region, origin).
    pub spilled: Vec<(String, String)>,
}

/// The largest relief of at most `ask.want` that keeps every receiver whose load rises at
/// or below `ask.limit` of its capacity (see the module's documentation); `None` when not
/// even the smallest tried fits.
pub fn plan_relief(
    table: &Table,
    traffic: &Traffic,
    before: &Load,
    ask: &ReliefAsk<'_>,
) -> Result<Option<Relief>, Error> {
    let mut want = ask.want;
    for _ in 0..=HALVINGS {
        if want <= 0.0 {
            break;
        }
        if let Some(relief) = attempt(table, traffic, before, ask, want)? {
            return Ok(Some(relief));
        }
        want /= 2.0;
    }
    Ok(None)
}

fn attempt(
    table: &Table,
    traffic: &Traffic,
    before: &Load,
    ask: &ReliefAsk<'_>,
    want: f64,
) -> Result<Option<Relief>, Error> {
    let origin = ask.origin;
    let mut edits: Vec<RegionEdit> = Vec::new();
    let mut after: Option<Load> = None;
    let mut harms = Vec::new();
    let start = before.of(origin);
    for tier in ask.tiers {
        let taken = after.as_ref().map_or(0.0, |load| start - load.of(origin));
        let remaining = want - taken;
        if remaining <= want * 0.02 {
            break;
        }
        let tier_load: f64 = tier
            .regions
            .iter()
            .filter_map(|geo| ask.by_region.get(geo))
            .sum();
        if tier_load <= 0.0 {
            continue;
        }
        let percent = (100.0 * remaining / tier_load).clamp(0.1, 100.0);
        let plan = shed_from(
            table,
            traffic,
            &edits,
            &ShedRequest {
                origin: origin.to_owned(),
                percent,
                regions: tier.regions.clone(),
            },
        )
        .map_err(capacity_error)?;
        if plan.after.of(origin) < after.as_ref().map_or(start, |load| load.of(origin)) - 1e-9 {
            harms.push(tier.harm);
        }
        edits = plan.edits;
        after = Some(plan.after);
    }
    let Some(after) = after else {
        return Ok(None);
    };
    if after.of(origin) >= start - 1e-9 {
        return Ok(None);
    }
    let fits =
        |load: &Load| rising_over(load, before, ask.capacities, ask.limit, origin).is_empty();
    if fits(&after) {
        return Ok(Some(Relief {
            moved: start - after.of(origin),
            edits,
            after,
            harms,
            spilled: Vec::new(),
        }));
    }
    let spilled = spill(
        table,
        traffic,
        &edits,
        &SpillRequest {
            origin: origin.to_owned(),
            capacities: ask.capacities.clone(),
            headroom: ask.limit,
            declared: BTreeMap::new(),
        },
    )
    .map_err(capacity_error)?;
    if !fits(&spilled.after) || spilled.added.is_empty() {
        return Ok(None);
    }
    Ok(Some(Relief {
        moved: start - spilled.after.of(origin),
        edits: spilled.edits,
        harms,
        spilled: spilled
            .added
            .iter()
            .map(|added| (added.region.clone(), added.origin.clone()))
            .collect(),
        after: spilled.after,
    }))
}

/// The origins other than `origin` whose load rises from `before` to above `limit` of
/// their capacity in `after`, by name.
pub fn rising_over(
    after: &Load,
    before: &Load,
    capacities: &BTreeMap<String, f64>,
    limit: f64,
    origin: &str,
) -> Vec<String> {
    after
        .origins
        .iter()
        .filter(|(name, load)| {
            name.as_str() != origin
                && **load > before.of(name) + 1e-9
                && capacities
                    .get(name.as_str())
                    .is_none_or(|capacity| **load > capacity * limit + 1e-9)
        })
        .map(|(name, _)| name.clone())
        .collect()
}

fn capacity_error(error: dw_capacity::Error) -> Error {
    Error::Failed(format!("the relief's plan failed: {error}"))
}
