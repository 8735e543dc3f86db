//! dw-agent's integration tests, one binary (one link instead of twelve): each module is a
//! former test file with an etcd of its own; agents run as child processes or, in
//! `in_process`, as tasks that share nothing but the process, so no test depends on being
//! alone in it. `support` is their scaffolding.

mod support;

mod auth_expiry;
mod binary;
mod coalesce;
mod fleet;
mod heal;
mod in_process;
mod purge;
mod robustness;
mod roles;
mod rollout;
mod security;
mod stages;
