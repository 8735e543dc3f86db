//! The prediction: each origin's answers per second under a table, from the routing core
//! itself.
//!
//! Each geo is resolved once with [`Table::resolve`] (the chain: own region, continent,
//! default, failover). Its plain traffic lands wholly on the origin the pick gives for the
//! geo's hash key (the geo, or a subdivision's country when the subdivision has no region
//! of its own: the key `resolve` hashes without a sticky key). Its sticky traffic spreads
//! over the answering region's origins by [`dw_routing::pick_shares`]. Its bucketed
//! traffic (a visitor bucket, no sticky key) spreads by the answering region's assignment
//! when the table's policy has N buckets: each origin gets its buckets / N, the exact
//! share of uniformly drawn buckets (`dw_routing::buckets::effective_assignment`, the
//! routers' own); with buckets off the routers ignore the bucket, so it lands as plain
//! traffic does. A geo no region answers is fail-open on every node: its traffic is the
//! load's `no_route` line.

use std::collections::{BTreeMap, HashMap};

use dw_routing::buckets::{BucketCount, effective_assignment};
use dw_routing::{
    PickMode, Region, StoredBuckets, Table, legacy_pick, pick_shares, rendezvous_pick,
};

use crate::edit::RegionEdit;
use crate::error::{Error, shown};
use crate::traffic::{GeoRate, Traffic, Unplaced};

/// Where one geo's traffic goes under a table, answers per second.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GeoLoad {
    /// The geo's traffic, as given.
    pub rate: GeoRate,
    /// Its plain traffic per origin (one origin, unless nodes run different tables).
    pub plain: BTreeMap<String, f64>,
    /// Its sticky traffic per origin of the answering region.
    pub sticky: BTreeMap<String, f64>,
    /// Its bucketed traffic per origin of the answering region (on the plain pick's
    /// origin while the policy has no buckets).
    pub bucket: BTreeMap<String, f64>,
    /// Its traffic no region answers (fail-open).
    pub no_route: f64,
}

/// Each origin's predicted load under a table, and where every geo goes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Load {
    /// Answers per second per origin; every listed origin of an answering region appears,
    /// with 0 when no traffic lands on it.
    pub origins: BTreeMap<String, f64>,
    /// Every geo of the traffic.
    pub geos: BTreeMap<String, GeoLoad>,
    /// The traffic's unplaced lines (other, overflow, fail-open answers counted).
    pub unplaced: Unplaced,
    /// Traffic of geos that no region answers under this table: fail-open, predicted.
    pub no_route: f64,
    /// Every answer per second: origins, `no_route` and `unplaced`.
    pub total: f64,
    /// True when nodes run different tables (staged values) but the traffic has no
    /// per-node rates: each node was assumed to see the fleet's mix of geos, in
    /// proportion to the number of nodes.
    pub assumed_fleet_mix: bool,
}

impl Load {
    /// The load of `origin` (0 when it gets none).
    pub fn of(&self, origin: &str) -> f64 {
        self.origins.get(origin).copied().unwrap_or(0.0)
    }

    /// The share of all traffic that no plan can place: unplaced lines and `no_route`.
    pub fn unplaced_share(&self) -> f64 {
        if self.total > 0.0 {
            (self.unplaced.total() + self.no_route) / self.total
        } else {
            0.0
        }
    }
}

/// Predicts each origin's load under `table` for `traffic` (fleet totals; a per-node
/// traffic is summed: every node runs `table`).
///
/// ```
/// use dw_capacity::{Traffic, predict};
/// use dw_routing::Table;
///
/// let table = Table::parse(br#"{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{
///     "/dw/routing/region/DE":"{\"shard\":\"eu-1\",\"origins\":[\"a\",\"b\"],\"weight\":{\"a\":1,\"b\":1}}"}}"#)?;
/// let traffic = Traffic::parse(br#"{"geos":{"DE":{"plain":10,"sticky":100}}}"#)?;
/// let load = predict(&table, &traffic);
/// // The plain 10/s land on one origin; the sticky 100/s split by the exact shares.
/// assert!((load.of("a") + load.of("b") - 110.0).abs() < 1e-9);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn predict(table: &Table, traffic: &Traffic) -> Load {
    let view = View::new(table);
    let mut load = Load::default();
    view.predict_into(traffic.geos(), 1.0, &mut load);
    load.finish(traffic.unplaced());
    load
}

/// [`predict`] with some regions' values replaced by a plan's (`edits`, by geo). An edit
/// must name a valid region of the table and keep it valid, so that the chain is the same
/// (a plan that deletes or adds regions builds the table after it and calls [`predict`]).
pub fn predict_edited(
    table: &Table,
    traffic: &Traffic,
    edits: &[RegionEdit],
) -> Result<Load, Error> {
    let view = View::with_edits(table, edits)?;
    let mut load = Load::default();
    view.predict_into(traffic.geos(), 1.0, &mut load);
    load.finish(traffic.unplaced());
    Ok(load)
}

/// The tables a fleet runs when staged values make some nodes differ.
#[derive(Debug, Clone)]
pub struct NodeTables<'t> {
    /// The table of every node not in `nodes`.
    pub fleet: &'t Table,
    /// The nodes whose table differs (their cohort's staged values applied).
    pub nodes: BTreeMap<String, &'t Table>,
    /// How many nodes the fleet has, `nodes` included: with fleet totals only, each node
    /// is taken to answer `1 / fleet_size` of every geo.
    pub fleet_size: usize,
}

/// Predicts the load of a fleet whose nodes run different tables. With per-node traffic,
/// each node's geos go through its own table. With fleet totals only, each node is
/// assumed to see the fleet's mix: a table run by `k` of `fleet_size` nodes gets `k /
/// fleet_size` of every geo, and the result says so ([`Load::assumed_fleet_mix`]).
pub fn predict_nodes(tables: &NodeTables<'_>, traffic: &Traffic) -> Result<Load, Error> {
    let mut load = Load::default();
    match traffic.nodes() {
        Some(nodes) => {
            // Nodes sharing a table are summed first: one prediction per distinct table.
            let mut groups: Vec<(&Table, BTreeMap<String, GeoRate>)> = Vec::new();
            for (node, geos) in nodes {
                let table = tables.nodes.get(node).copied().unwrap_or(tables.fleet);
                let group = match groups.iter().position(|(t, _)| std::ptr::eq(*t, table)) {
                    Some(index) => &mut groups[index].1,
                    None => {
                        groups.push((table, BTreeMap::new()));
                        &mut groups.last_mut().expect("just pushed").1
                    }
                };
                for (geo, rate) in geos {
                    let sum = group.entry(geo.clone()).or_default();
                    sum.plain += rate.plain;
                    sum.sticky += rate.sticky;
                    sum.bucket += rate.bucket;
                }
            }
            for (table, geos) in &groups {
                View::new(table).predict_into(geos, 1.0, &mut load);
            }
        }
        None => {
            if tables.fleet_size == 0 || tables.nodes.len() > tables.fleet_size {
                return Err(Error::invalid(
                    "fleet_size",
                    format!(
                        "{} nodes run staged tables but the fleet has {}",
                        tables.nodes.len(),
                        tables.fleet_size
                    ),
                ));
            }
            let mut groups: Vec<(&Table, usize)> = vec![(tables.fleet, 0)];
            for table in tables.nodes.values() {
                match groups.iter().position(|(t, _)| std::ptr::eq(*t, *table)) {
                    Some(index) => groups[index].1 += 1,
                    None => groups.push((table, 1)),
                }
            }
            groups[0].1 += tables.fleet_size - tables.nodes.len();
            for (table, count) in groups {
                if count > 0 {
                    let factor = count as f64 / tables.fleet_size as f64;
                    View::new(table).predict_into(traffic.geos(), factor, &mut load);
                }
            }
            load.assumed_fleet_mix = !tables.nodes.is_empty();
        }
    }
    load.finish(traffic.unplaced());
    Ok(load)
}

/// Predicts the load of a fleet where a `share` of the nodes (0 to 1) runs `staged` and the
/// rest `fleet`, from fleet totals: each node is assumed to see the fleet's mix, so
/// `staged` gets `share` of every geo and `fleet` the rest; the result says so
/// ([`Load::assumed_fleet_mix`], when `share` is above 0). What a stage's cohort given as
/// a share of the fleet does when the traffic has no per-node rates.
///
/// ```
/// use dw_capacity::{Traffic, predict_share};
/// use dw_routing::Table;
///
/// let fleet = Table::parse(br#"{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{
///     "/dw/routing/region/US":"{\"shard\":\"s\",\"origins\":[\"a\"],\"weight\":{\"a\":1}}"}}"#)?;
/// let staged = Table::parse(br#"{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{
///     "/dw/routing/region/US":"{\"shard\":\"s\",\"origins\":[\"b\"],\"weight\":{\"b\":1}}"}}"#)?;
/// let traffic = Traffic::parse(br#"{"geos":{"US":100}}"#)?;
/// let load = predict_share(&fleet, &staged, 0.25, &traffic)?;
/// assert_eq!((load.of("a"), load.of("b")), (75.0, 25.0));
/// assert!(load.assumed_fleet_mix);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn predict_share(
    fleet: &Table,
    staged: &Table,
    share: f64,
    traffic: &Traffic,
) -> Result<Load, Error> {
    if !(0.0..=1.0).contains(&share) {
        return Err(Error::invalid(
            "share",
            format!("{share} is not a share of the fleet (0 to 1)"),
        ));
    }
    let mut load = Load::default();
    if share < 1.0 {
        View::new(fleet).predict_into(traffic.geos(), 1.0 - share, &mut load);
    }
    if share > 0.0 {
        View::new(staged).predict_into(traffic.geos(), share, &mut load);
    }
    load.assumed_fleet_mix = share > 0.0;
    load.finish(traffic.unplaced());
    Ok(load)
}

impl Load {
    fn finish(&mut self, unplaced: &Unplaced) {
        self.unplaced = *unplaced;
        self.total = self.origins.values().sum::<f64>() + self.no_route + self.unplaced.total();
    }
}

/// The hash key `resolve(geo, None)` picks with: the geo, except a subdivision without a
/// region of its own, which hashes as its country.
pub(crate) fn hash_key<'g>(table: &Table, geo: &'g [u8]) -> &'g [u8] {
    match dw_routing::subdivision_country(geo) {
        Some(country) if table.region_index(geo).is_none() => country,
        _ => geo,
    }
}

/// One geo placed on its answering region.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Placed<'a> {
    pub(crate) geo: &'a str,
    pub(crate) key: &'a [u8],
    pub(crate) rate: GeoRate,
}

/// The geos each region answers, by region index.
pub(crate) type ByRegion<'a> = BTreeMap<u32, Vec<Placed<'a>>>;

/// A table with some regions replaced by planned values, and each region's geo.
pub(crate) struct View<'t> {
    pub(crate) table: &'t Table,
    pub(crate) mode: PickMode,
    /// The policy's N (`None`: buckets off).
    pub(crate) buckets: Option<BucketCount>,
    pub(crate) region_geos: Vec<&'t str>,
    pub(crate) overrides: HashMap<u32, Region>,
}

impl<'t> View<'t> {
    pub(crate) fn new(table: &'t Table) -> View<'t> {
        View {
            table,
            mode: table.policy().pick,
            buckets: table.buckets(),
            region_geos: table.regions().map(|(geo, _)| geo).collect(),
            overrides: HashMap::new(),
        }
    }

    pub(crate) fn with_edits(table: &'t Table, edits: &[RegionEdit]) -> Result<View<'t>, Error> {
        let mut view = View::new(table);
        for edit in edits {
            view.set(edit)?;
        }
        Ok(view)
    }

    /// Replaces a region's value by `edit`'s.
    pub(crate) fn set(&mut self, edit: &RegionEdit) -> Result<(), Error> {
        let index = self.index_of(&edit.geo).ok_or_else(|| {
            Error::invalid(
                "region",
                format!("{} is not a valid region of the table", shown(&edit.geo)),
            )
        })?;
        let region = edit.region()?;
        self.overrides.insert(index, region);
        Ok(())
    }

    /// The index of the region whose key is `region/<geo>` (buckets included).
    pub(crate) fn index_of(&self, geo: &str) -> Option<u32> {
        match dw_routing::bucket_of_geo(geo.as_bytes()) {
            Some(continent) => self.table.bucket(continent?),
            None => self.table.region_index(geo.as_bytes()),
        }
    }

    pub(crate) fn region(&self, index: u32) -> Option<&Region> {
        self.overrides
            .get(&index)
            .or_else(|| self.table.region_at(index))
    }

    /// Where each geo lands: its answering region, or no route.
    pub(crate) fn placement<'a>(
        &self,
        geos: &'a BTreeMap<String, GeoRate>,
    ) -> (ByRegion<'a>, Vec<(&'a str, GeoRate)>) {
        let mut by_region: ByRegion<'a> = BTreeMap::new();
        let mut no_route = Vec::new();
        for (geo, rate) in geos {
            match self.table.resolve(geo.as_bytes(), None) {
                Some(route) => by_region
                    .entry(route.region_index)
                    .or_default()
                    .push(Placed {
                        geo,
                        key: hash_key(self.table, geo.as_bytes()),
                        rate: *rate,
                    }),
                None => no_route.push((geo.as_str(), *rate)),
            }
        }
        (by_region, no_route)
    }

    fn predict_into(&self, geos: &BTreeMap<String, GeoRate>, factor: f64, load: &mut Load) {
        let (by_region, no_route) = self.placement(geos);
        for (index, placed) in &by_region {
            let Some(region) = self.region(*index) else {
                continue;
            };
            add_region(load, region, self.mode, self.buckets, placed, factor);
        }
        for (geo, rate) in no_route {
            let entry = load.geos.entry(geo.to_owned()).or_default();
            entry.rate.plain += rate.plain * factor;
            entry.rate.sticky += rate.sticky * factor;
            entry.rate.bucket += rate.bucket * factor;
            entry.no_route += rate.total() * factor;
            load.no_route += rate.total() * factor;
        }
    }
}

/// The origin index the pick gives `key` in `region`.
pub(crate) fn pick_index(region: &Region, mode: PickMode, key: &[u8]) -> usize {
    let origin = match mode {
        PickMode::Legacy => legacy_pick(region, key),
        PickMode::Rendezvous => rendezvous_pick(region, key),
    };
    region
        .origins()
        .iter()
        .position(|name| name == origin)
        .unwrap_or(0)
}

/// Each origin's share of a region's bucketed traffic at N: its buckets / N in the
/// assignment the routers use (`effective_assignment` of the value's stored `buckets`,
/// listed weights and N). `None` when buckets are off or the region has no assignment
/// (more origins than an assignment indexes): the bucket is then ignored, as plain.
pub(crate) fn bucket_shares(region: &Region, buckets: Option<BucketCount>) -> Option<Vec<f64>> {
    let n = buckets?;
    let stored = region.stored_buckets().map(|stored| match stored {
        StoredBuckets::Text(text) => Ok(&**text),
        StoredBuckets::NotText(kind) => Err(*kind),
    });
    let (assignment, _) = effective_assignment(stored, region.listed_weights(), n).ok()?;
    let total = f64::from(n.get());
    Some(
        assignment
            .counts(region.origins().len())
            .into_iter()
            .map(|count| f64::from(count) / total)
            .collect(),
    )
}

/// Each origin's rate (by index) from a region's placed geos.
pub(crate) fn origin_rates(
    region: &Region,
    mode: PickMode,
    buckets: Option<BucketCount>,
    placed: &[Placed<'_>],
) -> Vec<f64> {
    let mut rates = vec![0.0; region.origins().len()];
    let mut sticky = 0.0;
    let mut bucketed = 0.0;
    let shares = if placed.iter().any(|geo| geo.rate.bucket > 0.0) {
        bucket_shares(region, buckets)
    } else {
        None
    };
    for geo in placed {
        // Without an assignment a bucket is ignored: the answer is the plain one.
        let plain = geo.rate.plain
            + if shares.is_none() {
                geo.rate.bucket
            } else {
                0.0
            };
        if plain > 0.0 {
            rates[pick_index(region, mode, geo.key)] += plain;
        }
        sticky += geo.rate.sticky;
        bucketed += geo.rate.bucket;
    }
    if sticky > 0.0 {
        for (rate, share) in rates.iter_mut().zip(pick_shares(region, mode)) {
            *rate += sticky * share;
        }
    }
    if let Some(shares) = shares {
        for (rate, share) in rates.iter_mut().zip(shares) {
            *rate += bucketed * share;
        }
    }
    rates
}

fn add_region(
    load: &mut Load,
    region: &Region,
    mode: PickMode,
    buckets: Option<BucketCount>,
    placed: &[Placed<'_>],
    factor: f64,
) {
    let origins = region.origins();
    let shares = if placed.iter().any(|geo| geo.rate.sticky > 0.0) {
        pick_shares(region, mode)
    } else {
        Vec::new()
    };
    let bucket_shares = if placed.iter().any(|geo| geo.rate.bucket > 0.0) {
        bucket_shares(region, buckets)
    } else {
        None
    };
    for origin in origins {
        load.origins.entry(origin.clone()).or_insert(0.0);
    }
    for geo in placed {
        let entry = load.geos.entry(geo.geo.to_owned()).or_default();
        entry.rate.plain += geo.rate.plain * factor;
        entry.rate.sticky += geo.rate.sticky * factor;
        entry.rate.bucket += geo.rate.bucket * factor;
        if geo.rate.plain > 0.0 || (geo.rate.bucket > 0.0 && bucket_shares.is_none()) {
            let origin = &origins[pick_index(region, mode, geo.key)];
            if geo.rate.plain > 0.0 {
                let rate = geo.rate.plain * factor;
                *entry.plain.entry(origin.clone()).or_default() += rate;
                *load.origins.get_mut(origin).expect("inserted above") += rate;
            }
            if geo.rate.bucket > 0.0 && bucket_shares.is_none() {
                let rate = geo.rate.bucket * factor;
                *entry.bucket.entry(origin.clone()).or_default() += rate;
                *load.origins.get_mut(origin).expect("inserted above") += rate;
            }
        }
        if geo.rate.sticky > 0.0 {
            for (origin, share) in origins.iter().zip(&shares) {
                if *share > 0.0 {
                    let rate = geo.rate.sticky * factor * share;
                    *entry.sticky.entry(origin.clone()).or_default() += rate;
                    *load.origins.get_mut(origin).expect("inserted above") += rate;
                }
            }
        }
        if let Some(bucket_shares) = &bucket_shares
            && geo.rate.bucket > 0.0
        {
            for (origin, share) in origins.iter().zip(bucket_shares) {
                if *share > 0.0 {
                    let rate = geo.rate.bucket * factor * share;
                    *entry.bucket.entry(origin.clone()).or_default() += rate;
                    *load.origins.get_mut(origin).expect("inserted above") += rate;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::Unplaced;
    use dw_routing::{Snapshot, SnapshotWriter};

    pub(crate) fn table(policy: &str, regions: &[(&str, &str)]) -> Table {
        let mut snapshot = Snapshot::new(5, "/dw/routing/");
        if !policy.is_empty() {
            snapshot
                .kvs
                .insert("/dw/routing/policy/global".into(), policy.to_string());
        }
        for (geo, value) in regions {
            snapshot
                .kvs
                .insert(format!("/dw/routing/region/{geo}"), value.to_string());
        }
        Table::parse(&SnapshotWriter::new().to_json(&snapshot)).unwrap()
    }

    fn traffic(geos: &[(&str, f64, f64)]) -> Traffic {
        Traffic::from_geos(
            geos.iter().map(|(geo, plain, sticky)| {
                (
                    geo.to_string(),
                    GeoRate {
                        plain: *plain,
                        sticky: *sticky,
                        bucket: 0.0,
                    },
                )
            }),
            Unplaced {
                other: 2.0,
                overflow: 1.0,
                fail_open: 3.0,
            },
        )
        .unwrap()
    }

    #[test]
    fn plain_goes_where_resolve_goes_and_sticky_splits_by_shares() {
        let table = table(
            r#"{"default":"US"}"#,
            &[
                (
                    "DE",
                    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#,
                ),
                (
                    "US",
                    r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":1}}"#,
                ),
                (
                    "continent/EU",
                    r#"{"shard":"eu-1","origins":["ams-a"],"weight":{"ams-a":1}}"#,
                ),
            ],
        );
        let load = predict(
            &table,
            &traffic(&[
                ("DE", 10.0, 80.0),
                ("FR", 5.0, 0.0),
                ("JP", 7.0, 1.0),
                ("DE-BY", 4.0, 0.0),
            ]),
        );
        // DE plain: fra-b (resolve's answer); DE-BY hashes as DE.
        assert_eq!(table.resolve(b"DE", None).unwrap().origin, "fra-b");
        let shares = pick_shares(table.region(b"DE").unwrap(), PickMode::Legacy);
        assert!((load.of("fra-a") - 80.0 * shares[0]).abs() < 1e-9);
        assert!((load.of("fra-b") - (14.0 + 80.0 * shares[1])).abs() < 1e-9);
        assert_eq!(load.of("ams-a"), 5.0, "FR answered by its continent");
        assert_eq!(load.of("iad-a"), 8.0, "JP answered by the default");
        assert_eq!(load.no_route, 0.0);
        assert_eq!(load.geos["DE-BY"].plain["fra-b"], 4.0);
        assert!((load.total - (10.0 + 80.0 + 5.0 + 8.0 + 4.0 + 6.0)).abs() < 1e-9);
        assert!(!load.assumed_fleet_mix);
    }

    #[test]
    fn geos_without_a_route_are_their_own_line() {
        let table = table(
            r#"{"default":"ZZ"}"#,
            &[("DE", r#"{"shard":"eu-1","origins":["a"],"weight":{"a":1}}"#)],
        );
        let load = predict(&table, &traffic(&[("DE", 1.0, 0.0), ("FR", 2.0, 3.0)]));
        assert_eq!(load.no_route, 5.0);
        assert_eq!(load.geos["FR"].no_route, 5.0);
        assert_eq!(load.of("a"), 1.0);
        assert!((load.unplaced_share() - 11.0 / 12.0).abs() < 1e-12);
    }

    #[test]
    fn the_hash_key_is_the_one_explain_reports() {
        let table = table(
            "",
            &[
                (
                    "US",
                    r#"{"shard":"us-1","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#,
                ),
                (
                    "US-CA",
                    r#"{"shard":"us-1","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
                ),
                (
                    "pop-1",
                    r#"{"shard":"us-1","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
                ),
            ],
        );
        for geo in [
            "US", "US-CA", "US-NY", "pop-1", "pop-2", "", "T1", "XX", "us-ca", "US-1234",
        ] {
            let explained = table.explain(geo.as_bytes(), None);
            let route = explained.route.unwrap();
            assert_eq!(
                String::from_utf8_lossy(hash_key(&table, geo.as_bytes())),
                route.hash_key,
                "{geo:?}"
            );
        }
    }

    #[test]
    fn a_share_of_the_fleet_runs_the_staged_table() {
        let fleet = table(
            "",
            &[("US", r#"{"shard":"s","origins":["a"],"weight":{"a":1}}"#)],
        );
        let staged = table(
            "",
            &[("US", r#"{"shard":"s","origins":["b"],"weight":{"b":1}}"#)],
        );
        let totals = Traffic::parse(br#"{"geos":{"US":{"plain":10,"sticky":30}}}"#).unwrap();
        let load = predict_share(&fleet, &staged, 0.2, &totals).unwrap();
        assert!((load.of("a") - 32.0).abs() < 1e-9 && (load.of("b") - 8.0).abs() < 1e-9);
        assert!(load.assumed_fleet_mix);
        assert!((load.total - 40.0).abs() < 1e-9);
        // The edges: nobody and everybody.
        let none = predict_share(&fleet, &staged, 0.0, &totals).unwrap();
        assert_eq!(none, predict(&fleet, &totals));
        let all = predict_share(&fleet, &staged, 1.0, &totals).unwrap();
        assert_eq!((all.of("a"), all.of("b")), (0.0, 40.0));
        for bad in [-0.01, 1.01, f64::NAN] {
            assert!(
                predict_share(&fleet, &staged, bad, &totals).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn nodes_with_their_own_tables() {
        let fleet = table(
            "",
            &[("US", r#"{"shard":"s","origins":["a"],"weight":{"a":1}}"#)],
        );
        let staged = table(
            "",
            &[("US", r#"{"shard":"s","origins":["b"],"weight":{"b":1}}"#)],
        );
        let per_node =
            Traffic::parse(br#"{"nodes":{"n1":{"US":3},"n2":{"US":5},"n3":{"US":7}}}"#).unwrap();
        let tables = NodeTables {
            fleet: &fleet,
            nodes: BTreeMap::from([("n2".to_owned(), &staged)]),
            fleet_size: 3,
        };
        let load = predict_nodes(&tables, &per_node).unwrap();
        assert_eq!((load.of("a"), load.of("b")), (10.0, 5.0));
        assert!(!load.assumed_fleet_mix);
        let totals = Traffic::parse(br#"{"geos":{"US":15}}"#).unwrap();
        let load = predict_nodes(&tables, &totals).unwrap();
        assert_eq!((load.of("a"), load.of("b")), (10.0, 5.0));
        assert!(load.assumed_fleet_mix);
        let wrong = NodeTables {
            fleet_size: 0,
            ..tables.clone()
        };
        assert!(predict_nodes(&wrong, &totals).is_err());
        let none = NodeTables {
            nodes: BTreeMap::new(),
            ..tables
        };
        assert!(!predict_nodes(&none, &totals).unwrap().assumed_fleet_mix);
    }

    #[test]
    fn edits_replace_region_values() {
        let table = table(
            "",
            &[(
                "US",
                r#"{"shard":"s","origins":["a","b"],"weight":{"a":1,"b":1}}"#,
            )],
        );
        let traffic = traffic(&[("US", 0.0, 100.0)]);
        let edit = RegionEdit {
            geo: "US".into(),
            shard: "s".into(),
            origins: vec!["a".into(), "b".into()],
            weight: vec![("a".into(), 1), ("b".into(), 3)],
        };
        let load = predict_edited(&table, &traffic, std::slice::from_ref(&edit)).unwrap();
        assert!((load.of("a") - 25.0).abs() < 1e-6);
        let nowhere = RegionEdit {
            geo: "FR".into(),
            ..edit.clone()
        };
        assert!(predict_edited(&table, &traffic, &[nowhere]).is_err());
        let invalid = RegionEdit {
            weight: vec![("a".into(), 0)],
            ..edit
        };
        assert!(predict_edited(&table, &traffic, &[invalid]).is_err());
    }
}
