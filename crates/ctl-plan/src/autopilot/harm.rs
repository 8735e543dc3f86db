//! The least-harm order: which of an origin's regions a relief takes load from first, and
//! how much of the origin's load each region carries.
//!
//! The tiers, first to last ([`Harm`]): bucketed shares (issue 41's visitor buckets: the
//! regions where the origin holds buckets, [`bucketed_shares`]); regions answering
//! *shared* traffic (a continent bucket `continent/XX`, `policy.default`, a
//! `policy.failover` geo), whose visitors have no key of their own and were already sent
//! somewhere generic; a country's (or subdivision's) own key; and last the origin's *home*
//! geos (`dwctl origin home`, a subdivision counting as home when its country is). A
//! region held by an open stage or rollout is never in a tier: it is reported as skipped.

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::{Table, pick_shares};

use dw_capacity::Traffic;

/// How much harm moving a region's visitors does, least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Harm {
    /// Bucketed shares (issue 41): a fraction of a geo's visitors, moved by bucket.
    Bucketed,
    /// A region answering a continent bucket, the default or a failover.
    Shared,
    /// A country's or subdivision's own key.
    OwnKey,
    /// One of the origin's home geos.
    Home,
}

impl Harm {
    /// The word in reasons, logs and metrics.
    pub fn word(self) -> &'static str {
        match self {
            Harm::Bucketed => "bucketed",
            Harm::Shared => "shared",
            Harm::OwnKey => "own-key",
            Harm::Home => "home",
        }
    }
}

/// One tier: its harm and its regions (geos, in key order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tier {
    /// How much harm moving them does.
    pub harm: Harm,
    /// The regions' geos.
    pub regions: Vec<String>,
}

/// An origin's regions in least-harm order, and those skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Order {
    /// The tiers, least harm first; empty tiers are left out.
    pub tiers: Vec<Tier>,
    /// Regions listing the origin that an open stage or rollout holds: never changed.
    pub skipped_staged: Vec<String>,
}

/// The regions (by geo) whose visitors `origin` holds by bucket (issue 41): with
/// `policy/global`'s `buckets` on, each region listing two or more origins whose effective
/// assignment gives `origin` at least one bucket. A shed there moves buckets, a fraction
/// of the geo's visitors, never the whole geo: the least harm. Empty while buckets are off.
pub fn bucketed_shares(table: &Table, origin: &str) -> Vec<String> {
    if table.buckets().is_none() {
        return Vec::new();
    }
    let mut geos = Vec::new();
    for (index, (geo, region)) in table.regions().enumerate() {
        let origins = region.origins();
        if origins.len() < 2 {
            continue;
        }
        let Some(at) = origins.iter().position(|name| name == origin) else {
            continue;
        };
        let Ok(index) = u32::try_from(index) else {
            break;
        };
        let held = table
            .assignment(index)
            .map(|assignment| assignment.counts(origins.len()))
            .and_then(|counts| counts.get(at).copied())
            .unwrap_or(0);
        if held > 0 {
            geos.push(geo.to_owned());
        }
    }
    geos
}

/// `origin`'s regions with weight, in least-harm order (see the module's documentation).
/// `home` holds the origin's home geos; `staged` the geos an open stage or rollout holds.
pub fn harm_order(
    table: &Table,
    origin: &str,
    home: &BTreeSet<String>,
    staged: &BTreeSet<String>,
) -> Order {
    let policy = table.policy();
    let mut by_harm: BTreeMap<Harm, Vec<String>> = BTreeMap::new();
    let bucketed: BTreeSet<String> = bucketed_shares(table, origin).into_iter().collect();
    let mut order = Order::default();
    for (geo, region) in table.regions() {
        if region.weight(origin) == 0 || !region.origins().iter().any(|name| name == origin) {
            continue;
        }
        if staged.contains(geo) {
            order.skipped_staged.push(geo.to_owned());
            continue;
        }
        let country = geo.split('-').next().unwrap_or(geo);
        let harm = if home.contains(geo) || home.contains(country) {
            Harm::Home
        } else if bucketed.contains(geo) {
            Harm::Bucketed
        } else if geo.starts_with("continent/")
            || policy.default == geo
            || policy.failover.iter().any(|step| step == geo)
        {
            Harm::Shared
        } else {
            Harm::OwnKey
        };
        by_harm.entry(harm).or_default().push(geo.to_owned());
    }
    order.tiers = by_harm
        .into_iter()
        .map(|(harm, regions)| Tier { harm, regions })
        .collect();
    order
}

/// `origin`'s load per answering region (by the region's geo), answers per second: each
/// geo of `traffic` is resolved once; its plain answers count where the pick sends the
/// geo, its bucketed answers by the answering region's assignment (buckets / N; as plain
/// while buckets are off), its sticky answers by the region's exact shares (as `dw_capacity::predict` counts
/// them, so the parts add up to the origin's predicted load).
pub fn load_by_region(table: &Table, traffic: &Traffic, origin: &str) -> BTreeMap<String, f64> {
    let geos: Vec<&str> = table.regions().map(|(geo, _)| geo).collect();
    let mode = table.policy().pick;
    let mut loads: BTreeMap<String, f64> = BTreeMap::new();
    let mut shares: BTreeMap<u32, f64> = BTreeMap::new();
    for (geo, rate) in traffic.geos() {
        let Some(route) = table.resolve(geo.as_bytes(), None) else {
            continue;
        };
        let Some(region) = table.region_at(route.region_index) else {
            continue;
        };
        let Some(at) = region.origins().iter().position(|name| name == origin) else {
            continue;
        };
        let mut load = 0.0;
        if route.origin == origin {
            load += rate.plain;
        }
        if rate.bucket > 0.0 {
            // By the answering region's assignment, each origin its buckets / N; as plain
            // while buckets are off (the routers then ignore the bucket), as
            // dw_capacity::predict places them.
            match (table.buckets(), table.assignment(route.region_index)) {
                (Some(n), Some(assignment)) => {
                    let held = assignment
                        .counts(region.origins().len())
                        .get(at)
                        .copied()
                        .unwrap_or(0);
                    load += rate.bucket * f64::from(held) / f64::from(n.get());
                }
                _ if route.origin == origin => load += rate.bucket,
                _ => {}
            }
        }
        if rate.sticky > 0.0 {
            let share = *shares
                .entry(route.region_index)
                .or_insert_with(|| pick_shares(region, mode).get(at).copied().unwrap_or(0.0));
            load += rate.sticky * share;
        }
        if load > 0.0
            && let Some(name) = geos.get(route.region_index as usize)
        {
            *loads.entry((*name).to_owned()).or_default() += load;
        }
    }
    loads
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(kvs: &[(&str, &str)], policy: Option<&str>) -> Table {
        let mut members: Vec<String> = kvs
            .iter()
            .map(|(geo, value)| {
                format!(
                    "{}:{}",
                    serde_json::to_string(&format!("/dw/routing/region/{geo}")).unwrap(),
                    serde_json::to_string(value).unwrap()
                )
            })
            .collect();
        if let Some(policy) = policy {
            members.push(format!(
                "\"/dw/routing/policy/global\":{}",
                serde_json::to_string(policy).unwrap()
            ));
        }
        let text = format!(
            r#"{{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{{{}}}}}"#,
            members.join(",")
        );
        Table::parse(text.as_bytes()).unwrap()
    }

    const AB: &str = r#"{"shard":"eu","origins":["a","b"],"weight":{"a":50,"b":50}}"#;

    /// With visitor buckets on, the regions where the origin holds buckets come first
    /// (a shed there moves a fraction of the geo's visitors); a region where it holds none,
    /// or with one origin, is in its usual tier; home geos stay last; staged ones skipped.
    /// Without buckets, the same table has no bucketed tier.
    #[test]
    fn bucketed_shares_come_first_when_buckets_are_on() {
        let kvs = [
            ("DE", AB),
            ("FR", AB),
            ("AT", AB),
            // a holds no bucket of 4 here (weight 0 for a: drained).
            (
                "IT",
                r#"{"shard":"eu","origins":["a","b"],"weight":{"a":0,"b":1}}"#,
            ),
            ("ES", r#"{"shard":"eu","origins":["a"],"weight":{"a":1}}"#),
            ("continent/EU", AB),
        ];
        let on = table(&kvs, Some(r#"{"buckets":4}"#));
        let home = BTreeSet::from(["AT".to_owned()]);
        let staged = BTreeSet::from(["FR".to_owned()]);
        let tiers = |table: &Table| -> Vec<(Harm, Vec<String>)> {
            harm_order(table, "a", &home, &staged)
                .tiers
                .into_iter()
                .map(|tier| (tier.harm, tier.regions))
                .collect()
        };
        let s = |geos: &[&str]| geos.iter().map(|g| (*g).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            tiers(&on),
            [
                (Harm::Bucketed, s(&["DE", "continent/EU"])),
                (Harm::OwnKey, s(&["ES"])),
                (Harm::Home, s(&["AT"])),
            ]
        );
        let off = table(&kvs, None);
        assert_eq!(
            tiers(&off),
            [
                (Harm::Shared, s(&["continent/EU"])),
                (Harm::OwnKey, s(&["DE", "ES"])),
                (Harm::Home, s(&["AT"])),
            ]
        );
    }

    /// A geo's bucketed answers load the origin by its buckets / N (2 of 4 here), as the
    /// prediction places them; with buckets off, where the pick sends the geo.
    #[test]
    fn bucketed_answers_load_an_origin_by_its_buckets() {
        use dw_capacity::{GeoRate, Unplaced};
        let traffic = Traffic::from_geos(
            [(
                "DE".to_owned(),
                GeoRate {
                    plain: 0.0,
                    sticky: 0.0,
                    bucket: 100.0,
                },
            )],
            Unplaced::default(),
        )
        .unwrap();
        let on = table(&[("DE", AB)], Some(r#"{"buckets":4}"#));
        let load = load_by_region(&on, &traffic, "a");
        assert_eq!(load.get("DE").copied(), Some(50.0));
        let off = table(&[("DE", AB)], None);
        let to_a = load_by_region(&off, &traffic, "a")
            .get("DE")
            .copied()
            .unwrap_or(0.0);
        let to_b = load_by_region(&off, &traffic, "b")
            .get("DE")
            .copied()
            .unwrap_or(0.0);
        assert_eq!(to_a + to_b, 100.0, "the whole geo on the pick's origin");
        assert!(to_a == 0.0 || to_b == 0.0);
    }

    #[test]
    fn shared_regions_come_before_own_keys_and_home_last() {
        let table = table(
            &[
                ("DE", AB),
                ("DE-BY", AB),
                ("FR", AB),
                ("continent/EU", AB),
                ("XX", AB),
                ("IT", r#"{"shard":"eu","origins":["b"],"weight":{"b":1}}"#),
            ],
            Some(r#"{"default":"XX"}"#),
        );
        let home = BTreeSet::from(["DE".to_owned()]);
        let staged = BTreeSet::from(["FR".to_owned()]);
        let order = harm_order(&table, "a", &home, &staged);
        let tiers: Vec<(Harm, Vec<&str>)> = order
            .tiers
            .iter()
            .map(|tier| (tier.harm, tier.regions.iter().map(String::as_str).collect()))
            .collect();
        assert_eq!(
            tiers,
            [
                (Harm::Shared, vec!["XX", "continent/EU"]),
                (Harm::Home, vec!["DE", "DE-BY"]),
            ]
        );
        assert_eq!(order.skipped_staged, ["FR"]);
    }

    #[test]
    fn a_region_listing_the_origin_at_weight_zero_is_no_lever() {
        let table = table(
            &[(
                "DE",
                r#"{"shard":"eu","origins":["a","b"],"weight":{"a":0,"b":5}}"#,
            )],
            None,
        );
        assert!(
            harm_order(&table, "a", &BTreeSet::new(), &BTreeSet::new())
                .tiers
                .is_empty()
        );
    }

    #[test]
    fn load_by_region_adds_up_to_the_prediction() {
        let table = table(
            &[
                ("DE", AB),
                (
                    "continent/EU",
                    r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":2}}"#,
                ),
            ],
            None,
        );
        let traffic = Traffic::parse(
            br#"{"geos":{"DE":{"plain":10,"sticky":100},"FR":{"plain":7,"sticky":40},"AT":20}}"#,
        )
        .unwrap();
        let predicted = dw_capacity::predict(&table, &traffic);
        for origin in ["a", "b", "c"] {
            let parts = load_by_region(&table, &traffic, origin);
            let sum: f64 = parts.values().sum();
            assert!(
                (sum - predicted.of(origin)).abs() < 1e-9,
                "{origin}: {sum} vs {}",
                predicted.of(origin)
            );
        }
    }
}
