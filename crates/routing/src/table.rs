//! The compiled routing table: what a snapshot means for routing, built once and then read
//! by any number of threads. How a table is built, from a snapshot or from a file after
//! the previous table, is in [`crate::rebuild`]; how a geo finds its region, in
//! [`crate::geo_index`].

use std::sync::Arc;

use crate::buckets::{Assignment, AssignmentSource, BucketCount, effective_assignment};
use crate::continent::{self, Continent, bucket_of_geo};
use crate::error::Error;
use crate::geo_index::{CountryCode, GeoIndex, OtherGeo};
use crate::keys::DEFAULT_PREFIX;
use crate::pick::{legacy_index, rendezvous_index};
use crate::policy::{PickMode, Policy};
use crate::region::{Region, StoredBuckets};
use crate::snapshot::AppliedStage;

/// A key of the snapshot that is left out of routing, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidKey {
    /// The full key, prefix included.
    pub key: String,
    /// Why its value was refused.
    pub error: Error,
}

/// The memo under which a caller may keep a no-sticky answer ([`Table::memo_key_of_other`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoKey {
    /// The answer of the region at this index (the geo's own region).
    Region(u32),
    /// The answer of this country code (a subdivision without a region of its own).
    Country(CountryCode),
}

/// One answer of [`Table::resolve`].
///
/// `region_index` and `origin_index` identify the (region, origin) pair inside the table
/// that produced it, so a caller can cache per-pair results (say, PHP strings) and find the
/// names again with [`Table::region_shard`] and [`Table::region_origin`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<'t> {
    /// The answering region's shard.
    pub shard: &'t str,
    /// The origin the policy's pick chose among the region's origins.
    pub origin: &'t str,
    /// The answering region's position in the table (see [`Table::regions`]).
    pub region_index: u32,
    /// The origin's position in the region's origins.
    pub origin_index: u32,
}

/// A compiled, immutable routing table.
///
/// The field order is the compiler's: `repr(C)` with the geo index first saved 22
/// instructions per sticky call in dw-routing's own resolve bench, but cost the extension
/// 4-5 per `resolve()` (callgrind, 250 regions), where it is inlined differently.
#[derive(Debug, Clone)]
pub struct Table {
    /// The index into `regions` of each geo.
    geos: GeoIndex,
    revision: u64,
    prefix: String,
    policy: Policy,
    /// Valid regions, in key order. Shared, so that a reload reuses an unchanged region
    /// without copying or validating it again.
    regions: Vec<Arc<Compiled>>,
    /// The geos and the value literals of `regions`, each concatenated in key order;
    /// `texts[i]` says where region i's are. A reload compares the new file with them front
    /// to back, in step, instead of following one heap pointer per region: at thousands
    /// of regions, the cache misses of that chase cost more than the comparing.
    geo_text: String,
    literal_text: String,
    texts: Vec<RegionText>,
    /// The region of the first of `policy.default`, `policy.failover...` that has one.
    fallback: Option<u32>,
    /// The bucket region (`region/continent/<CODE>`) of each continent, by
    /// [`Continent::index`]. Buckets are not in `geos`: a caller's geo never names one.
    buckets: [Option<u32>; 7],
    /// The whole chain answered in advance for every two-character `A-Z0-9` country, by
    /// [`CountryCode::index`]: its own region, else its continent's bucket, else
    /// `fallback` ([`NO_REGION`] when none). So a country costs one load, hit or miss.
    by_country: Box<[u32]>,
    invalid_keys: Vec<InvalidKey>,
    /// The stages the file says its agent applied (informative; routing never reads it).
    stages: Vec<AppliedStage>,
}

/// "No region" in `Table::by_country`.
const NO_REGION: u32 = u32::MAX;

/// A valid region with the value it was compiled from.
#[derive(Debug)]
pub(crate) struct Compiled {
    /// The raw value, to recognise it unchanged when a table is built from a snapshot.
    pub(crate) value: Box<str>,
    pub(crate) region: Region,
    /// The region's effective assignment for `assigned_for` buckets (0: buckets off, and
    /// `None`); `None` too when the region cannot have one (more origins than an
    /// assignment indexes). Set by [`Table::finish`] for the table's N, so that a region
    /// shared with a table of the same N shares its assignment, built once.
    pub(crate) assignment: Option<Assignment>,
    pub(crate) assigned_for: u16,
}

impl Compiled {
    /// A region compiled from `value`, its assignment not computed yet.
    pub(crate) fn new(value: Box<str>, region: Region) -> Compiled {
        Compiled {
            value,
            region,
            assignment: None,
            assigned_for: 0,
        }
    }
}

/// The `stored` argument of [`effective_assignment`] for `region`.
pub(crate) fn stored_of(region: &Region) -> Option<Result<&str, &str>> {
    region.stored_buckets().map(|stored| match stored {
        StoredBuckets::Text(text) => Ok(&**text),
        StoredBuckets::NotText(kind) => Err(*kind),
    })
}

/// Where one region's geo and value literal sit in a table's `geo_text` and
/// `literal_text`, as (start, length). No literal when the table was built from a
/// snapshot rather than read from a file.
#[derive(Debug, Clone, Copy)]
struct RegionText {
    geo: (usize, usize),
    literal: Option<(usize, usize)>,
}

impl Table {
    /// A table in which nothing routes: revision 0, default policy, no regions.
    pub fn empty() -> Table {
        Table {
            revision: 0,
            prefix: DEFAULT_PREFIX.to_owned(),
            policy: Policy::default(),
            regions: Vec::new(),
            geo_text: String::new(),
            literal_text: String::new(),
            texts: Vec::new(),
            geos: GeoIndex::new(),
            fallback: None,
            buckets: [None; 7],
            by_country: vec![NO_REGION; CountryCode::COUNT].into_boxed_slice(),
            invalid_keys: Vec::new(),
            stages: Vec::new(),
        }
    }

    /// A table of no regions yet at `revision` under `prefix`, with room for as many and
    /// as large regions as `previous` has: a reload rarely changes either.
    pub(crate) fn sized_like(revision: u64, prefix: &str, previous: &Table) -> Table {
        Table {
            revision,
            prefix: prefix.to_owned(),
            regions: Vec::with_capacity(previous.regions.len()),
            geo_text: String::with_capacity(previous.geo_text.len()),
            literal_text: String::with_capacity(previous.literal_text.len()),
            texts: Vec::with_capacity(previous.texts.len()),
            geos: GeoIndex::sized_like(&previous.geos),
            policy: Policy::default(),
            fallback: None,
            buckets: [None; 7],
            by_country: vec![NO_REGION; CountryCode::COUNT].into_boxed_slice(),
            invalid_keys: Vec::new(),
            stages: Vec::new(),
        }
    }

    /// Adds a valid region under `geo` (with the JSON string literal its value was read
    /// from, if any), after those added before. A geo of the bucket namespace
    /// (`continent/...`) must name one of the seven continents (the caller checks); its
    /// region becomes that bucket, out of reach of a caller's geo.
    pub(crate) fn push_region(
        &mut self,
        compiled: Arc<Compiled>,
        geo: &str,
        literal: Option<&str>,
    ) {
        let Ok(index) = u32::try_from(self.regions.len()) else {
            // Four billion regions do not fit in memory before this happens.
            return;
        };
        match bucket_of_geo(geo.as_bytes()) {
            None => self.geos.insert(geo.as_bytes(), index),
            Some(Some(continent)) => self.buckets[continent.index()] = Some(index),
            Some(None) => {}
        }
        let geo_span = (self.geo_text.len(), geo.len());
        self.geo_text.push_str(geo);
        let literal_span = literal.map(|literal| {
            let span = (self.literal_text.len(), literal.len());
            self.literal_text.push_str(literal);
            span
        });
        self.texts.push(RegionText {
            geo: geo_span,
            literal: literal_span,
        });
        self.regions.push(compiled);
    }

    /// Records a key left out of routing.
    pub(crate) fn push_invalid_key(&mut self, key: &str, error: Error) {
        self.invalid_keys.push(InvalidKey {
            key: key.to_owned(),
            error,
        });
    }

    /// Puts `policy` in force instead of the defaults.
    pub(crate) fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Finds the fallback region the policy names and answers the chain of every country
    /// code in advance: called once every region is in. A fixed cost (one pass over the
    /// 1296 codes), whatever the number of regions or continents.
    pub(crate) fn finish(&mut self) {
        self.geos.finish();
        self.assign_buckets();
        self.fallback = std::iter::once(&self.policy.default)
            .chain(&self.policy.failover)
            .find_map(|geo| self.policy_geo_region(geo.as_bytes()));
        let mut continent_of: Vec<Option<Continent>> = (0..CountryCode::COUNT)
            .map(|index| continent::builtin_continent_of_code(CountryCode::from_index(index)))
            .collect();
        for (country, continent) in &self.policy.continent_of {
            if let Some(code) = CountryCode::of(country) {
                continent_of[code.index()] = Some(*continent);
            }
        }
        let fallback = self.fallback.unwrap_or(NO_REGION);
        for (index, answer) in self.by_country.iter_mut().enumerate() {
            *answer = self
                .geos
                .get_code(index)
                .or_else(|| self.buckets[continent_of[index]?.index()])
                .unwrap_or(fallback);
        }
    }

    /// Gives every region its effective assignment for the policy's N (none when buckets
    /// are off), computing it only for a region that does not hold one for this N yet: a
    /// region shared with the previous table of the same N keeps its own. A region this
    /// table alone holds is updated in place; one shared with a table of another N is
    /// copied first (a change of N rebuilds every assignment once).
    fn assign_buckets(&mut self) {
        let n = self.policy.buckets;
        let wanted = n.map_or(0, BucketCount::get);
        for compiled in &mut self.regions {
            if compiled.assigned_for == wanted {
                continue;
            }
            let assignment = n.and_then(|n| {
                let region = &compiled.region;
                effective_assignment(stored_of(region), region.listed_weights(), n)
                    .ok()
                    .map(|(assignment, _)| assignment)
            });
            match Arc::get_mut(compiled) {
                Some(own) => {
                    own.assignment = assignment;
                    own.assigned_for = wanted;
                }
                None => {
                    *compiled = Arc::new(Compiled {
                        value: compiled.value.clone(),
                        region: compiled.region.clone(),
                        assignment,
                        assigned_for: wanted,
                    });
                }
            }
        }
    }

    /// The region a policy geo (`default`, a `failover` entry) names: a bucket for
    /// `continent/<CODE>`, else the geo's own region.
    pub(crate) fn policy_geo_region(&self, geo: &[u8]) -> Option<u32> {
        match bucket_of_geo(geo) {
            Some(continent) => self.buckets[continent?.index()],
            None => self.geos.get(geo),
        }
    }

    /// The bucket region of `continent`, if it has a valid one.
    pub fn bucket(&self, continent: Continent) -> Option<u32> {
        self.buckets[continent.index()]
    }

    /// The continent the chain uses for `country` (a `^[A-Z]{2}$` code), and whether it
    /// comes from `policy.continent_of` (true) or the built-in table (false).
    pub fn continent_of(&self, country: &[u8]) -> Option<(Continent, bool)> {
        let overridden = self
            .policy
            .continent_of
            .iter()
            .rev()
            .find(|(code, _)| code[..] == *country);
        match overridden {
            Some((_, continent)) => Some((*continent, true)),
            None => continent::builtin_continent(country).map(|continent| (continent, false)),
        }
    }

    /// The compiled region at `index`, below [`Table::region_count`].
    pub(crate) fn compiled_at(&self, index: usize) -> &Arc<Compiled> {
        &self.regions[index]
    }

    /// The geo of the region at `index`, below [`Table::region_count`].
    pub(crate) fn geo_at(&self, index: usize) -> &str {
        let (start, len) = self.texts[index].geo;
        &self.geo_text[start..start + len]
    }

    /// The JSON string literal the region at `index` was read from, if it was read from a
    /// file.
    pub(crate) fn literal_at(&self, index: usize) -> Option<&str> {
        let (start, len) = self.texts[index].literal?;
        Some(&self.literal_text[start..start + len])
    }

    /// The etcd revision the snapshot reflects.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The stages the snapshot's agent applied for its node (id and revision of each);
    /// empty when none. Routing never reads it: the values in the table already are the
    /// node's effective ones.
    pub fn stages(&self) -> &[AppliedStage] {
        &self.stages
    }

    /// This table, naming `stages` as applied.
    pub(crate) fn with_stages(mut self, stages: Vec<AppliedStage>) -> Table {
        self.stages = stages;
        self
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

    /// The index of `geo`'s valid region (as in [`Route::region_index`]), if any: its own
    /// key's, never a bucket's.
    #[inline(always)]
    pub fn region_index(&self, geo: &[u8]) -> Option<u32> {
        self.geos.get(geo)
    }

    /// The valid region of `geo`, if any.
    pub fn region(&self, geo: &[u8]) -> Option<&Region> {
        let index = self.geos.get(geo)?;
        Some(&self.regions[index as usize].region)
    }

    /// Every valid region with its geo, in key order; the position is the region index.
    pub fn regions(&self) -> impl Iterator<Item = (&str, &Region)> {
        self.regions
            .iter()
            .enumerate()
            .map(|(index, compiled)| (self.geo_at(index), &compiled.region))
    }

    /// Visitor buckets' N in force (the policy's `buckets`), `None` when off.
    pub fn buckets(&self) -> Option<BucketCount> {
        self.policy.buckets
    }

    /// The effective assignment of the region at `region_index` for the table's N (see
    /// [`effective_assignment`]): `None` when buckets are off, or when the region lists
    /// more origins than an assignment indexes.
    pub fn assignment(&self, region_index: u32) -> Option<&Assignment> {
        self.regions.get(region_index as usize)?.assignment.as_ref()
    }

    /// Where the assignment of the region at `region_index` comes from, for the table's N
    /// (computed again: for explanations and reports, off the request path). `None` as
    /// [`Table::assignment`].
    pub fn assignment_source(&self, region_index: u32) -> Option<AssignmentSource> {
        let region = &self.regions.get(region_index as usize)?.region;
        effective_assignment(stored_of(region), region.listed_weights(), self.buckets()?)
            .ok()
            .map(|(_, source)| source)
    }

    /// The regions whose stored `buckets` field is ignored for the table's N (their
    /// default assignment answers), with why, in key order: their geo and the error.
    /// Empty when buckets are off. Computed on each call, for reports.
    pub fn ignored_assignments(&self) -> Vec<(&str, crate::Error)> {
        (0..self.regions.len())
            .filter_map(|index| match self.assignment_source(index as u32)? {
                AssignmentSource::DefaultStoredIgnored(error) => Some((self.geo_at(index), error)),
                _ => None,
            })
            .collect()
    }

    /// The region that answers `geo` (the chain of [`Table::resolve`], without the pick),
    /// if any.
    pub fn answering_region(&self, geo: &[u8]) -> Option<u32> {
        match CountryCode::of(geo) {
            Some(code) => self.chain_of_code(code),
            None => self.chain_of_other(geo).map(|(index, _)| index),
        }
    }

    /// How many of the N buckets each listed origin of `geo`'s answering region has, in
    /// list order, with that region's index: each origin's exact share of `geo`'s
    /// bucketed visitors (capacity prediction). `None` when buckets are off, no region
    /// answers, or it has no assignment.
    pub fn bucket_counts(&self, geo: &[u8]) -> Option<(u32, Vec<u16>)> {
        let region_index = self.answering_region(geo)?;
        let region = self.region_at(region_index)?;
        let counts = self
            .assignment(region_index)?
            .counts(region.origins().len());
        Some((region_index, counts))
    }

    /// [`Table::resolve`] for a visitor that may carry a bucket: a sticky key wins where
    /// given; else a `bucket` below the table's N picks the answering region's origin by
    /// that region's assignment; else the country's answer, exactly as
    /// `resolve(geo, None)`. A bucket while buckets are off, at or past N, or for a region
    /// without an assignment, answers as without a bucket (fail safe). The chain (which
    /// region answers) is the same in every case. No allocation.
    #[inline(always)]
    pub fn resolve_bucketed(
        &self,
        geo: &[u8],
        sticky_key: Option<&[u8]>,
        bucket: Option<u64>,
    ) -> Option<Route<'_>> {
        let (Some(bucket), None) = (bucket, sticky_key) else {
            return self.resolve(geo, sticky_key);
        };
        let region_index = self.answering_region(geo)?;
        let compiled = self.regions.get(region_index as usize)?;
        let Some(origin_index) = u16::try_from(bucket)
            .ok()
            .and_then(|bucket| compiled.assignment.as_ref()?.origin_of(bucket))
        else {
            return self.resolve(geo, None);
        };
        Some(Route {
            shard: compiled.region.shard(),
            origin: compiled.region.origins().get(usize::from(origin_index))?,
            region_index,
            origin_index: u32::from(origin_index),
        })
    }

    /// Whether [`Table::resolve_bucketed`] answers `geo` with `bucket` by an assignment
    /// (rather than as without a bucket): buckets on, `bucket` below N, and the answering
    /// region has an assignment.
    pub fn bucket_applies(&self, geo: &[u8], bucket: u64) -> bool {
        self.buckets().is_some_and(|n| bucket < u64::from(n.get()))
            && self
                .answering_region(geo)
                .is_some_and(|index| self.assignment(index).is_some())
    }

    /// Routes a visitor through the chain of docs/routing.md: for a subdivision `CC-SUB`
    /// its own region, then `CC`'s; for a country `CC` its own region, then its
    /// continent's bucket; for any other geo its own region; then the first of
    /// `policy.default`, `policy.failover...` that has one. The origin is the policy's
    /// pick for the hash key: `sticky_key`, else the subdivision when its own region
    /// answers, else `CC` (the geo itself when it is not of those shapes). `None` when no
    /// candidate has a region: the caller then fails open to its configured fallback.
    ///
    /// Any bytes are a valid geo or key (empty, long, NUL, not UTF-8). No allocation.
    #[inline(always)]
    pub fn resolve(&self, geo: &[u8], sticky_key: Option<&[u8]>) -> Option<Route<'_>> {
        let (region_index, hash_key) = match CountryCode::of(geo) {
            Some(code) => (self.chain_of_code(code)?, geo),
            None => self.chain_of_other(geo)?,
        };
        let region = &self.regions.get(region_index as usize)?.region;
        let hash_key = sticky_key.unwrap_or(hash_key);
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

    /// The answering region of a two-character `A-Z0-9` country.
    #[inline(always)]
    fn chain_of_code(&self, code: CountryCode) -> Option<u32> {
        Some(*self.by_country.get(code.index())?).filter(|&index| index != NO_REGION)
    }

    /// The answering region and hash key of any other geo: a subdivision, or an opaque geo.
    #[inline(never)]
    fn chain_of_other<'g>(&self, geo: &'g [u8]) -> Option<(u32, &'g [u8])> {
        match self.geos.classify_other(geo) {
            OtherGeo::Own(own) => Some((own, geo)),
            // A subdivision's first two bytes are its country.
            OtherGeo::SubdivisionOf(code) => Some((self.chain_of_code(code)?, geo.get(..2)?)),
            OtherGeo::Opaque => Some((self.fallback?, geo)),
        }
    }

    /// Under which memo a caller may keep the answer of `resolve(geo)` without a sticky
    /// key, for a `geo` that is not a two-character country code (those are memoised by
    /// [`CountryCode`]): its own region's, or for a subdivision without a region of its
    /// own its country's, since it then answers exactly as the country does (same chain,
    /// same hash key). None for an opaque geo without a region. No hashing for a
    /// subdivision.
    #[inline]
    pub fn memo_key_of_other(&self, geo: &[u8]) -> Option<MemoKey> {
        match self.geos.classify_other(geo) {
            OtherGeo::Own(region) => Some(MemoKey::Region(region)),
            OtherGeo::SubdivisionOf(code) => Some(MemoKey::Country(code)),
            OtherGeo::Opaque => None,
        }
    }

    /// The shard of the region at `region_index` (from a [`Route`] of this table); empty
    /// for an index this table does not have.
    pub fn region_shard(&self, region_index: u32) -> &str {
        self.regions
            .get(region_index as usize)
            .map_or("", |compiled| compiled.region.shard())
    }

    /// The origin at `origin_index` of the region at `region_index` (from a [`Route`] of
    /// this table); empty for indexes this table does not have.
    pub fn region_origin(&self, region_index: u32, origin_index: u32) -> &str {
        self.regions
            .get(region_index as usize)
            .and_then(|compiled| compiled.region.origins().get(origin_index as usize))
            .map_or("", String::as_str)
    }

    /// The region at `region_index` (a [`Route`]'s, or any below [`Table::region_count`]).
    pub fn region_at(&self, region_index: u32) -> Option<&Region> {
        self.regions
            .get(region_index as usize)
            .map(|compiled| &compiled.region)
    }
}

impl Default for Table {
    fn default() -> Table {
        Table::empty()
    }
}
