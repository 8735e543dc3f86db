//! Origins as etcd knows them at one revision (dwctl's `ops::origin` reads them): live
//! keys with their leases, registration markers, drain records and capacities, for
//! `origin list`, `traffic` and `rebalance`.

use std::collections::{BTreeMap, BTreeSet};

use crate::capacity::DEFAULT_HEADROOM;
use crate::drain_record::DrainRecord;

/// Origins as etcd knows them at one revision.
#[derive(Debug, Clone)]
pub struct OriginListing {
    /// The revision of the listing.
    pub revision: i64,
    /// id → (value, lease).
    pub live: BTreeMap<String, (Vec<u8>, i64)>,
    /// Ids with a registration marker.
    pub registered: BTreeSet<String>,
    /// Ids with a drain record (records that do not parse are in `malformed_drains`).
    pub drains: BTreeMap<String, DrainRecord>,
    /// Ids whose drain record does not parse, with why (`dwctl drain --repair ID`).
    pub malformed_drains: BTreeMap<String, String>,
    /// id → capacity, answers per second (`dwctl origin capacity`).
    pub capacities: BTreeMap<String, f64>,
    /// id → its home geos (`dwctl origin home`), for origins that have some.
    pub homes: BTreeMap<String, BTreeSet<String>>,
    /// Ids whose capacity record does not parse, with why.
    pub malformed_capacities: BTreeMap<String, String>,
    /// The guard's headroom (its default when none is set).
    pub headroom: f64,
    /// Why the capacities could not be read (a role without the grant), when so.
    pub capacities_unreadable: Option<String>,
}

impl Default for OriginListing {
    /// Nothing listed, the default headroom.
    fn default() -> Self {
        OriginListing {
            revision: 0,
            live: BTreeMap::new(),
            registered: BTreeSet::new(),
            drains: BTreeMap::new(),
            malformed_drains: BTreeMap::new(),
            capacities: BTreeMap::new(),
            homes: BTreeMap::new(),
            malformed_capacities: BTreeMap::new(),
            headroom: DEFAULT_HEADROOM,
            capacities_unreadable: None,
        }
    }
}
