//! The geography chain of docs/routing.md (subdivision, country, continent bucket,
//! policy.default, policy.failover), checked against an independent model on random
//! snapshots; a snapshot without buckets answering country codes exactly as the chain
//! before buckets did; and the built-in continent table against the ISO 3166-1 list and
//! the userland twin's copy.

use std::collections::BTreeMap;

use dw_routing::{
    Continent, PickMode, Policy, Region, Snapshot, Table, builtin_continent, builtin_table,
    legacy_pick, rendezvous_pick,
};
use proptest::prelude::*;
use proptest::sample::select;

const PREFIX: &str = "/dw/routing/";

/// Country codes that matter: colliding with continent codes (AS NA SA AF), on either
/// side of a documented choice (TR CY RU EG PA GE), without a continent (XX T1, ZZ).
const COUNTRIES: [&str; 16] = [
    "US", "DE", "PT", "AS", "NA", "SA", "AF", "TR", "CY", "RU", "EG", "PA", "GE", "XX", "T1", "ZZ",
];
const SUBDIVISIONS: [&str; 6] = ["US-CA", "DE-BY", "GB-ENG", "PT-11", "XX-1", "AS-A"];
const BUCKETS: [&str; 10] = [
    "continent/AF",
    "continent/AN",
    "continent/AS",
    "continent/EU",
    "continent/NA",
    "continent/OC",
    "continent/SA",
    "continent/ZZ",
    "continent/eu",
    "continent/",
];

fn region_value(shard: &str) -> String {
    format!(
        r#"{{"shard":"{shard}","origins":["{shard}-a","{shard}-b"],"weight":{{"{shard}-a":3,"{shard}-b":2}}}}"#
    )
}

/// A key's value: valid (its shard names the geo) or not.
fn value_for(geo: &str) -> impl Strategy<Value = String> + use<> {
    let shard = format!("s-{}", geo.replace('/', "_"));
    prop_oneof![
        4 => Just(region_value(&shard)),
        1 => Just(r#"{"shard":"","origins":[]}"#.to_owned()),
        1 => Just("not json".to_owned()),
    ]
}

fn policy_geo() -> impl Strategy<Value = String> {
    prop_oneof![
        select(COUNTRIES.to_vec()).prop_map(str::to_owned),
        select(BUCKETS.to_vec()).prop_map(str::to_owned),
        select(SUBDIVISIONS.to_vec()).prop_map(str::to_owned),
    ]
}

fn snapshot() -> impl Strategy<Value = Snapshot> {
    let geos: Vec<&str> = COUNTRIES
        .iter()
        .chain(&SUBDIVISIONS)
        .chain(&BUCKETS)
        .copied()
        .chain(["opaque", "mars"])
        .collect();
    let keys = proptest::sample::subsequence(geos.clone(), 0..geos.len()).prop_flat_map(|geos| {
        geos.into_iter()
            .map(|geo| (Just(geo.to_owned()), value_for(geo)))
            .collect::<Vec<_>>()
    });
    let overrides = proptest::collection::vec(
        (
            select(COUNTRIES.to_vec()),
            select(vec!["AF", "AN", "AS", "EU", "NA", "OC", "SA", "XX", "eu"]),
        ),
        0..4,
    );
    let policy = (
        proptest::option::of(policy_geo()),
        proptest::collection::vec(policy_geo(), 0..4),
        any::<bool>(),
        overrides,
        any::<bool>(),
    );
    (keys, policy).prop_map(
        |(keys, (default, failover, rendezvous, overrides, has_policy))| {
            let mut snapshot = Snapshot::new(5, PREFIX);
            for (geo, value) in keys {
                snapshot.kvs.insert(format!("{PREFIX}region/{geo}"), value);
            }
            if has_policy {
                let mut policy = serde_json::Map::new();
                if let Some(default) = default {
                    policy.insert("default".into(), default.into());
                }
                policy.insert("failover".into(), failover.into());
                if rendezvous {
                    policy.insert("pick".into(), "rendezvous".into());
                }
                let overrides: serde_json::Map<String, serde_json::Value> = overrides
                    .into_iter()
                    .map(|(country, continent)| (country.to_owned(), continent.into()))
                    .collect();
                policy.insert("continent_of".into(), overrides.into());
                snapshot.kvs.insert(
                    format!("{PREFIX}policy/global"),
                    serde_json::Value::Object(policy).to_string(),
                );
            }
            snapshot
        },
    )
}

fn query() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        select(COUNTRIES.to_vec()).prop_map(|geo| geo.as_bytes().to_vec()),
        select(SUBDIVISIONS.to_vec()).prop_map(|geo| geo.as_bytes().to_vec()),
        select(BUCKETS.to_vec()).prop_map(|geo| geo.as_bytes().to_vec()),
        "[A-Z]{2}(-[A-Z0-9]{1,4})?".prop_map(String::into_bytes),
        proptest::collection::vec(any::<u8>(), 0..12),
        Just(Vec::new()),
    ]
}

/// The model: the chain spelled out from the snapshot's keys, with none of the table's
/// machinery. Returns the answering key's geo and the hash key.
fn model(snapshot: &Snapshot, geo: &[u8], sticky: Option<&[u8]>) -> Option<(String, Vec<u8>)> {
    let policy = snapshot
        .kvs
        .get(&format!("{PREFIX}policy/global"))
        .and_then(|value| Policy::parse(value.as_bytes()).ok())
        .unwrap_or_default();
    let valid = |geo: &str| {
        snapshot
            .kvs
            .get(&format!("{PREFIX}region/{geo}"))
            .is_some_and(|value| Region::parse(value.as_bytes()).is_ok())
    };
    let valid_bucket = |code: &str| {
        ["AF", "AN", "AS", "EU", "NA", "OC", "SA"].contains(&code)
            && valid(&format!("continent/{code}"))
    };
    let text = std::str::from_utf8(geo).ok();
    let is_cc = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_uppercase());
    let is_sub = |s: &str| {
        let b = s.as_bytes();
        b.len() >= 4
            && b.len() <= 6
            && b[..2].iter().all(u8::is_ascii_uppercase)
            && b[2] == b'-'
            && b[3..]
                .iter()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
    };
    let mut chain: Vec<(String, Vec<u8>)> = Vec::new();
    let mut country = None;
    match text {
        Some(s) if is_sub(s) => {
            chain.push((s.to_owned(), geo.to_vec()));
            country = Some(s[..2].to_owned());
        }
        Some(s) if is_cc(s) => country = Some(s.to_owned()),
        // An opaque geo: its own key, unless it is in the bucket namespace.
        Some(s) if !s.starts_with("continent/") => chain.push((s.to_owned(), geo.to_vec())),
        _ => {}
    }
    let mut steps: Vec<(String, bool)> = chain.into_iter().map(|(geo, _)| (geo, true)).collect();
    if let Some(country) = &country {
        steps.push((country.clone(), true));
        let overridden = policy
            .continent_of
            .iter()
            .rev()
            .find(|(code, _)| code == country.as_bytes())
            .map(|(_, continent)| *continent);
        if let Some(continent) = overridden.or_else(|| builtin_continent(country.as_bytes())) {
            steps.push((format!("continent/{}", continent.code()), false));
        }
    }
    let fallback_key = country
        .as_ref()
        .map_or_else(|| geo.to_vec(), |country| country.as_bytes().to_vec());
    let own = steps.iter().enumerate().find_map(|(index, (step, plain))| {
        let found = if *plain {
            valid(step)
        } else {
            valid_bucket(&step["continent/".len()..])
        };
        found.then(|| {
            // Only the subdivision's own key hashes the subdivision.
            let key = if index == 0 && country.is_some() && text.is_some_and(is_sub) {
                geo.to_vec()
            } else {
                fallback_key.clone()
            };
            (step.clone(), key)
        })
    });
    let answer = own.or_else(|| {
        std::iter::once(&policy.default)
            .chain(&policy.failover)
            .find(|geo| match geo.strip_prefix("continent/") {
                Some(code) => valid_bucket(code),
                None => valid(geo),
            })
            .map(|geo| (geo.clone(), fallback_key.clone()))
    })?;
    Some((answer.0, sticky.map_or(answer.1, <[u8]>::to_vec)))
}

fn expected_route(
    snapshot: &Snapshot,
    geo: &[u8],
    sticky: Option<&[u8]>,
) -> Option<(String, String)> {
    let (answering, hash_key) = model(snapshot, geo, sticky)?;
    let region = Region::parse(snapshot.kvs[&format!("{PREFIX}region/{answering}")].as_bytes())
        .expect("the model answers from valid regions");
    let rendezvous = Table::from_snapshot(snapshot).policy().pick == PickMode::Rendezvous;
    let origin = if rendezvous {
        rendezvous_pick(&region, &hash_key)
    } else {
        legacy_pick(&region, &hash_key)
    };
    Some((region.shard().to_owned(), origin.to_owned()))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn the_chain_answers_as_the_model(
        snapshot in snapshot(),
        queries in proptest::collection::vec((query(), proptest::option::of("[a-z0-9]{1,8}")), 1..12),
    ) {
        let table = Table::from_snapshot(&snapshot);
        let reread = Table::parse_after(&snapshot.to_json(), &Table::empty()).expect("a valid file");
        for (geo, sticky) in &queries {
            let sticky = sticky.as_deref().map(str::as_bytes);
            let expected = expected_route(&snapshot, geo, sticky);
            let got = table.resolve(geo, sticky).map(|r| (r.shard.to_owned(), r.origin.to_owned()));
            prop_assert_eq!(&got, &expected, "geo {:?}", String::from_utf8_lossy(geo));
            let reread = reread.resolve(geo, sticky).map(|r| (r.shard.to_owned(), r.origin.to_owned()));
            prop_assert_eq!(&reread, &expected);
            let explained = table.explain(geo, sticky).route.map(|r| (r.shard, r.origin));
            prop_assert_eq!(&explained, &expected);
            let (answering, hash_key) = model(&snapshot, geo, sticky).unzip();
            let explanation = table.explain(geo, sticky);
            prop_assert_eq!(explanation.route.as_ref().map(|r| r.geo.clone()), answering);
            prop_assert_eq!(
                explanation.route.as_ref().map(|r| r.hash_key.clone()),
                hash_key.map(|key| String::from_utf8_lossy(&key).into_owned())
            );
        }
    }

    #[test]
    fn without_buckets_a_country_routes_as_before(
        snapshot in snapshot(),
        country in "[A-Z0-9]{2}",
        sticky in proptest::option::of("[a-z]{1,4}"),
    ) {
        // The chain before buckets: the country's own key, then the policy's geos.
        let mut snapshot = snapshot;
        snapshot.kvs.retain(|key, _| !key.contains("/continent/"));
        let table = Table::from_snapshot(&snapshot);
        let policy = table.policy().clone();
        let sticky = sticky.as_deref().map(str::as_bytes);
        let before = std::iter::once(country.as_str())
            .chain(std::iter::once(policy.default.as_str()))
            .chain(policy.failover.iter().map(String::as_str))
            .find_map(|geo| table.region(geo.as_bytes()))
            .map(|region| {
                let key = sticky.unwrap_or(country.as_bytes());
                let origin = match policy.pick {
                    PickMode::Legacy => legacy_pick(region, key),
                    PickMode::Rendezvous => rendezvous_pick(region, key),
                };
                (region.shard().to_owned(), origin.to_owned())
            });
        let now = table.resolve(country.as_bytes(), sticky).map(|r| (r.shard.to_owned(), r.origin.to_owned()));
        prop_assert_eq!(now, before);
    }
}

#[test]
fn a_bucket_is_reached_only_through_the_chain() {
    let mut snapshot = Snapshot::new(3, PREFIX);
    for (geo, shard) in [
        ("US", "us-1"),
        ("continent/EU", "eu-1"),
        ("continent/AS", "asia-1"),
        ("AS", "samoa-1"),
        ("US-CA", "ca-1"),
        ("continent/XX", "never-1"),
    ] {
        snapshot
            .kvs
            .insert(format!("{PREFIX}region/{geo}"), region_value(shard));
    }
    snapshot.kvs.insert(
        format!("{PREFIX}policy/global"),
        r#"{"default":"US","continent_of":{"TR":"EU"}}"#.into(),
    );
    let table = Table::from_snapshot(&snapshot);
    let shard = |geo: &str| table.resolve(geo.as_bytes(), None).map(|r| r.shard);
    assert_eq!(shard("PT"), Some("eu-1"), "a country to its bucket");
    assert_eq!(
        shard("PT-11"),
        Some("eu-1"),
        "a subdivision to its country's bucket"
    );
    assert_eq!(shard("TR"), Some("eu-1"), "continent_of moves TR to Europe");
    assert_eq!(shard("AS"), Some("samoa-1"), "AS is American Samoa");
    assert_eq!(shard("JP"), Some("asia-1"));
    assert_eq!(
        shard("continent/EU"),
        Some("us-1"),
        "a caller never names a bucket"
    );
    assert_eq!(shard("XX"), Some("us-1"), "XX has no continent");
    assert_eq!(shard("T1"), Some("us-1"));
    assert_eq!(shard("US-CA"), Some("ca-1"));
    assert_eq!(
        table.invalid_keys()[0].key,
        "/dw/routing/region/continent/XX",
        "a bucket of no continent is refused"
    );
    // The hash key of a subdivision answered by its country is the country.
    for sticky in [None, Some(&b"k"[..])] {
        assert_eq!(
            table.resolve(b"US-NY", sticky),
            table.resolve(b"US", sticky)
        );
    }
    let explanation = table.explain(b"PT-11", None).to_json();
    let outcomes: Vec<(&str, &str)> = explanation["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|step| {
            (
                step["stage"].as_str().unwrap(),
                step["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("subdivision", "no key"),
            ("country", "no key"),
            ("continent", "answered")
        ]
    );
    assert_eq!(
        explanation["answered_by"],
        "/dw/routing/region/continent/EU"
    );
    assert_eq!(explanation["hash_key"], "PT");
    assert_eq!(explanation["continent_source"], "table");
    assert_eq!(
        table.explain(b"TR", None).to_json()["continent_source"],
        "policy.continent_of"
    );
    let fail_open = Table::empty().explain(b"DE", None).to_json();
    assert_eq!(fail_open["fail_open"], true);
    assert_eq!(fail_open["shard"], serde_json::Value::Null);
}

/// ISO 3166-1 alpha-2, every officially assigned code (249), from Debian's iso-codes
/// 4.15.0 (`iso_3166-1.json`).
const ISO_3166_1: &str = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW";

#[test]
fn every_assigned_code_and_kosovo_has_a_continent() {
    let codes: Vec<&str> = ISO_3166_1.split(' ').collect();
    assert_eq!(codes.len(), 249);
    for code in codes.iter().copied().chain(["XK"]) {
        assert!(builtin_continent(code.as_bytes()).is_some(), "{code}");
    }
    for none in ["XX", "T1", "EU", "ZZ"] {
        assert_eq!(builtin_continent(none.as_bytes()), None, "{none}");
    }
    // The documented choices (docs/routing.md): the source's, unmodified.
    for (code, continent) in [
        ("TR", Continent::AS),
        ("CY", Continent::EU),
        ("RU", Continent::AS),
        ("EG", Continent::AF),
        ("PA", Continent::NA),
        ("GE", Continent::AS),
        ("AM", Continent::AS),
        ("AZ", Continent::AS),
        ("XK", Continent::EU),
    ] {
        assert_eq!(
            builtin_continent(code.as_bytes()),
            Some(continent),
            "{code}"
        );
    }
}

#[test]
fn the_twin_holds_the_same_table() {
    let twin = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../php/Continents.php"
    ))
    .expect("php/Continents.php is readable");
    let begin = twin
        .find("public const CONTINENT_OF = [")
        .expect("the twin's generated table");
    let end = begin + twin[begin..].find("];").expect("its end");
    let mut in_twin = BTreeMap::new();
    for entry in twin[begin..end].split(',') {
        if let Some((code, continent)) = entry.split_once("=>") {
            let unquote = |text: &str| text.trim().trim_matches('\'').to_owned();
            let code = unquote(code.rsplit('[').next().unwrap_or(code));
            assert!(
                in_twin.insert(code.clone(), unquote(continent)).is_none(),
                "{code} twice"
            );
        }
    }
    let in_core: BTreeMap<String, String> = builtin_table()
        .map(|(code, continent)| (code.to_owned(), continent.code().to_owned()))
        .collect();
    assert_eq!(in_twin, in_core);
    assert!(twin.contains(&format!(
        "CONTINENT_TABLE_SOURCE = '{}'",
        dw_routing::CONTINENT_TABLE_SOURCE
    )));
}
