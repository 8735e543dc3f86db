//! dw-routing: the routing core of dw-router.
//!
//! It turns the bytes of a snapshot file (docs/snapshot-format.md) into an immutable, compiled
//! [`Table`] and answers "which shard and origin serves this country (and this sticky key)?"
//! with the semantics of docs/routing.md:
//!
//! - [`Snapshot`]: the file as parsed, every key under the prefix with its raw value.
//! - [`Region`] and [`Policy`]: one key's value, validated exactly as the PHP userland twin
//!   (`php/RegionRouter.php`) validates it, JSON quirks included (PHP's nesting limit, `-0`
//!   as an integer, duplicate keys: last value wins).
//! - [`legacy_pick`] (bit for bit the original PHP router's crc32 walk) and
//!   [`rendezvous_pick`] (weighted highest-random-weight hashing).
//! - [`Table`]: every valid region compiled into a hash lookup keyed by the geo's bytes,
//!   with the policy's fallback chain resolved in advance, so that [`Table::resolve`] does
//!   one hash lookup, one pick and no allocation. An invalid key never fails the table: it
//!   is left out and listed in [`Table::invalid_keys`].
//!
//! - [`keys`]: the etcd key layout (prefixes and key kinds) the agent and `dwctl` share.
//!
//! The crate does no I/O and knows nothing of PHP, etcd or tokio: the extension, the agent
//! (`dw-agent`) and the control CLI (`dwctl`) bring the bytes and use the answers.

mod crc;
mod error;
mod json;
pub mod keys;
mod literal_scan;
mod pick;
mod policy;
mod region;
mod snapshot;
mod table;

pub use crate::{
    error::{Error, MAX_QUOTED_BYTES, quoted},
    keys::DEFAULT_PREFIX,
    pick::{legacy_pick, rendezvous_pick},
    policy::{PickMode, Policy},
    region::{MAX_WEIGHT, Region},
    snapshot::{SNAPSHOT_FORMAT, Snapshot, SnapshotWriter},
    table::{CountryCode, InvalidKey, Route, Table},
};
