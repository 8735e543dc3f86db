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
//!   [`rendezvous_pick`] (weighted highest-random-weight hashing); [`pick_shares`] gives
//!   each origin's exact share of random sticky keys under either (capacity planning).
//! - [`Table`]: every valid region compiled into a geo index, with the policy's fallback
//!   chain resolved in advance. [`Table::resolve`] finds a two-character country code
//!   (what `CF-IPCountry` sends) by direct index, any other geo with one hash probe, takes
//!   the precomputed fallback when the country has no region, then runs the policy's pick,
//!   with no allocation. An invalid key never fails the table: it is left out and listed
//!   in [`Table::invalid_keys`]. [`Table::parse_after`] builds the next table from a new
//!   file, reusing the regions whose value did not change.
//!
//! - [`Table::cache_tags`] (and [`Table::cache_tags_bucketed`], `dw:b` where a visitor
//!   bucket picked the origin): the page-cache tags of an answer, read from the same walk of
//!   the chain as [`Table::explain`] (docs/routing.md, "Cache tags").
//! - [`stage`]: staged changes, the cohort function and the overlay rule a node's agent
//!   applies before it publishes.
//! - [`buckets`]: visitor buckets: the apportionment of a region's N buckets to its
//!   origins by weight, their assignment, and its minimal-move change. With
//!   `policy/global`'s `buckets: N`, each region holds its effective assignment
//!   ([`Table::assignment`]), and [`Table::resolve_bucketed`] picks a visitor's origin by
//!   its bucket (a sticky key first, then a bucket, then the country).
//! - [`keys`]: the etcd key layout (prefixes and key kinds) the agent and `dwctl` share.
//!
//! The crate does no I/O and knows nothing of PHP, etcd or tokio: the extension, the agent
//! (`dw-agent`) and the control CLI (`dwctl`) bring the bytes and use the answers.
//!
//! ```
//! use dw_routing::Table;
//!
//! // A snapshot file as dw-agent writes it: each value is a JSON document in a string.
//! let bytes = br#"{"format":1,"revision":7,"prefix":"/dw/routing/","kvs":{
//!     "/dw/routing/policy/global":"{\"default\":\"US\"}",
//!     "/dw/routing/region/DE":"{\"shard\":\"eu-1\",\"origins\":[\"fra-a\",\"fra-b\"],\"weight\":{\"fra-a\":50,\"fra-b\":30}}",
//!     "/dw/routing/region/US":"{\"shard\":\"us-1\",\"origins\":[\"iad-a\"],\"weight\":{\"iad-a\":1}}"
//! }}"#;
//! let table = Table::parse(bytes)?;
//! assert_eq!(table.revision(), 7);
//!
//! let route = table.resolve(b"DE", None).expect("DE has a region");
//! assert_eq!((route.shard, route.origin), ("eu-1", "fra-b"));
//! // No region for FR: the policy's default answers.
//! assert_eq!(table.resolve(b"FR", None).map(|route| route.shard), Some("us-1"));
//! # Ok::<(), dw_routing::Error>(())
//! ```

#![deny(missing_docs)]

pub mod buckets;
mod continent;
#[rustfmt::skip]
mod continent_data;
mod crc;
mod digest;
mod error;
mod explain;
mod geo_index;
mod json;
pub mod keys;
mod literal_scan;
mod pick;
mod policy;
mod rebuild;
mod redact;
mod region;
mod share;
mod snapshot;
pub mod stage;
mod table;
mod tags;

pub use crate::{
    continent::{
        BUCKET_PREFIX, CONTINENT_TABLE_SOURCE, Continent, bucket_of_geo, builtin_continent,
        builtin_table, is_country, subdivision_country,
    },
    digest::snapshot_header,
    error::{Error, MAX_QUOTED_BYTES, quoted},
    explain::{
        BucketOutcome, BucketUse, ChainStage, ExplainedRoute, Explanation, Step, StepOutcome,
    },
    geo_index::CountryCode,
    keys::DEFAULT_PREFIX,
    pick::{legacy_pick, rendezvous_pick},
    policy::{PickMode, Policy, parse_buckets_field},
    rebuild::{ignored_assignments, invalid_keys},
    redact::{REDACTED, SECRET_PARAMETER_WORDS, redact_url},
    region::{MAX_WEIGHT, Region, StoredBuckets},
    share::{LEGACY_POINTS, legacy_point_counts, pick_shares},
    snapshot::{DIGEST_SCHEME, SNAPSHOT_FORMAT, Snapshot, SnapshotWriter, routing_digest},
    table::{InvalidKey, MemoKey, Route, Table},
    tags::{
        MAX_TAG_BYTES, TAG_ALL, TAG_BUCKET, TAG_CHAIN, TAG_CONTINENT, TAG_LONG, TAG_MISSED,
        TAG_REGION, encode_tag_key,
    },
};
