//! The routing state as read and the changes a command wants written: plain types, below
//! `state` (which reads and commits them), the planners (`drain`, `stages`) and the
//! commands, so that none of those imports another to name them.

use std::collections::BTreeMap;

use etcd_client::KeyValue;

use crate::error::{Error, FieldError};
use crate::plan::drain_record::{DrainRecord, DrainRequest};
use crate::plan::value::{PolicyValue, RegionValue};
use dw_routing::stage::Stage;

/// A key's raw value and the revision it was last modified at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value as stored.
    pub raw: Vec<u8>,
    /// The revision of its last change (what a guarded write compares).
    pub mod_revision: i64,
}

impl Entry {
    pub(crate) fn from_kv(kv: &KeyValue) -> Entry {
        Entry {
            raw: kv.value().to_vec(),
            mod_revision: kv.mod_revision(),
        }
    }
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

    /// The policy's value, if the key exists: `Err` when the readers would reject it.
    pub fn policy(&self) -> Option<Result<PolicyValue, FieldError>> {
        self.policy
            .as_ref()
            .map(|entry| PolicyValue::from_stored(&entry.raw))
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
    /// stage id → new stage record, or `None` to delete the stage key.
    pub stages: BTreeMap<String, Option<Stage>>,
    /// Unguarded puts beside the change (stage audit records under the control prefix).
    pub audit: BTreeMap<String, String>,
    /// Extra guards: full key → the `mod_revision` it must still have (0: absent).
    pub guards: BTreeMap<String, i64>,
    /// Also guard that no stage key changed since the read.
    pub guard_stages: bool,
    /// How open stages follow this change (see `crate::plan::stage`).
    pub stage_edits: StageEdits,
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
