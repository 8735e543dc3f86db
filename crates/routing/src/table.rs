//! The compiled routing table: what a snapshot means for routing, built once and then read
//! by any number of threads.

use rustc_hash::FxHashMap;

use crate::pick::{legacy_index, rendezvous_index};
use crate::{Error, PickMode, Policy, Region, Snapshot};

const REGION_KIND: &str = "region/";
const POLICY_KEY: &str = "policy/global";

/// A key of the snapshot that is left out of routing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidKey {
    /// The full key, prefix included.
    pub key: String,
    pub error: Error,
}

/// One answer of [`Table::resolve`].
///
/// `region_index` and `origin_index` identify the (region, origin) pair inside the table
/// that produced it, so a caller can cache per-pair results (say, PHP strings) and find the
/// names again with [`Table::region_shard`] and [`Table::region_origin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'t> {
    pub shard: &'t str,
    pub origin: &'t str,
    pub region_index: u32,
    pub origin_index: u32,
}

/// A compiled, immutable routing table.
#[derive(Debug, Clone)]
pub struct Table {
    revision: u64,
    prefix: String,
    policy: Policy,
    /// Valid regions, in key order.
    regions: Vec<Region>,
    /// `geos[i]` is the geo of `regions[i]`.
    geos: Vec<String>,
    /// Geo bytes to index into `regions`. FxHash: the keys come from configuration, and a
    /// visitor's country only probes, so a fast unkeyed hash is safe here.
    by_geo: FxHashMap<Box<[u8]>, u32>,
    /// The longest geo: a longer country cannot match, so it is not even hashed.
    longest_geo: usize,
    /// The region of the first of `policy.default`, `policy.failover...` that has one.
    fallback: Option<u32>,
    invalid_keys: Vec<InvalidKey>,
}

impl Table {
    /// A table in which nothing routes: revision 0, default policy, no regions.
    pub fn empty() -> Table {
        Table {
            revision: 0,
            prefix: crate::DEFAULT_PREFIX.to_owned(),
            policy: Policy::default(),
            regions: Vec::new(),
            geos: Vec::new(),
            by_geo: FxHashMap::default(),
            longest_geo: 0,
            fallback: None,
            invalid_keys: Vec::new(),
        }
    }

    /// Compiles a snapshot. Never fails: an invalid region or policy is left out and
    /// recorded in [`Table::invalid_keys`]; keys outside the prefix or of other kinds
    /// (`origin/...`) are ignored.
    pub fn from_snapshot(snapshot: &Snapshot) -> Table {
        let mut table = Table::empty();
        table.revision = snapshot.revision;
        table.prefix.clone_from(&snapshot.prefix);

        for (key, value) in &snapshot.kvs {
            let Some(relative) = key.strip_prefix(snapshot.prefix.as_str()) else {
                continue;
            };
            if let Some(geo) = relative.strip_prefix(REGION_KIND) {
                let region = if geo.is_empty() {
                    Err(Error::Region {
                        field: "geo",
                        reason: "the key names no geo".into(),
                    })
                } else {
                    Region::parse(value.as_bytes())
                };
                match region {
                    Ok(region) => table.push_region(geo, region),
                    Err(error) => table.invalid_keys.push(InvalidKey {
                        key: key.clone(),
                        error,
                    }),
                }
            } else if relative == POLICY_KEY {
                match Policy::parse(value.as_bytes()) {
                    Ok(policy) => table.policy = policy,
                    Err(error) => table.invalid_keys.push(InvalidKey {
                        key: key.clone(),
                        error,
                    }),
                }
            }
        }

        table.fallback = std::iter::once(&table.policy.default)
            .chain(&table.policy.failover)
            .find_map(|geo| table.by_geo.get(geo.as_bytes()).copied());
        table
    }

    /// Parses snapshot bytes and compiles them. Fails only when the file as a whole is
    /// unreadable ([`Error::Snapshot`]).
    pub fn parse(bytes: &[u8]) -> Result<Table, Error> {
        Ok(Table::from_snapshot(&Snapshot::parse(bytes)?))
    }

    fn push_region(&mut self, geo: &str, region: Region) {
        let Ok(index) = u32::try_from(self.regions.len()) else {
            // Four billion regions do not fit in memory before this happens.
            return;
        };
        self.by_geo.insert(geo.as_bytes().into(), index);
        self.longest_geo = self.longest_geo.max(geo.len());
        self.geos.push(geo.to_owned());
        self.regions.push(region);
    }

    /// The etcd revision the snapshot reflects.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The prefix the snapshot's keys live under.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The policy in force: the snapshot's if valid, else the defaults.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// How many regions are valid (and so can answer).
    pub fn region_count(&self) -> usize {
        self.regions.len()
    }

    /// The keys left out of routing: invalid regions and an invalid policy, in key order.
    pub fn invalid_keys(&self) -> &[InvalidKey] {
        &self.invalid_keys
    }

    /// The valid region of `geo`, if any.
    pub fn region(&self, geo: &[u8]) -> Option<&Region> {
        self.by_geo
            .get(geo)
            .map(|&index| &self.regions[index as usize])
    }

    /// Every valid region with its geo, in key order; the position is the region index.
    pub fn regions(&self) -> impl Iterator<Item = (&str, &Region)> {
        self.geos.iter().map(String::as_str).zip(&self.regions)
    }

    /// Routes a visitor: the first of `country`, `policy.default`, `policy.failover...` that
    /// has a valid region answers, with the origin the policy's pick chooses for
    /// `sticky_key`, or `country` when there is none. `None` when no candidate has a region:
    /// the caller then fails open to its configured fallback.
    ///
    /// Any bytes are a valid country or key (empty, long, NUL, not UTF-8). No allocation.
    pub fn resolve(&self, country: &[u8], sticky_key: Option<&[u8]>) -> Option<Route<'_>> {
        let own = if country.len() <= self.longest_geo {
            self.by_geo.get(country).copied()
        } else {
            None
        };
        let region_index = own.or(self.fallback)?;
        let region = self.regions.get(region_index as usize)?;
        let hash_key = sticky_key.unwrap_or(country);
        let origin_index = match self.policy.pick {
            PickMode::Legacy => legacy_index(region, hash_key),
            PickMode::Rendezvous => rendezvous_index(region, hash_key),
        };
        Some(Route {
            shard: region.shard(),
            origin: region.origins().get(origin_index)?,
            region_index,
            // Origins come from one JSON value in memory; their count fits in u32.
            origin_index: origin_index as u32,
        })
    }

    /// The shard of the region at `region_index` (from a [`Route`] of this table); empty
    /// for an index this table does not have.
    pub fn region_shard(&self, region_index: u32) -> &str {
        self.regions
            .get(region_index as usize)
            .map_or("", Region::shard)
    }

    /// The origin at `origin_index` of the region at `region_index` (from a [`Route`] of
    /// this table); empty for indexes this table does not have.
    pub fn region_origin(&self, region_index: u32, origin_index: u32) -> &str {
        self.regions
            .get(region_index as usize)
            .and_then(|region| region.origins().get(origin_index as usize))
            .map_or("", String::as_str)
    }

    /// The region at `region_index` (from a [`Route`] of this table).
    pub fn region_at(&self, region_index: u32) -> Option<&Region> {
        self.regions.get(region_index as usize)
    }
}

impl Default for Table {
    fn default() -> Table {
        Table::empty()
    }
}
