//! Which origins the routing core predicts answers for (pure): for each geo a visitor can
//! send, the origin its answers **without a sticky key or bucket** go to, for each region
//! the share of its **sticky** answers each origin gets, and, with `policy/global`'s
//! `buckets: N`, the share of its **bucketed** answers (its buckets / N in the region's
//! assignment). The fleet exporter serves all three (`dw_routing_plain_route`,
//! `dw_routing_sticky_share`, `dw_routing_bucket_share`) so that the alert
//! `DwOriginWeightedButIdle` expects answers of an origin only where the core sends them,
//! and `dwctl traffic` names the cause when an origin with weight gets none ("the whole geo
//! JP hashes to sjc-a", "region JP gives it 0 of 2 buckets").
//!
//! Why weight is not enough: without a sticky key the hash key is the geo itself
//! ([`dw_routing::Table::resolve`]), so every plain answer of one geo goes to the one
//! origin the hash picks, whatever the other origins' weights. Sticky answers spread by
//! weight ([`dw_routing::pick_shares`]), bucketed ones by the assignment, whose counts are
//! the weights' apportionment of N (a small weight may get no bucket). All come from the
//! routing core itself, so they follow it when its semantics change.

use dw_routing::{BUCKET_PREFIX, Table, builtin_continent, pick_shares};

/// The most plain routes computed (and exported): every two-letter country (at most 676)
/// and every region key that is itself a geo; a table of more opaque-geo regions than
/// that is cut here, so that it cannot grow the exporter's output without bound.
pub const MAX_PLAIN_ROUTES: usize = 20_000;

/// Where a geo's answers without a sticky key go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainRoute {
    /// The geo as the counters label it (`JP`, `US-CA`).
    pub geo: String,
    /// The answering region's key (`JP`, `continent/AS`).
    pub region: String,
    /// The one origin every plain answer of the geo goes to.
    pub origin: String,
}

/// The share of a region's sticky answers an origin gets.
#[derive(Debug, Clone, PartialEq)]
pub struct StickyShare {
    /// The region's key.
    pub region: String,
    /// The origin.
    pub origin: String,
    /// Its share, 0 to 1 (the policy's pick mode's exact share).
    pub share: f64,
}

/// The share of a region's bucketed answers an origin gets: `buckets` of the region's
/// `of` (N) buckets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketShare {
    /// The region's key.
    pub region: String,
    /// The origin.
    pub origin: String,
    /// Its buckets in the region's assignment.
    pub buckets: u16,
    /// N, the policy's buckets.
    pub of: u16,
}

impl BucketShare {
    /// `buckets / of`, 0 to 1.
    pub fn share(&self) -> f64 {
        f64::from(self.buckets) / f64::from(self.of)
    }
}

/// The plain route of every geo a visitor can send that the table answers: each
/// two-letter country with a built-in continent, and each region key that is itself a
/// geo (a country, a subdivision or an opaque geo; not a continent bucket). In geo order;
/// at most [`MAX_PLAIN_ROUTES`].
pub fn plain_routes(table: &Table) -> Vec<PlainRoute> {
    let regions: Vec<&str> = table.regions().map(|(key, _)| key).collect();
    let mut geos: Vec<String> = Vec::new();
    for a in b'A'..=b'Z' {
        for b in b'A'..=b'Z' {
            let code = [a, b];
            if builtin_continent(&code).is_some() || table.region_index(&code).is_some() {
                geos.push(String::from_utf8_lossy(&code).into_owned());
            }
        }
    }
    geos.extend(
        regions
            .iter()
            .filter(|key| !key.starts_with(BUCKET_PREFIX))
            .map(|key| (*key).to_owned()),
    );
    geos.sort();
    geos.dedup();
    geos.into_iter()
        .filter_map(|geo| {
            let route = table.resolve(geo.as_bytes(), None)?;
            let region = regions.get(route.region_index as usize)?;
            Some(PlainRoute {
                region: (*region).to_owned(),
                origin: route.origin.to_owned(),
                geo,
            })
        })
        .take(MAX_PLAIN_ROUTES)
        .collect()
}

/// Each region's origins with their share of its sticky answers (every listed origin,
/// share 0 included), in region and list order.
pub fn sticky_shares(table: &Table) -> Vec<StickyShare> {
    let mode = table.policy().pick;
    table
        .regions()
        .flat_map(|(key, region)| {
            region
                .origins()
                .iter()
                .zip(pick_shares(region, mode))
                .map(move |(origin, share)| StickyShare {
                    region: key.to_owned(),
                    origin: origin.to_string(),
                    share,
                })
        })
        .collect()
}

/// Each region's origins with their buckets in its assignment (every listed origin, 0
/// buckets included), in region and list order; empty when the policy has no buckets (a
/// bucket is then answered as plain and counted so). A region without an assignment
/// (more origins than one indexes) has none.
pub fn bucket_shares(table: &Table) -> Vec<BucketShare> {
    let Some(n) = table.buckets() else {
        return Vec::new();
    };
    table
        .regions()
        .enumerate()
        .filter_map(|(index, (key, region))| {
            let counts = table
                .assignment(index as u32)?
                .counts(region.origins().len());
            Some(
                region
                    .origins()
                    .iter()
                    .zip(counts)
                    .map(move |(origin, buckets)| BucketShare {
                        region: key.to_owned(),
                        origin: origin.to_string(),
                        buckets,
                        of: n.get(),
                    }),
            )
        })
        .flatten()
        .collect()
}

/// Why an origin with weight in `region` gets none of its plain answers: the geos of the
/// region whose plain answers all go elsewhere, and where (`JP` → `sjc-a`). Empty when
/// some geo of the region sends its plain answers to `origin`, or the region answers no
/// geo.
pub fn hashed_elsewhere<'r>(
    routes: &'r [PlainRoute],
    region: &str,
    origin: &str,
) -> Vec<&'r PlainRoute> {
    let of_region: Vec<&PlainRoute> = routes.iter().filter(|r| r.region == region).collect();
    if of_region.iter().any(|route| route.origin == origin) {
        return Vec::new();
    }
    of_region
}

#[cfg(test)]
mod tests {
    use super::*;
    use dw_routing::Snapshot;

    fn table(regions: &[(&str, &str)], policy: Option<&str>) -> Table {
        let mut snapshot = Snapshot::new(1, "/dw/routing/");
        for (key, value) in regions {
            snapshot
                .kvs
                .insert(format!("/dw/routing/region/{key}"), (*value).to_owned());
        }
        if let Some(policy) = policy {
            snapshot
                .kvs
                .insert("/dw/routing/policy".into(), policy.to_owned());
        }
        Table::from_snapshot(&snapshot)
    }

    const JP: &str =
        r#"{"shard":"ap-1","origins":["sjc-a","sin-a"],"weight":{"sjc-a":50,"sin-a":50}}"#;

    #[test]
    fn a_country_s_plain_answers_go_to_the_one_origin_its_hash_picks() {
        let table = table(&[("JP", JP)], None);
        let routes = plain_routes(&table);
        let jp: Vec<&PlainRoute> = routes.iter().filter(|r| r.geo == "JP").collect();
        assert_eq!(jp.len(), 1);
        assert_eq!(jp[0].region, "JP");
        // The core's own answer, whichever it is: one origin for every plain answer.
        let picked = table.resolve(b"JP", None).unwrap().origin;
        assert_eq!(jp[0].origin, picked);
        let other = if picked == "sjc-a" { "sin-a" } else { "sjc-a" };
        assert_eq!(hashed_elsewhere(&routes, "JP", other), vec![jp[0]]);
        assert!(hashed_elsewhere(&routes, "JP", picked).is_empty());
        // Sticky answers spread by weight: both get half.
        let shares = sticky_shares(&table);
        assert_eq!(shares.len(), 2);
        for share in &shares {
            assert!((share.share - 0.5).abs() < 1e-3, "{share:?}");
        }
        // Geos the table cannot answer (no region, no default) have no route.
        assert!(routes.iter().all(|r| r.region == "JP"));
    }

    #[test]
    fn bucketed_answers_spread_by_the_assignments_counts_and_none_when_off() {
        // 1000/1 at N = 2: the apportionment gives sin-a no bucket.
        let jp =
            r#"{"shard":"ap-1","origins":["sjc-a","sin-a"],"weight":{"sjc-a":1000,"sin-a":1}}"#;
        let mut snapshot = Snapshot::new(1, "/dw/routing/");
        snapshot
            .kvs
            .insert("/dw/routing/region/JP".into(), jp.to_owned());
        snapshot.kvs.insert(
            "/dw/routing/policy/global".into(),
            r#"{"buckets":2}"#.into(),
        );
        let shares = bucket_shares(&Table::from_snapshot(&snapshot));
        assert_eq!(
            shares,
            [
                BucketShare {
                    region: "JP".into(),
                    origin: "sjc-a".into(),
                    buckets: 2,
                    of: 2
                },
                BucketShare {
                    region: "JP".into(),
                    origin: "sin-a".into(),
                    buckets: 0,
                    of: 2
                },
            ]
        );
        assert_eq!(shares[0].share(), 1.0);
        // Off: no bucket shares (a bucket is answered, and counted, as plain).
        assert!(bucket_shares(&table(&[("JP", jp)], None)).is_empty());
    }

    #[test]
    fn buckets_defaults_subdivisions_and_opaque_geos() {
        let table = table(
            &[
                (
                    "DE",
                    r#"{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":100}}"#,
                ),
                (
                    "US-CA",
                    r#"{"shard":"us-1","origins":["sjc-a"],"weight":{"sjc-a":100}}"#,
                ),
                (
                    "T1",
                    r#"{"shard":"x","origins":["tor-a"],"weight":{"tor-a":100}}"#,
                ),
                (
                    "continent/EU",
                    r#"{"shard":"eu-1","origins":["ams-a"],"weight":{"ams-a":100}}"#,
                ),
                (
                    "US",
                    r#"{"shard":"us-1","origins":["iad-a"],"weight":{"iad-a":100}}"#,
                ),
            ],
            Some(r#"{"default":"US"}"#),
        );
        let routes = plain_routes(&table);
        let find = |geo: &str| routes.iter().find(|r| r.geo == geo).cloned();
        assert_eq!(find("DE").unwrap().origin, "fra-a");
        assert_eq!(find("FR").unwrap().region, "continent/EU");
        assert_eq!(find("US-CA").unwrap().origin, "sjc-a");
        assert_eq!(find("T1").unwrap().origin, "tor-a");
        // A country of no region of its own and no bucket: the policy's default.
        assert_eq!(find("JP").unwrap().region, "US");
        assert!(find("continent/EU").is_none(), "a bucket is not a geo");
        assert!(routes.len() <= MAX_PLAIN_ROUTES);
        // Weight 0 gets a share of 0, listed.
        let zero = table_with_zero();
        let shares = sticky_shares(&zero);
        assert_eq!(shares[1].origin, "b");
        assert_eq!(shares[1].share, 0.0);
    }

    fn table_with_zero() -> Table {
        table(
            &[(
                "DE",
                r#"{"shard":"s","origins":["a","b"],"weight":{"a":100,"b":0}}"#,
            )],
            None,
        )
    }
}
