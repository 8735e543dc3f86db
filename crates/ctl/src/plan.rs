//! The pure part of dwctl: state in, changes out. No etcd client, no runtime, no clap:
//! the model of the routing state ([`model`]) and its values ([`value`], [`weights`]), the
//! key layout ([`keys`]), origin capacities and the guard's headroom ([`capacity`]),
//! drains and their records ([`drain`], [`drain_record`]), sheds and spills ([`shed`],
//! [`shed_record`]), how open stages follow a write
//! ([`stage`]), `apply`'s desired state ([`apply`]), a rollout's schedule and its gate
//! ([`rollout`], [`rollout_gate`]), the health checker's streak rule ([`streak`]), the
//! etcd roles ([`roles`]), `--wait`'s arguments ([`wait`]) and the clock text written
//! into values ([`clock`]).

pub(crate) mod apply;
pub(crate) mod capacity;
pub(crate) mod clock;
pub(crate) mod drain;
pub(crate) mod drain_record;
// Accessor names say what each key is; their docs would repeat them.
#[allow(missing_docs)]
pub(crate) mod keys;
pub(crate) mod model;
pub(crate) mod node_report;
pub(crate) mod prediction;
pub(crate) mod probe_target;
pub(crate) mod roles;
pub(crate) mod rollout;
pub(crate) mod rollout_gate;
pub(crate) mod shed;
pub(crate) mod shed_record;
pub(crate) mod stage;
pub(crate) mod streak;
pub(crate) mod value;
pub(crate) mod wait;
pub(crate) mod weights;
