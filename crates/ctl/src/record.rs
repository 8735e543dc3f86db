//! Drain records: what `drain` took away, so that `restore` can give it back.
//!
//! One record per drained origin, at `<control prefix>drains/<origin>`, written in the same
//! transaction as the regions it changed. For each region it keeps the value before the
//! drain (membership and weights) and after it (`null` when the drain deleted the region
//! key), with who drained, why, when, and which tool (`source`: `cli`, `rebalance`,
//! `health`). Automation only ever restores its own drains.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::value::RegionValue;

/// Who drained: an operator with the CLI.
pub const SOURCE_CLI: &str = "cli";
/// Who drained: `dwctl rebalance`, when an origin's lease expired.
pub const SOURCE_REBALANCE: &str = "rebalance";
/// Who drained: `dwctl health`, after failed probes.
pub const SOURCE_HEALTH: &str = "health";

/// What a drain took, kept under the control prefix so that `restore` can give it back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainRecord {
    /// The drained origin.
    pub origin: String,
    /// Why it was drained.
    pub reason: String,
    /// Who drained: [`SOURCE_CLI`], [`SOURCE_REBALANCE`] or [`SOURCE_HEALTH`].
    pub source: String,
    /// The operator or automation instance that drained it.
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// geo → the region before and after the drain.
    pub regions: BTreeMap<String, DrainedRegion>,
    /// stage id → geo → the staged region before and after the drain, so that `restore`
    /// puts the origin back into the stages it was drained from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stages: BTreeMap<String, BTreeMap<String, DrainedRegion>>,
}

/// One region's value around the drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainedRegion {
    /// The value before the drain.
    pub before: RegionValue,
    /// `None` when the drain deleted the region key (`--force` on its last origin).
    pub after: Option<RegionValue>,
}

impl DrainRecord {
    /// The record of `origin` as stored; a malformed one fails the command.
    pub fn parse(origin: &str, raw: &[u8]) -> Result<DrainRecord, Error> {
        serde_json::from_slice(raw).map_err(|error| {
            Error::Failed(format!(
                "the drain record of {origin} is malformed ({error}); inspect it with \
                 `dwctl history` and delete or repair it with etcdctl"
            ))
        })
    }

    /// Compact JSON.
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}
