//! The routing state (and the capacities beside it) as read and the changes a command
//! wants written: plain types, below dwctl's `ops::commit` (which reads and commits them,
//! filling each [`Entry`] from etcd's key-value), the planners (`drain`, `stage`) and the
//! commands, so that none of those imports another to name them.

use std::collections::{BTreeMap, BTreeSet};

use crate::capacity::{Capacity, DEFAULT_HEADROOM, Headroom};
use crate::drain_record::{DrainRecord, DrainRequest};
use crate::value::{PolicyValue, RegionValue};
use crate::{Error, FieldError};
use dw_routing::stage::Stage;

/// A key's raw value and the revision it was last modified at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value as stored.
    pub raw: Vec<u8>,
    /// The revision of its last change (what a guarded write compares).
    pub mod_revision: i64,
}

/// Regions, policy and drain records as of one etcd revision.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The revision everything was read at.
    pub revision: i64,
    /// geo → value. Keys whose geo is not UTF-8 are left out: no command can name them.
    pub regions: BTreeMap<String, Entry>,
    /// `policy/global`, when it exists.
    pub policy: Option<Entry>,
    /// origin → drain record.
    pub drains: BTreeMap<String, Entry>,
    /// stage id → the stage key (`<prefix>stage/<id>`).
    pub stages: BTreeMap<String, Entry>,
    /// origin → its capacity record (`<control>capacity/<origin>`).
    pub capacities: BTreeMap<String, Entry>,
    /// The guard's headroom record (`<control>capacity-headroom`), when it exists.
    pub headroom: Option<Entry>,
    /// Why the capacities could not be read, when they could not (a role made before
    /// capacities existed may lack the grant: `dwctl auth --apply`). Routing changes go
    /// ahead without them; writing a capacity fails.
    pub capacities_unreadable: Option<String>,
}

impl State {
    /// The region's value, if the key exists: `Err` when the readers would reject it.
    pub fn region(&self, geo: &str) -> Option<Result<RegionValue, FieldError>> {
        self.regions
            .get(geo)
            .map(|entry| RegionValue::from_stored(&entry.raw))
    }

    /// The valid regions, by geo.
    pub fn valid_regions(&self) -> BTreeMap<String, RegionValue> {
        self.regions
            .iter()
            .filter_map(|(geo, entry)| {
                RegionValue::from_stored(&entry.raw)
                    .ok()
                    .map(|value| (geo.clone(), value))
            })
            .collect()
    }

    /// The valid regions whose `origins` list `origin`, by geo: what a drain or a shed of
    /// `origin` without `--region` covers.
    pub fn regions_listing(&self, origin: &str) -> Vec<String> {
        self.valid_regions()
            .into_iter()
            .filter(|(_, value)| value.lists(origin))
            .map(|(geo, _)| geo)
            .collect()
    }

    /// The policy's value, if the key exists: `Err` when the readers would reject it.
    pub fn policy(&self) -> Option<Result<PolicyValue, FieldError>> {
        self.policy
            .as_ref()
            .map(|entry| PolicyValue::from_stored(&entry.raw))
    }

    /// The capacity of `origin`, if it has a record: `Err` when the record is malformed.
    pub fn capacity(&self, origin: &str) -> Option<Result<Capacity, FieldError>> {
        self.capacities
            .get(origin)
            .map(|entry| Capacity::parse(origin, &entry.raw))
    }

    /// The home geos of every origin with a well-formed capacity record that names some
    /// (`dwctl origin home`), by origin.
    pub fn homes(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.capacities
            .iter()
            .filter_map(|(origin, entry)| {
                Capacity::parse(origin, &entry.raw)
                    .ok()
                    .filter(|capacity| !capacity.home.is_empty())
                    .map(|capacity| (origin.clone(), capacity.home))
            })
            .collect()
    }

    /// The well-formed capacities, by origin (answers per second).
    pub fn valid_capacities(&self) -> BTreeMap<String, f64> {
        self.capacities
            .iter()
            .filter_map(|(origin, entry)| {
                Capacity::parse(origin, &entry.raw)
                    .ok()
                    .map(|capacity| (origin.clone(), capacity.answers_per_s))
            })
            .collect()
    }

    /// The headroom record, if the key exists: `Err` when it is malformed.
    pub fn headroom_record(&self) -> Option<Result<Headroom, FieldError>> {
        self.headroom
            .as_ref()
            .map(|entry| Headroom::parse(&entry.raw))
    }

    /// The guard's headroom: the record's, or [`DEFAULT_HEADROOM`] when there is none or
    /// it is malformed.
    pub fn headroom(&self) -> f64 {
        match self.headroom_record() {
            Some(Ok(record)) => record.headroom,
            _ => DEFAULT_HEADROOM,
        }
    }

    /// The drain record of `origin`, if there is one.
    pub fn drain_record(&self, origin: &str) -> Result<Option<DrainRecord>, Error> {
        self.drains
            .get(origin)
            .map(|entry| DrainRecord::parse(origin, &entry.raw))
            .transpose()
    }
}

/// What a command wants written.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// geo → new value, or `None` to delete the key.
    pub regions: BTreeMap<String, Option<RegionValue>>,
    /// The new policy, when it changes (it is never deleted).
    pub policy: Option<PolicyValue>,
    /// origin → new drain record, or `None` to delete it.
    pub drains: BTreeMap<String, Option<DrainRecord>>,
    /// Also guard that no drain record appeared since the read (a fleet-wide limit on the
    /// number of drained origins depends on it).
    pub guard_drains: bool,
    /// Also guard that no region changed since the read: a drain or restore decides from
    /// every region it read, also those it leaves alone (one that gained the origin
    /// meanwhile must not be skipped).
    pub guard_regions: bool,
    /// Also guard that `policy/global` did not change since the read (when the change does
    /// not write it): a region's bucket assignment is computed for the policy's N
    /// (`crate::bucket_assignment`).
    pub guard_policy: bool,
    /// stage id → new stage record, or `None` to delete the stage key.
    pub stages: BTreeMap<String, Option<Stage>>,
    /// Unguarded puts beside the change (stage audit records under the control prefix).
    pub audit: BTreeMap<String, String>,
    /// Extra guards: full key → the `mod_revision` it must still have (0: absent).
    pub guards: BTreeMap<String, i64>,
    /// Also guard that no stage key changed since the read.
    pub guard_stages: bool,
    /// How open stages follow this change (see `crate::stage`).
    pub stage_edits: StageEdits,
    /// origin → new capacity record, or `None` to delete it.
    pub capacities: BTreeMap<String, Option<Capacity>>,
    /// The guard's headroom: `Some(Some(_))` writes it, `Some(None)` deletes the key (the
    /// default applies again), `None` leaves it.
    pub headroom: Option<Option<Headroom>>,
    /// Registration records to delete (`origin forget`): origin → the record's
    /// `mod_revision` as read, which the delete is guarded on.
    pub forget_registrations: BTreeMap<String, i64>,
    /// What the operator should know about the plan (skipped regions, renormalisations).
    pub notes: Vec<String>,
}

impl Changes {
    /// Nothing to write (notes aside).
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
            && self.policy.is_none()
            && self.drains.is_empty()
            && self.stages.is_empty()
            && self.capacities.is_empty()
            && self.headroom.is_none()
            && self.forget_registrations.is_empty()
    }
}

/// How a change edits the open stages.
#[derive(Debug, Clone, Default)]
pub enum StageEdits {
    /// A direct write: keys it writes leave the stages that touch them.
    #[default]
    Direct,
    /// A drain: the origin leaves the staged values too.
    Drain(Box<DrainRequest>),
    /// A restore of this origin: it comes back into the stages it was drained from.
    Restore(String),
    /// A stage command: it edits stages itself.
    Keep,
}

#[cfg(test)]
impl State {
    /// This state with `changes`' regions and drain records written as the transaction
    /// writes them, each written key at `mod_revision` (planner tests).
    pub(crate) fn with_written(&self, changes: &Changes, mod_revision: i64) -> State {
        let mut next = self.clone();
        for (geo, value) in &changes.regions {
            match value {
                Some(value) => {
                    let raw = value.encode("t").into_bytes();
                    next.regions
                        .insert(geo.clone(), Entry { raw, mod_revision });
                }
                None => {
                    next.regions.remove(geo);
                }
            }
        }
        for (origin, record) in &changes.drains {
            match record {
                Some(record) => {
                    let raw = record.encode().into_bytes();
                    next.drains
                        .insert(origin.clone(), Entry { raw, mod_revision });
                }
                None => {
                    next.drains.remove(origin);
                }
            }
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use crate::fixtures::state;

    #[test]
    fn regions_listing_an_origin_are_the_valid_ones_naming_it() {
        let state = state(&[
            (
                "DE",
                r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#,
            ),
            (
                "AT",
                r#"{"shard":"eu-1","origins":["b","a"],"weight":{"a":1,"b":3}}"#,
            ),
            (
                "FR",
                r#"{"shard":"eu-1","origins":["b"],"weight":{"b":100}}"#,
            ),
            // Names `a`, but the readers reject it: not a region a drain can change.
            (
                "PT",
                r#"{"shard":"eu-1","origins":["a"],"weight":{"zz":1}}"#,
            ),
        ]);
        assert!(state.region("PT").unwrap().is_err());
        assert_eq!(state.regions_listing("a"), ["AT", "DE"]);
        assert_eq!(state.regions_listing("b"), ["AT", "DE", "FR"]);
        assert!(state.regions_listing("c").is_empty());
    }
}
