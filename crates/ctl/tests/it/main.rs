//! dwctl's integration tests, one binary (one link instead of seventeen): each module is a
//! former test file, against a real etcd (and the dwctl binary) of its own, so no test
//! depends on being alone in its process; `common` is their scaffolding.

mod common;

mod auth_daemons;
mod autopilot;
mod bad_data;
mod buckets;
mod capacity;
mod commands;
mod concurrency;
mod daemons;
mod exporter;
mod first_install;
mod geography;
mod input;
mod origin_notice;
mod plausibility;
mod policy_geos;
mod quota;
mod report_trust;
mod rollout;
mod scale;
mod security;
mod shed;
mod stages;
mod unusable_rates;
mod usage;
