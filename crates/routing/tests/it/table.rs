//! A compiled table's answers through the public API: the fallback chain, the picks,
//! invalid keys left out, geos of every shape, hostile input, and region indexes.

use dw_routing::{
    DEFAULT_PREFIX, Error, PickMode, Policy, Region, Snapshot, Table, legacy_pick, rendezvous_pick,
};

const DE: &str = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#;
const US: &str = r#"{"shard":"us-1","origins":["iad-a","iad-b"],"weight":{"iad-a":1,"iad-b":1}}"#;
const GB: &str = r#"{"shard":"eu-2","origins":["lhr-a"],"weight":{"lhr-a":1}}"#;
const INVALID: &str = r#"{"shard":"eu-1","origins":[],"weight":{}}"#;

fn table(entries: &[(&str, &str)]) -> Table {
    let mut snapshot = Snapshot::new(42, DEFAULT_PREFIX);
    for (key, value) in entries {
        snapshot
            .kvs
            .insert(format!("{DEFAULT_PREFIX}{key}"), (*value).to_owned());
    }
    Table::from_snapshot(&snapshot)
}

fn shard_of<'t>(table: &'t Table, country: &[u8]) -> Option<&'t str> {
    table.resolve(country, None).map(|route| route.shard)
}

#[test]
fn the_table_is_shareable_between_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Table>();
}

#[test]
fn an_empty_table_routes_nothing() {
    let table = Table::empty();
    assert_eq!(table.revision(), 0);
    assert_eq!(table.region_count(), 0);
    assert_eq!(table.policy(), &Policy::default());
    assert!(table.resolve(b"US", None).is_none());
    assert!(table.resolve(b"", Some(b"x")).is_none());
}

#[test]
fn a_country_with_a_region_routes_to_it() {
    let table = table(&[("region/DE", DE), ("region/US", US)]);
    assert_eq!(table.revision(), 42);
    assert_eq!(table.region_count(), 2);
    let route = table.resolve(b"DE", None).unwrap();
    assert_eq!(route.shard, "eu-1");
    assert_eq!(
        route.origin, "fra-b",
        "PHP: crc32('DEfra-afra-b') % 80 = 57"
    );
    assert_eq!(table.region_shard(route.region_index), "eu-1");
    assert_eq!(
        table.region_origin(route.region_index, route.origin_index),
        "fra-b"
    );
    assert_eq!(
        shard_of(&table, b"de"),
        Some("us-1"),
        "geos match case-sensitively"
    );
}

#[test]
fn the_chain_is_country_then_default_then_failover() {
    let policy = r#"{"default":"XX","failover":["YY","GB","US"]}"#;
    let table = table(&[
        ("policy/global", policy),
        ("region/DE", DE),
        ("region/GB", GB),
        ("region/US", US),
        ("region/YY", INVALID),
    ]);
    assert_eq!(shard_of(&table, b"DE"), Some("eu-1"));
    // XX has no region, YY an invalid one: GB is the first that answers.
    assert_eq!(shard_of(&table, b"FR"), Some("eu-2"));
    assert_eq!(shard_of(&table, b"YY"), Some("eu-2"));

    let with_default = self::table(&[
        ("policy/global", r#"{"default":"DE","failover":["GB"]}"#),
        ("region/DE", DE),
        ("region/GB", GB),
    ]);
    assert_eq!(shard_of(&with_default, b"FR"), Some("eu-1"));
}

#[test]
fn no_candidate_means_no_route() {
    let table = table(&[
        ("policy/global", r#"{"default":"XX","failover":["YY"]}"#),
        ("region/DE", DE),
    ]);
    assert!(table.resolve(b"FR", None).is_none());
    assert!(table.resolve(b"US", Some(b"visitor")).is_none());
    // Without a policy the default is US.
    let table = self::table(&[("region/DE", DE)]);
    assert!(table.resolve(b"FR", None).is_none());
    let table = self::table(&[("region/DE", DE), ("region/US", US)]);
    assert_eq!(shard_of(&table, b"FR"), Some("us-1"));
}

#[test]
fn the_fallback_hashes_the_visitors_own_country() {
    let table = table(&[("region/US", US)]);
    let region = table.region(b"US").unwrap();
    for country in [&b"FR"[..], b"JP", b"", b"BR"] {
        let route = table.resolve(country, None).unwrap();
        assert_eq!(route.origin, legacy_pick(region, country));
    }
}

#[test]
fn a_sticky_key_replaces_the_country_as_hash_key() {
    let table = table(&[("region/DE", DE)]);
    let region = table.region(b"DE").unwrap();
    let mut origins = std::collections::BTreeSet::new();
    for visitor in 0..64 {
        let key = format!("visitor-{visitor}");
        let route = table.resolve(b"DE", Some(key.as_bytes())).unwrap();
        assert_eq!(route.origin, legacy_pick(region, key.as_bytes()));
        origins.insert(route.origin);
    }
    assert_eq!(
        origins.len(),
        2,
        "sticky keys split a country across its origins"
    );
}

#[test]
fn the_policy_selects_the_rendezvous_pick() {
    let table = table(&[
        ("policy/global", r#"{"pick":"rendezvous"}"#),
        ("region/DE", DE),
    ]);
    assert_eq!(table.policy().pick, PickMode::Rendezvous);
    let region = table.region(b"DE").unwrap();
    let mut differs = false;
    for visitor in 0..64 {
        let key = format!("visitor-{visitor}");
        let route = table.resolve(b"DE", Some(key.as_bytes())).unwrap();
        assert_eq!(route.origin, rendezvous_pick(region, key.as_bytes()));
        differs |= route.origin != legacy_pick(region, key.as_bytes());
    }
    assert!(differs, "the two picks are different functions");
}

#[test]
fn invalid_keys_are_recorded_and_affect_nothing_else() {
    let table = table(&[
        ("region/DE", DE),
        ("region/FR", INVALID),
        ("region/IT", "not json"),
        ("region/", GB),
        ("policy/global", "[]"),
        ("origin/fra-a", "not json either"),
        ("policy/other", "[]"),
    ]);
    assert_eq!(table.region_count(), 1);
    let invalid: Vec<(&str, &Error)> = table
        .invalid_keys()
        .iter()
        .map(|invalid| (invalid.key.as_str(), &invalid.error))
        .collect();
    assert_eq!(invalid.len(), 4, "{invalid:?}");
    assert_eq!(invalid[0].0, "/dw/routing/policy/global");
    assert!(matches!(invalid[0].1, Error::Policy { field: "json", .. }));
    assert_eq!(invalid[1].0, "/dw/routing/region/");
    assert!(matches!(invalid[1].1, Error::Region { field: "geo", .. }));
    assert_eq!(invalid[2].0, "/dw/routing/region/FR");
    assert!(matches!(
        invalid[2].1,
        Error::Region {
            field: "origins",
            ..
        }
    ));
    assert_eq!(invalid[3].0, "/dw/routing/region/IT");
    assert!(matches!(invalid[3].1, Error::Region { field: "json", .. }));
    // The invalid policy leaves the defaults in force.
    assert_eq!(table.policy(), &Policy::default());
    assert_eq!(shard_of(&table, b"DE"), Some("eu-1"));
    assert!(table.resolve(b"FR", None).is_none());
    assert!(
        table.resolve(b"", None).is_none(),
        "`region/` is not the empty country's"
    );
}

#[test]
fn only_keys_under_the_prefix_count() {
    let mut snapshot = Snapshot::new(7, "/other/");
    snapshot.kvs.insert("/other/region/DE".into(), DE.into());
    snapshot
        .kvs
        .insert("/dw/routing/region/US".into(), US.into());
    snapshot
        .kvs
        .insert("/other/region/FR".into(), INVALID.into());
    snapshot
        .kvs
        .insert("/dw/routing/region/GB".into(), INVALID.into());
    snapshot
        .kvs
        .insert("/other/policy/global".into(), r#"{"default":"DE"}"#.into());
    let table = Table::from_snapshot(&snapshot);
    assert_eq!(table.prefix(), "/other/");
    assert_eq!(table.region_count(), 1);
    assert_eq!(table.invalid_keys().len(), 1);
    assert_eq!(table.invalid_keys()[0].key, "/other/region/FR");
    assert_eq!(
        shard_of(&table, b"US"),
        Some("eu-1"),
        "US is not a region here: default DE"
    );
}

#[test]
fn every_kind_of_geo_finds_its_own_region() {
    let geos = [
        "DE",
        "T1",
        "99",
        "de",
        "D",
        "",
        "D-",
        "é",
        "X0010",
        "ABCDEFG",
        "ABCDEFGH",
        "a-long-region-name",
    ];
    let entries: Vec<(String, &str)> = geos
        .iter()
        .map(|geo| (format!("region/{geo}"), DE))
        .collect();
    let entries: Vec<(&str, &str)> = entries.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let table = table(&entries);
    for geo in geos.iter().filter(|geo| !geo.is_empty()) {
        let route = table.resolve(geo.as_bytes(), None).unwrap();
        assert_eq!(table.region_at(route.region_index).unwrap().shard(), "eu-1");
        assert_eq!(
            table.region_index(geo.as_bytes()),
            Some(route.region_index),
            "{geo}"
        );
    }
    for absent in [&b"FR"[..], b"D\0", b"d", b"DE ", b"ABCDEF", b"ABCDEFGHI"] {
        assert_eq!(table.region_index(absent), None, "{absent:?}");
    }
}

#[test]
fn hostile_countries_and_keys_never_panic() {
    let table = table(&[
        ("region/DE", DE),
        ("region/US", US),
        ("region/a\0b", GB),
        ("region/ä", GB),
    ]);
    let long = vec![b'A'; 10 * 1024];
    let hostile: [&[u8]; 8] = [
        b"",
        &long,
        b"\0",
        b"D\0E",
        b"\xff\xfe",
        b"\xc3",
        b"DE ",
        b"\0\0\0\0",
    ];
    for country in hostile {
        assert_eq!(
            shard_of(&table, country),
            Some("us-1"),
            "{:?}",
            String::from_utf8_lossy(country)
        );
        for sticky in hostile {
            assert!(table.resolve(country, Some(sticky)).is_some());
        }
    }
    assert_eq!(
        shard_of(&table, b"a\0b"),
        Some("eu-2"),
        "a NUL inside a geo matches byte for byte"
    );
    assert_eq!(shard_of(&table, "ä".as_bytes()), Some("eu-2"));
    assert_eq!(
        shard_of(&table, b"\xc3"),
        Some("us-1"),
        "a prefix of a geo's bytes is not the geo"
    );
}

#[test]
fn indexes_name_the_route_and_out_of_range_is_empty() {
    let table = table(&[("region/DE", DE), ("region/US", US)]);
    for country in [&b"DE"[..], b"US"] {
        for visitor in 0..16u8 {
            let route = table.resolve(country, Some(&[visitor])).unwrap();
            assert_eq!(table.region_shard(route.region_index), route.shard);
            assert_eq!(
                table.region_origin(route.region_index, route.origin_index),
                route.origin
            );
        }
    }
    assert_eq!(table.region_at(1).map(Region::shard), Some("us-1"));
    assert!(table.region_at(2).is_none());
    assert_eq!(table.region_shard(2), "");
    assert_eq!(table.region_origin(0, 2), "");
    assert_eq!(table.region_origin(u32::MAX, 0), "");
    let geos: Vec<&str> = table.regions().map(|(geo, _)| geo).collect();
    assert_eq!(geos, ["DE", "US"]);
}

#[test]
fn parse_refuses_an_unreadable_file() {
    assert!(matches!(Table::parse(b"{}"), Err(Error::Snapshot(_))));
    let table =
        Table::parse(br#"{"format":1,"revision":9,"kvs":{"/dw/routing/region/US":"{}"}}"#).unwrap();
    assert_eq!(table.revision(), 9);
    assert_eq!(table.invalid_keys().len(), 1);
}
