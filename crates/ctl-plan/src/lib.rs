//! dw-ctl-plan: the pure part of dwctl, state in, changes out.
//!
//! dwctl reads the routing state from etcd at one revision, asks a planner of this crate
//! what to write, and commits the answer in one guarded transaction (dwctl's
//! `ops::commit`). Everything here is a function of what it is given: no etcd client, no
//! async runtime, no clap, no I/O beyond [`clock`]'s (the time, the operator's name and
//! the host's). `scripts/check-modules` keeps it so, from this line:
//!
//! Dependencies (scripts/check-modules): none of etcd-client tokio clap
//!
//! The modules: the model of the routing state and of a change ([`model`]) and its values
//! ([`value`]; the visitor-bucket assignment every region write carries when the policy
//! sets `buckets`, [`bucket_assignment`]; weights are renormalised by `dw_capacity::renormalise`, the one copy), the
//! key layout ([`keys`]), origin capacities and the guard's headroom ([`capacity`], set by
//! [`capacity_change`]) and the load a change predicts ([`prediction`]), the capacity
//! guard every write states and its decision ([`guard`]), drains and
//! their records ([`drain`], [`drain_record`]), sheds and spills ([`shed`],
//! [`shed_record`]), how open stages follow a write
//! ([`stage`]), the stage actions' planners ([`stage_action`]), `apply`'s desired state ([`apply`]) and the policy geos it warns about
//! ([`policy_geos`]), `rollback`'s keys and plan ([`rollback`]), a rollout's schedule and
//! its gate ([`rollout`], [`rollout_gate`]), a node's report as dwctl judges it
//! ([`node_report`]), `origin forget`'s registration delete ([`registration`]), the origins
//! as etcd lists them ([`origin_listing`]) and `dwctl traffic`'s report of where the answers
//! go ([`traffic_report`]), the health checker's streak rule
//! ([`streak`]) and its probes' targets ([`probe_target`]), the etcd roles ([`roles`]),
//! `--wait`'s arguments ([`wait`]), the clock text written into values ([`clock`]), and how
//! a value from etcd is shown on a terminal ([`shown`]). A planner refuses with [`Error`],
//! whose kinds dwctl maps to its own, exit codes and messages unchanged.
//!
//! A drain, planned without etcd: `b` leaves a region of `a:50 b:25 c:25`, the others are
//! renormalised to 100 and a drain record keeps what was taken.
//!
//! ```
//! use dw_ctl_plan::drain::{DrainRequest, plan_drain};
//! use dw_ctl_plan::model::{Entry, State};
//!
//! let mut state = State::default();
//! state.regions.insert(
//!     "DE".into(),
//!     Entry {
//!         raw: br#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":25,"c":25}}"#.to_vec(),
//!         mod_revision: 7,
//!     },
//! );
//! let request = DrainRequest {
//!     origin: "b".into(),
//!     regions: Vec::new(),
//!     reason: "maintenance".into(),
//!     source: "cli".into(),
//!     by: "alice".into(),
//!     at: "2026-01-01T00:00:00Z".into(),
//!     force: false,
//!     skip_emptying: false,
//!     fleet_limit: None,
//! };
//! let changes = plan_drain(&state, &request).unwrap();
//! let region = changes.regions["DE"].as_ref().unwrap();
//! assert_eq!(region.origins, ["a", "c"]);
//! assert_eq!((region.weight["a"], region.weight["c"]), (67, 33));
//! assert!(changes.drains["b"].is_some());
//!
//! // A drain of an origin no region lists is a refusal, not an empty write.
//! let nowhere = DrainRequest { origin: "zz".into(), ..request };
//! assert!(plan_drain(&state, &nowhere).is_err());
//! ```

#![deny(missing_docs)]

pub mod answer_shares;
pub mod apply;
pub mod autopilot;
pub mod bucket_assignment;
pub mod capacity;
pub mod capacity_change;
pub mod clock;
pub mod drain;
pub mod drain_parts;
#[cfg(test)]
mod drain_parts_tests;
pub mod drain_record;
mod error;
#[cfg(test)]
mod fixtures;
pub mod guard;
// Accessor names say what each key is; their docs would repeat them.
#[allow(missing_docs)]
pub mod keys;
pub mod model;
pub mod node_report;
pub mod origin_listing;
pub mod policy_geos;
pub mod prediction;
pub mod probe_target;
pub mod registration;
pub mod roles;
pub mod rollback;
pub mod rollout;
pub mod rollout_gate;
pub mod shed;
pub mod shed_record;
pub mod shown;
pub mod stage;
pub mod stage_action;
pub mod streak;
pub mod traffic_report;
pub mod value;
pub mod wait;

pub use error::{Error, FieldError};
