//! Visitor buckets in a compiled table: `policy/global`'s `buckets`, each region's
//! effective assignment, and `resolve_bucketed`'s precedence (a sticky key, then a bucket,
//! then the country), through the public API.

use dw_routing::buckets::{AssignmentSource, BucketCount, reassign};
use dw_routing::{DEFAULT_PREFIX, Snapshot, Table};

const DE: &str = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;
const US: &str = r#"{"shard":"us-1","origins":["iad-a","iad-b","iad-c"],"weight":{"iad-a":1,"iad-b":1,"iad-c":2}}"#;
const EU: &str = r#"{"shard":"eu-9","origins":["ams-a","ams-b"],"weight":{"ams-a":1,"ams-b":3}}"#;

fn snapshot(entries: &[(&str, &str)]) -> Snapshot {
    let mut snapshot = Snapshot::new(42, DEFAULT_PREFIX);
    for (key, value) in entries {
        snapshot
            .kvs
            .insert(format!("{DEFAULT_PREFIX}{key}"), (*value).to_owned());
    }
    snapshot
}

fn table(entries: &[(&str, &str)]) -> Table {
    Table::from_snapshot(&snapshot(entries))
}

fn policy(buckets: &str) -> String {
    format!(r#"{{"default":"US","buckets":{buckets}}}"#)
}

/// The origin `resolve_bucketed` answers.
fn origin(table: &Table, geo: &str, sticky: Option<&str>, bucket: Option<u64>) -> String {
    table
        .resolve_bucketed(geo.as_bytes(), sticky.map(str::as_bytes), bucket)
        .map(|route| route.origin.to_owned())
        .unwrap_or_default()
}

#[test]
fn buckets_split_a_country_by_its_default_assignment() {
    let policy = policy("4");
    let table = table(&[
        ("policy/global", &policy),
        ("region/DE", DE),
        ("region/US", US),
    ]);
    assert_eq!(table.buckets().map(BucketCount::get), Some(4));
    let de = table.region_index(b"DE").unwrap();
    assert_eq!(table.assignment(de).unwrap().encode(), "0:2,1:2");
    assert_eq!(table.assignment_source(de), Some(AssignmentSource::Default));
    let answers: Vec<String> = (0..4)
        .map(|b| origin(&table, "DE", None, Some(b)))
        .collect();
    assert_eq!(answers, ["fra-a", "fra-a", "fra-b", "fra-b"]);
    // The answering region's counts: its own, a fallback's (FR goes to US).
    assert_eq!(table.bucket_counts(b"DE"), Some((de, vec![2, 2])));
    let us = table.region_index(b"US").unwrap();
    assert_eq!(table.bucket_counts(b"FR"), Some((us, vec![1, 1, 2])));
    assert_eq!(table.bucket_counts(b"DE-BY"), Some((de, vec![2, 2])));
    assert_eq!(origin(&table, "FR", None, Some(3)), "iad-c");
    assert_eq!(origin(&table, "DE-BY", None, Some(0)), "fra-a");
}

#[test]
fn a_sticky_key_wins_then_a_bucket_then_the_country() {
    let policy = policy("4");
    let table = table(&[
        ("policy/global", &policy),
        ("region/DE", DE),
        ("region/US", US),
    ]);
    for geo in ["DE", "FR", "DE-BY", "T1", "", "de"] {
        let plain = table.resolve(geo.as_bytes(), None);
        let sticky = table.resolve(geo.as_bytes(), Some(b"visitor-7"));
        for bucket in [None, Some(0), Some(3), Some(4), Some(u64::MAX)] {
            assert_eq!(
                table.resolve_bucketed(geo.as_bytes(), Some(b"visitor-7"), bucket),
                sticky,
                "{geo} {bucket:?}: the sticky key wins"
            );
        }
        for bucket in [None, Some(4), Some(65_536), Some(u64::MAX)] {
            assert_eq!(
                table.resolve_bucketed(geo.as_bytes(), None, bucket),
                plain,
                "{geo} {bucket:?}: as without a bucket"
            );
        }
    }
    assert!(table.bucket_applies(b"DE", 3));
    assert!(!table.bucket_applies(b"DE", 4));
}

#[test]
fn buckets_off_answers_as_without_a_bucket() {
    for policy in [
        None,
        Some("0"),
        Some("1"),
        Some("1025"),
        Some("\"16\""),
        Some("16.0"),
    ] {
        let policy = policy.map(self::policy);
        let mut entries = vec![("region/DE", DE), ("region/US", US)];
        if let Some(policy) = &policy {
            entries.push(("policy/global", policy));
        }
        let table = table(&entries);
        assert_eq!(table.buckets(), None, "{policy:?}");
        assert!(
            table.invalid_keys().is_empty(),
            "a bad `buckets` is not an invalid key"
        );
        let de = table.region_index(b"DE").unwrap();
        assert!(table.assignment(de).is_none());
        assert_eq!(table.bucket_counts(b"DE"), None);
        for bucket in [0, 1, 3] {
            assert_eq!(
                table.resolve_bucketed(b"DE", None, Some(bucket)),
                table.resolve(b"DE", None)
            );
            assert!(!table.bucket_applies(b"DE", bucket));
        }
    }
}

#[test]
fn without_sticky_and_bucket_the_answer_is_todays_even_with_n_set() {
    let off = table(&[
        ("region/DE", DE),
        ("region/US", US),
        ("region/continent/EU", EU),
    ]);
    let policy = policy("1024");
    let on = table(&[
        ("policy/global", &policy),
        ("region/DE", DE),
        ("region/US", US),
        ("region/continent/EU", EU),
    ]);
    for geo in ["DE", "FR", "US", "JP", "DE-BY", "T1", "", "continent/EU"] {
        assert_eq!(
            on.resolve(geo.as_bytes(), None),
            off.resolve(geo.as_bytes(), None)
        );
        assert_eq!(
            on.resolve_bucketed(geo.as_bytes(), None, None),
            off.resolve(geo.as_bytes(), None)
        );
        assert_eq!(
            on.resolve(geo.as_bytes(), Some(b"k")),
            off.resolve(geo.as_bytes(), Some(b"k"))
        );
    }
}

#[test]
fn a_stored_assignment_answers_and_a_bad_one_is_ignored_for_the_default() {
    let stored = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50},"buckets":"1:2,0:2"}"#;
    let policy4 = policy("4");
    let table4 = table(&[("policy/global", &policy4), ("region/DE", stored)]);
    let de = table4.region_index(b"DE").unwrap();
    assert_eq!(table4.assignment_source(de), Some(AssignmentSource::Stored));
    assert_eq!(origin(&table4, "DE", None, Some(0)), "fra-b");
    assert_eq!(origin(&table4, "DE", None, Some(3)), "fra-a");
    assert!(table4.ignored_assignments().is_empty());

    // N changed to 8: the assignment for 4 does not decode, the default for 8 answers.
    let policy8 = policy("8");
    let table8 = table(&[("policy/global", &policy8), ("region/DE", stored)]);
    assert_eq!(table8.assignment(de).unwrap().encode(), "0:4,1:4");
    let ignored = table8.ignored_assignments();
    assert_eq!(ignored.len(), 1);
    assert_eq!(ignored[0].0, "DE");
    assert_eq!(
        ignored[0].1.to_string(),
        "region: field `buckets`: covers 4 buckets, not the policy's 8"
    );
    assert!(table8.invalid_keys().is_empty(), "the value still routes");

    for bad in [r#""0:1,0:3""#, "12", "null", r#""""#, r#""0:4,""#] {
        let value = format!(
            r#"{{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{{"fra-a":50,"fra-b":50}},"buckets":{bad}}}"#
        );
        let table = table(&[("policy/global", &policy4), ("region/DE", &value)]);
        assert!(table.invalid_keys().is_empty(), "{bad}");
        assert_eq!(table.assignment(de).unwrap().encode(), "0:2,1:2", "{bad}");
        assert!(matches!(
            table.assignment_source(de),
            Some(AssignmentSource::DefaultStoredIgnored(_))
        ));
        assert_eq!(table.resolve(b"DE", None), table4.resolve(b"DE", None));
    }
}

#[test]
fn a_stale_assignment_is_reassigned_to_the_weights() {
    // fra-b drained by hand, the assignment left as it was: fra-b keeps no bucket.
    let drained = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":0},"buckets":"1:2,0:2"}"#;
    let policy = policy("4");
    let table = table(&[("policy/global", &policy), ("region/DE", drained)]);
    let de = table.region_index(b"DE").unwrap();
    assert_eq!(
        table.assignment_source(de),
        Some(AssignmentSource::Reassigned)
    );
    let stored =
        dw_routing::buckets::Assignment::decode("1:2,0:2", BucketCount::new(4).unwrap(), 2);
    assert_eq!(
        table.assignment(de),
        Some(&reassign(&stored.unwrap(), &[50, 0]).unwrap())
    );
    for bucket in 0..4 {
        assert_eq!(origin(&table, "DE", None, Some(bucket)), "fra-a");
    }
}

#[test]
fn a_reload_shares_assignments_of_the_same_n_and_rebuilds_them_for_another() {
    let policy4 = policy("4");
    let first = table(&[
        ("policy/global", &policy4),
        ("region/DE", DE),
        ("region/US", US),
    ]);
    let same = Table::from_snapshot_after(
        &snapshot(&[
            ("policy/global", &policy4),
            ("region/DE", DE),
            ("region/US", US),
        ]),
        &first,
    );
    let de = first.region_index(b"DE").unwrap();
    assert!(std::ptr::eq(
        first.assignment(de).unwrap(),
        same.assignment(de).unwrap()
    ));
    let policy16 = policy("16");
    let other = Table::from_snapshot_after(
        &snapshot(&[
            ("policy/global", &policy16),
            ("region/DE", DE),
            ("region/US", US),
        ]),
        &first,
    );
    assert_eq!(other.assignment(de).unwrap().encode(), "0:8,1:8");
    assert_eq!(
        first.assignment(de).unwrap().encode(),
        "0:2,1:2",
        "the old table keeps its own"
    );
    let off = Table::from_snapshot_after(&snapshot(&[("region/DE", DE)]), &other);
    assert!(off.assignment(de).is_none());
    // From a file too (the reload path the extension takes).
    let bytes = |policy: &str| {
        let snapshot = snapshot(&[("policy/global", policy), ("region/DE", DE)]);
        snapshot.to_json()
    };
    let parsed = Table::parse(&bytes(&policy4)).unwrap();
    let reparsed = Table::parse_after(&bytes(&policy16), &parsed).unwrap();
    assert_eq!(reparsed.assignment(de).unwrap().encode(), "0:8,1:8");
    assert_eq!(origin(&reparsed, "DE", None, Some(7)), "fra-a");
    assert_eq!(origin(&reparsed, "DE", None, Some(8)), "fra-b");
}

#[test]
fn explain_says_what_the_bucket_did_and_agrees_with_resolve() {
    let policy = policy("4");
    let table = table(&[
        ("policy/global", &policy),
        ("region/DE", DE),
        ("region/US", US),
    ]);
    let cases: [(&str, Option<&str>, Option<u64>, &str); 6] = [
        (
            "DE",
            None,
            Some(2),
            "picked by the region's assignment (default)",
        ),
        (
            "DE",
            Some("k"),
            Some(2),
            "ignored: a sticky key wins over a bucket",
        ),
        (
            "DE",
            None,
            Some(4),
            "ignored: not below the policy's buckets (answered as without a bucket)",
        ),
        (
            "FR",
            None,
            Some(3),
            "picked by the region's assignment (default)",
        ),
        (
            "T1",
            None,
            Some(0),
            "picked by the region's assignment (default)",
        ),
        (
            "DE-BY",
            None,
            Some(1),
            "picked by the region's assignment (default)",
        ),
    ];
    for (geo, sticky, bucket, outcome) in cases {
        let explanation = table.explain_bucketed(geo.as_bytes(), sticky.map(str::as_bytes), bucket);
        let json = explanation.to_json();
        assert_eq!(
            json["bucket_outcome"], outcome,
            "{geo} {sticky:?} {bucket:?}"
        );
        assert_eq!(json["buckets"], 4);
        assert_eq!(json["bucket"], bucket.unwrap());
        let resolved = table
            .resolve_bucketed(geo.as_bytes(), sticky.map(str::as_bytes), bucket)
            .map(|route| route.origin.to_owned());
        assert_eq!(explanation.route.map(|route| route.origin), resolved);
        let from = json["hash_key_from"].as_str().unwrap().to_owned();
        assert_eq!(from == "bucket", outcome.starts_with("picked"), "{geo}");
    }
    let off = table_without_buckets();
    let json = off.explain_bucketed(b"DE", None, Some(1)).to_json();
    assert_eq!(
        json["bucket_outcome"],
        "ignored: policy/global has no buckets (answered as without a bucket)"
    );
    assert_eq!(json["buckets"], 0);
    // Without a bucket the explanation keeps its shape: no bucket fields.
    assert!(table.explain(b"DE", None).to_json().get("bucket").is_none());
    // A stored assignment ignored says why.
    let stored = r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50},"buckets":"0:1,1:1"}"#;
    let ignored = table_with(&policy, stored);
    assert_eq!(
        ignored.explain_bucketed(b"DE", None, Some(0)).to_json()["bucket_outcome"],
        "picked by the region's assignment (default, the stored one ignored: region: field \
         `buckets`: covers 2 buckets, not the policy's 4)"
    );
}

fn table_without_buckets() -> Table {
    table(&[("region/DE", DE), ("region/US", US)])
}

fn table_with(policy: &str, de: &str) -> Table {
    table(&[("policy/global", policy), ("region/DE", de)])
}

#[test]
fn ignored_assignments_without_a_table_are_the_tables() {
    let stored = |buckets: &str| {
        format!(
            r#"{{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{{"fra-a":50,"fra-b":50}},"buckets":{buckets}}}"#
        )
    };
    let (good, stale, not_text) = (stored(r#""1:2,0:2""#), stored(r#""0:8""#), stored("12"));
    for policy in [policy("4"), policy("8"), policy("0"), "not json".to_owned()] {
        let entries = [
            ("policy/global", policy.as_str()),
            ("region/DE", good.as_str()),
            ("region/FR", stale.as_str()),
            ("region/GB", "not json"),
            ("region/US", US),
            ("region/continent/EU", not_text.as_str()),
        ];
        let from_table: Vec<(String, String)> = table(&entries)
            .ignored_assignments()
            .into_iter()
            .map(|(geo, error)| (format!("{DEFAULT_PREFIX}region/{geo}"), error.to_string()))
            .collect();
        let streamed: Vec<(String, String)> = dw_routing::ignored_assignments(&snapshot(&entries))
            .into_iter()
            .map(|ignored| (ignored.key, ignored.error.to_string()))
            .collect();
        assert_eq!(streamed, from_table, "{policy}");
        // N 4: FR (covers 8) and EU (not text); N 8: DE (covers 4), EU; off: none.
        let expected = match policy.as_str() {
            p if p == self::policy("4") => 2,
            p if p == self::policy("8") => 2,
            _ => 0,
        };
        assert_eq!(streamed.len(), expected, "{policy}: {streamed:?}");
    }
}
