//! dw-capacity: each origin's load predicted before a routing change is made, the guard
//! that refuses a change overloading an origin, the shed search and the spill.
//!
//! Everything here is pure: it reads a compiled [`dw_routing::Table`] (the code the nodes
//! run) and a [`Traffic`] (answers per second by geo, sticky or not, optionally per node),
//! and does no I/O. `dwctl` brings the state, the traffic (Prometheus or `--traffic FILE`)
//! and the capacities, and writes the plans. docs/capacity.md states the math.
//!
//! - [`Traffic`]: the input, from Prometheus rows ([`Traffic::from_rows`]) or a JSON file
//!   ([`Traffic::parse`]); the lines no table can place (`other`, overflow, fail-open
//!   answers) are kept apart ([`Unplaced`]).
//! - [`predict`], [`predict_edited`], [`predict_nodes`], [`predict_share`]: a [`Load`] per
//!   origin and per geo. Plain traffic goes wholly where [`dw_routing::Table::resolve`]
//!   sends the geo; sticky traffic splits by [`dw_routing::pick_shares`].
//! - [`check_plausibility`]: which nodes' per-node rates a prediction may believe; the
//!   others are left out and named ([`LeftOut`]).
//! - [`compare`]: each origin before and after, and every geo that moves.
//! - [`guard`]: the origins a load puts above `headroom` × capacity;
//!   [`largest_fitting_shed`] (linear estimate) and [`largest_shed_within_guard`] (the
//!   search's own answer): how much of a drain or shed would fit.
//! - [`shed`]: the weight changes closest to taking `PERCENT` of an origin's load off it
//!   (`shed 100` is a drain); [`spill`]: origins from the next steps of the chain added
//!   with just enough weight to keep every origin under its guard.
//!
//! ```
//! use std::collections::BTreeMap;
//! use dw_capacity::{DEFAULT_HEADROOM, ShedRequest, Traffic, guard, predict, shed};
//! use dw_routing::Table;
//!
//! let table = Table::parse(br#"{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{
//!     "/dw/routing/region/DE":"{\"shard\":\"eu-1\",\"origins\":[\"fra-a\",\"fra-b\"],\"weight\":{\"fra-a\":50,\"fra-b\":50}}"}}"#)?;
//! let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#)?;
//! let before = predict(&table, &traffic);
//!
//! // Draining fra-a would put all 1,000 answers/s on fra-b, capacity 1,000: refused.
//! let capacities = BTreeMap::from([("fra-b".to_owned(), 1000.0)]);
//! let drain = shed(&table, &traffic, &ShedRequest {
//!     origin: "fra-a".into(), percent: 100.0, regions: vec![] })?;
//! let report = guard(&drain.after, &capacities, DEFAULT_HEADROOM)?;
//! assert_eq!(report.overloads[0].origin, "fra-b");
//!
//! // Shedding 40 % of fra-a's load fits: fra-b gets about 700 of its 800.
//! let plan = shed(&table, &traffic, &ShedRequest {
//!     origin: "fra-a".into(), percent: 40.0, regions: vec![] })?;
//! assert!((plan.achieved_percent - 40.0).abs() < 1.0);
//! assert!(guard(&plan.after, &capacities, DEFAULT_HEADROOM)?.passes());
//! assert!(before.of("fra-a") > plan.after.of("fra-a"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]

mod compare;
mod edit;
mod error;
mod guard;
mod left_out;
mod plausibility;
mod predict;
mod shed;
mod spill;
mod traffic;

pub use crate::{
    compare::{Comparison, Flow, GeoMove, MOVE_EPSILON, OriginChange, compare},
    edit::{DRAIN_TOTAL, RegionEdit, SHED_TOTAL, drained, renormalise},
    error::Error,
    guard::{
        DEFAULT_HEADROOM, FittingShed, GuardReport, Overload, check_guard_inputs, guard,
        largest_fitting_shed,
    },
    left_out::{Implausible, LeftOut},
    plausibility::{
        Checked, DEFAULT_MEDIAN_FACTOR, DEFAULT_NODE_CEILING, Limits, MIN_NODES_FOR_MEDIAN,
        NodeReading, check as check_plausibility,
    },
    predict::{GeoLoad, Load, NodeTables, predict, predict_edited, predict_nodes, predict_share},
    shed::{SHARE_STEPS, ShedPlan, ShedRequest, largest_shed_within_guard, shed, shed_from},
    spill::{SpillPlan, SpillRequest, SpilledOrigin, WEIGHT_STEPS, spill},
    traffic::{
        AnswerKind, AnswerRow, GeoRate, MAX_ENTRIES, MAX_GEOS, MAX_NAME_BYTES, MAX_NODES, MAX_RATE,
        MAX_TRAFFIC_BYTES, Traffic, Unplaced,
    },
};
