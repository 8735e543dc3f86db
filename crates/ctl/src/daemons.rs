//! The long-running commands: `origin register` ([`origin`]), `rebalance`, `health`, a
//! rollout's driver ([`rollout`]) and the fleet exporter (`exporter`, with the routing
//! weights it serves: [`routing_weights`]), with the session loop they share
//! ([`sessions`]) and the port their metrics are served on ([`metrics_port`]). Each is a library function the thin command calls; they read and write
//! through `crate::ops`.

pub(crate) mod autopilot;
pub(crate) mod exporter;
pub(crate) mod health;
pub(crate) mod metrics_port;
pub(crate) mod origin;
pub(crate) mod rebalance;
pub(crate) mod rollout;
pub(crate) mod routing_weights;
pub(crate) mod sessions;
