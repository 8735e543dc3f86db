//! What a publication purges from the page cache (docs/agent.md, "Purging the page
//! cache"): the lines the agent sends to `--purge-url`, diffed from the effective keys of
//! two publications, and the batches they go in.
//!
//! ```text
//!   region/<key>                 a region key added, changed or deleted (key %XX-encoded)
//!   policy/global:pick           the pick mode changed            (every routed page)
//!   policy/global:chain          default or failover changed      (pages answered by the chain)
//!   policy/global:continent_of   continent_of changed             (pages that used the mapping)
//!   policy/global:buckets        buckets (N) changed, on to on    (pages a visitor bucket decided)
//!                                or on to off; off to on is `all` (pages cached while off were
//!                                filed without a bucket: a new visitor would get no cookie)
//!   all                          the first publication, or a change that cannot be classified
//! ```
//!
//! Only `region/` keys and `policy/global` below the prefix can change an answer: routers
//! ignore every other key (`origin/<id>` included, see `dw_routing::Table::from_snapshot`).

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::keys::{POLICY, REGION};
use dw_routing::{Policy, Snapshot};
use serde_json::Value;

/// Everything routed depends on, purged by `dw`.
pub(crate) const ALL: &str = "all";
/// A pick mode change: every routed page (`dw`).
pub(crate) const PICK: &str = "policy/global:pick";
/// A `default` or `failover` change: pages answered through the chain (`dw:chain`).
pub(crate) const CHAIN: &str = "policy/global:chain";
/// A `continent_of` change: pages whose chain consulted the mapping (`dw:cont`).
pub(crate) const CONTINENT_OF: &str = "policy/global:continent_of";
/// A change of visitor buckets' N that leaves or keeps them on: pages a bucket decided
/// (`dw:b`, which `cacheTags()` gives a page whose origin the visitor's bucket picked).
pub(crate) const BUCKETS: &str = "policy/global:buckets";

/// The longest encoded key a `region/` line carries (the endpoint's grammar).
pub(crate) const MAX_LINE_KEY_BYTES: usize = 384;
/// The most lines in one request body.
pub(crate) const MAX_BATCH_LINES: usize = 1000;
/// The most bytes of one request body (lines and the `\n` between them).
pub(crate) const MAX_BATCH_BODY_BYTES: usize = 64 * 1024;
/// The most bytes of the `X-LiteSpeed-Purge` header a batch's tags make, the header's
/// name included (the endpoint answers 413 beyond 8000).
pub(crate) const MAX_BATCH_HEADER_BYTES: usize = 8000;
/// A tag longer than this is `dw:long` on the page (and in the purge).
const MAX_TAG_BYTES: usize = 128;
/// `X-LiteSpeed-Purge: `, counted in [`MAX_BATCH_HEADER_BYTES`].
const HEADER_NAME_BYTES: usize = "X-LiteSpeed-Purge: ".len();

/// Policy fields routing reads, each with the line a change of it sends.
const POLICY_FIELDS: [&str; 5] = ["default", "failover", "pick", "continent_of", "buckets"];
/// Policy fields that change with every write and change no answer: `updated`, the time
/// dwctl stamps on each value (docs/dwctl.md). A change of it alone purges nothing.
const POLICY_METADATA: [&str; 1] = ["updated"];

/// What routing reads from a published state, compact: each region key's value as a
/// 128-bit hash (a copy of every value would double the agent's memory), and the policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Routing {
    /// `<geo>` of each `region/<geo>` key → xxh3-128 of its value.
    regions: BTreeMap<String, u128>,
    /// The `policy/global` value, when there is one.
    policy: Option<String>,
}

impl Routing {
    /// The keys of `snapshot` that routing reads.
    pub(crate) fn of(snapshot: &Snapshot) -> Routing {
        let mut regions = BTreeMap::new();
        let mut policy = None;
        for (key, value) in &snapshot.kvs {
            let Some(relative) = key.strip_prefix(snapshot.prefix.as_str()) else {
                continue;
            };
            if let Some(geo) = relative.strip_prefix(REGION) {
                regions.insert(
                    geo.to_owned(),
                    xxhash_rust::xxh3::xxh3_128(value.as_bytes()),
                );
            } else if relative == POLICY {
                policy = Some(value.clone());
            }
        }
        Routing { regions, policy }
    }
}

/// The lines that purge what changed from `old` to `new` (`old`: `None` for the first
/// publication after start, which purges `all`). Sorted, no duplicates; a line that
/// purges every routed page (`all`, `policy/global:pick`) is sent alone.
pub(crate) fn lines(old: Option<&Routing>, new: &Routing) -> Vec<String> {
    let Some(old) = old else {
        return vec![ALL.to_owned()];
    };
    let mut lines = BTreeSet::new();
    let (mut a, mut b) = (old.regions.iter().peekable(), new.regions.iter().peekable());
    // A merge of two sorted maps: each key once, whether added, changed or deleted.
    loop {
        let changed = match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some(_), None) => a.next().map(|(geo, _)| geo),
            (None, Some(_)) => b.next().map(|(geo, _)| geo),
            (Some((x, hx)), Some((y, hy))) => match x.cmp(y) {
                std::cmp::Ordering::Less => a.next().map(|(geo, _)| geo),
                std::cmp::Ordering::Greater => b.next().map(|(geo, _)| geo),
                std::cmp::Ordering::Equal => {
                    let same = hx == hy;
                    a.next();
                    b.next().and_then(|(geo, _)| (!same).then_some(geo))
                }
            },
        };
        // `region/` itself names no geo: it never answers, so it changes nothing.
        if let Some(geo) = changed.filter(|geo| !geo.is_empty()) {
            lines.insert(region_line(geo));
        }
    }
    lines.extend(
        policy_lines(old.policy.as_deref(), new.policy.as_deref())
            .into_iter()
            .map(str::to_owned),
    );
    collapse(lines)
}

/// `lines` as sent: a line that purges every routed page makes the others redundant.
pub(crate) fn collapse(lines: BTreeSet<String>) -> Vec<String> {
    for everything in [ALL, PICK] {
        if lines.contains(everything) {
            return vec![everything.to_owned()];
        }
    }
    lines.into_iter().collect()
}

/// `region/<geo>`, the geo encoded as the tags encode it: bytes outside `A-Za-z0-9_./-`
/// as `%XX`. An encoding over [`MAX_LINE_KEY_BYTES`] is cut there (never inside a `%XX`):
/// its tags are over 128 bytes either way, so the line purges `dw:long`, as the page
/// answered by that key is tagged.
pub(crate) fn region_line(geo: &str) -> String {
    let mut line = String::with_capacity(REGION.len() + geo.len());
    line.push_str(REGION);
    for byte in geo.bytes() {
        let plain = byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'.' | b'/' | b'-');
        let width = if plain { 1 } else { 3 };
        if line.len() - REGION.len() + width > MAX_LINE_KEY_BYTES {
            break;
        }
        if plain {
            line.push(char::from(byte));
        } else {
            line.push_str(&format!("%{byte:02X}"));
        }
    }
    line
}

/// Which policy lines a change of the policy value from `old` to `new` sends. A value
/// that is absent or not a JSON object means the defaults, as routers read it. A change
/// of any field routing does not read (`honor_client_hints`, a field of tomorrow) may
/// change what an application does with `policy()`: it cannot be attributed, so `all`.
pub(crate) fn policy_lines(old: Option<&str>, new: Option<&str>) -> Vec<&'static str> {
    if old == new {
        return Vec::new();
    }
    let parse = |value: Option<&str>| {
        value
            .and_then(|value| Policy::parse(value.as_bytes()).ok())
            .unwrap_or_default()
    };
    let (was, is) = (parse(old), parse(new));
    let mut lines = Vec::new();
    if was.pick != is.pick {
        lines.push(PICK);
    }
    if was.default != is.default || was.failover != is.failover {
        lines.push(CHAIN);
    }
    if was.continent_of != is.continent_of {
        lines.push(CONTINENT_OF);
    }
    // Visitor buckets' N as routers read it (`Policy::buckets`, by
    // `dw_routing::parse_buckets_field`): 2 to 1024, anything else off (docs/routing.md,
    // "Buckets"); a value that is not a policy object is the defaults, off.
    match (was.buckets, is.buckets) {
        (was, is) if was == is => {}
        // Off to on: every page cached while off was filed without a dw_bucket cookie, and
        // LSCache would hand it to each new visitor, who would then never get a bucket.
        (None, Some(_)) => lines.push(ALL),
        _ => lines.push(BUCKETS),
    }
    if other_fields(old) != other_fields(new) {
        lines.push(ALL);
    }
    lines
}

/// The policy object without the fields routing reads (`None`: the value is not a JSON
/// object serde reads, taken as no other fields, as the defaults have none).
fn other_fields(value: Option<&str>) -> serde_json::Map<String, Value> {
    match value.and_then(|value| serde_json::from_str::<Value>(value).ok()) {
        Some(Value::Object(mut object)) => {
            for field in POLICY_FIELDS.iter().chain(&POLICY_METADATA) {
                object.remove(*field);
            }
            object
        }
        _ => serde_json::Map::new(),
    }
}

/// The bytes `line`'s tags take in the `X-LiteSpeed-Purge` header, each as `tag=T, `:
/// a region line's three tags (`dw:r:K`, `dw:m:K`, `dw:long`; only `dw:long` when the
/// others would be over 128 bytes), one tag for the others.
pub(crate) fn header_bytes(line: &str) -> usize {
    let tag = |bytes: usize| "tag=".len() + bytes + ", ".len();
    let long = tag("dw:long".len());
    match line.strip_prefix(REGION) {
        Some(key) if "dw:r:".len() + key.len() > MAX_TAG_BYTES => long,
        Some(key) => 2 * tag("dw:r:".len() + key.len()) + long,
        None => match line {
            CHAIN => tag("dw:chain".len()),
            CONTINENT_OF => tag("dw:cont".len()),
            BUCKETS => tag("dw:b".len()),
            _ => tag("dw".len()),
        },
    }
}

/// `lines` in request bodies (`\n`-joined) each within [`MAX_BATCH_LINES`],
/// [`MAX_BATCH_BODY_BYTES`] and [`MAX_BATCH_HEADER_BYTES`], in order.
pub(crate) fn batches(lines: &[String]) -> Vec<String> {
    let mut bodies = Vec::new();
    let mut body = String::new();
    let (mut count, mut header) = (0, HEADER_NAME_BYTES);
    for line in lines {
        let (line_bytes, tag_bytes) = (line.len() + usize::from(count > 0), header_bytes(line));
        let full = count == MAX_BATCH_LINES
            || body.len() + line_bytes > MAX_BATCH_BODY_BYTES
            || header + tag_bytes > MAX_BATCH_HEADER_BYTES;
        if full && count > 0 {
            bodies.push(std::mem::take(&mut body));
            (count, header) = (0, HEADER_NAME_BYTES);
        }
        if count > 0 {
            body.push('\n');
        }
        body.push_str(line);
        count += 1;
        header += tag_bytes;
    }
    if count > 0 {
        bodies.push(body);
    }
    bodies
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/dw/routing/";
    const DE: &str =
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

    fn snapshot(kvs: &[(&str, &str)]) -> Snapshot {
        let mut snapshot = Snapshot::new(7, P);
        for (key, value) in kvs {
            snapshot
                .kvs
                .insert(format!("{P}{key}"), (*value).to_owned());
        }
        snapshot
    }

    fn diff(old: &[(&str, &str)], new: &[(&str, &str)]) -> Vec<String> {
        lines(
            Some(&Routing::of(&snapshot(old))),
            &Routing::of(&snapshot(new)),
        )
    }

    #[test]
    fn the_first_publication_purges_all() {
        assert_eq!(lines(None, &Routing::of(&snapshot(&[]))), ["all"]);
        assert_eq!(
            lines(None, &Routing::of(&snapshot(&[("region/DE", DE)]))),
            ["all"]
        );
    }

    #[test]
    fn added_changed_and_deleted_region_keys_each_send_their_line() {
        let old = [("region/DE", DE), ("region/FR", DE), ("region/GB", DE)];
        let new = [("region/DE", "{}"), ("region/GB", DE), ("region/PT", DE)];
        assert_eq!(diff(&old, &new), ["region/DE", "region/FR", "region/PT"]);
        assert!(diff(&old, &old).is_empty(), "nothing changed");
        assert_eq!(
            diff(&[], &[("region/continent/EU", DE)]),
            ["region/continent/EU"]
        );
        assert_eq!(diff(&[("region/US-CA", DE)], &[]), ["region/US-CA"]);
    }

    #[test]
    fn keys_routing_does_not_read_purge_nothing() {
        // origin/<id> (leases), keys outside the prefix, and `region/` (no geo: invalid,
        // it never answers) change no answer.
        let old = [("region/DE", DE), ("origin/fra-a", r#"{"addr":1}"#)];
        let new = [
            ("region/DE", DE),
            ("origin/fra-a", r#"{"addr":2}"#),
            ("origin/new", "{}"),
            ("region/", DE),
            ("other/thing", "x"),
        ];
        assert!(diff(&old, &new).is_empty(), "{:?}", diff(&old, &new));
        let mut outside = snapshot(&[("region/DE", DE)]);
        outside.kvs.insert("/elsewhere/region/FR".into(), DE.into());
        assert_eq!(
            Routing::of(&outside),
            Routing::of(&snapshot(&[("region/DE", DE)]))
        );
    }

    #[test]
    fn a_drain_rewriting_thousands_of_regions_purges_each_once_in_batches() {
        // `dwctl drain fra-a` rewrites every region that lists it: 3000 keys, and one
        // region that does not list it stays as it was.
        let geos: Vec<String> = (0..3000).map(|n| format!("X{n:04}")).collect();
        let drained = DE.replace(r#","fra-b""#, "").replace(r#","fra-b":50"#, "");
        let old: Vec<(String, &str)> = geos.iter().map(|g| (format!("region/{g}"), DE)).collect();
        let new: Vec<(String, &str)> = geos
            .iter()
            .map(|g| (format!("region/{g}"), drained.as_str()))
            .collect();
        let as_refs = |kvs: &[(String, &str)]| -> Vec<(String, String)> {
            kvs.iter()
                .map(|(k, v)| (k.clone(), (*v).to_owned()))
                .collect()
        };
        let mut old_snapshot = snapshot(&[("region/ZZ", DE)]);
        let mut new_snapshot = old_snapshot.clone();
        for (key, value) in as_refs(&old) {
            old_snapshot.kvs.insert(format!("{P}{key}"), value);
        }
        for (key, value) in as_refs(&new) {
            new_snapshot.kvs.insert(format!("{P}{key}"), value);
        }
        let sent = lines(
            Some(&Routing::of(&old_snapshot)),
            &Routing::of(&new_snapshot),
        );
        assert_eq!(sent.len(), 3000);
        assert!(!sent.contains(&"region/ZZ".to_owned()));
        let bodies = batches(&sent);
        assert!(bodies.len() > 1);
        let rejoined: Vec<&str> = bodies.iter().flat_map(|b| b.split('\n')).collect();
        assert_eq!(rejoined, sent, "every line once, in order");
        for body in &bodies {
            assert_within_limits(body);
        }
    }

    fn assert_within_limits(body: &str) {
        let lines: Vec<&str> = body.split('\n').collect();
        assert!(lines.len() <= MAX_BATCH_LINES);
        assert!(body.len() <= MAX_BATCH_BODY_BYTES);
        let header = HEADER_NAME_BYTES + lines.iter().map(|l| header_bytes(l)).sum::<usize>();
        assert!(header <= MAX_BATCH_HEADER_BYTES, "{header}");
    }

    #[test]
    fn a_stage_opening_on_this_node_purges_the_keys_it_changes_here() {
        // The agent diffs effective states: the stage key itself is never published, the
        // staged value of region/DE is.
        let current = snapshot(&[("region/DE", DE), ("region/FR", DE)]);
        let stage = r#"{"schema":1,"id":"s1","cohort":{"nodes":["edge-1"]},
            "kvs":{"region/DE":"{\"shard\":\"eu-2\",\"origins\":[\"ber-a\"],\"weight\":{\"ber-a\":1}}"}}"#;
        let mut staged = current.clone();
        staged
            .kvs
            .insert(format!("{P}stage/s1"), stage.replace('\n', ""));
        let revisions = [(format!("{P}stage/s1"), 8)].into_iter().collect();
        let labels = BTreeMap::new();
        let here = dw_routing::stage::Node {
            id: "edge-1",
            labels: &labels,
        };
        let elsewhere = dw_routing::stage::Node {
            id: "edge-2",
            labels: &labels,
        };
        let on = dw_routing::stage::overlay(&staged, &revisions, Some(&here));
        assert!(on.problems.is_empty(), "{:?}", on.problems);
        let before = Routing::of(&current);
        assert_eq!(
            lines(Some(&before), &Routing::of(&on.snapshot)),
            ["region/DE"]
        );
        let off = dw_routing::stage::overlay(&staged, &revisions, Some(&elsewhere));
        assert!(lines(Some(&before), &Routing::of(&off.snapshot)).is_empty());
    }

    #[test]
    fn policy_changes_purge_by_the_field_that_changed() {
        let policy = |value: &str| {
            diff(
                &[("policy/global", r#"{"default":"US"}"#)],
                &[("policy/global", value)],
            )
        };
        assert_eq!(policy(r#"{"default":"GB"}"#), [CHAIN]);
        assert_eq!(policy(r#"{"default":"US","failover":["GB"]}"#), [CHAIN]);
        assert_eq!(
            policy(r#"{"default":"US","continent_of":{"TR":"EU"}}"#),
            [CONTINENT_OF]
        );
        assert_eq!(policy(r#"{"default":"US","pick":"rendezvous"}"#), [PICK]);
        assert_eq!(
            policy(r#"{"default":"GB","continent_of":{"TR":"EU"}}"#),
            [CHAIN, CONTINENT_OF]
        );
        // A pick change purges every routed page: the others go with it.
        assert_eq!(policy(r#"{"default":"GB","pick":"rendezvous"}"#), [PICK]);
        // Spelling only, or a value read the same (an unknown mode is legacy, a default
        // of another type is US): no answer changes.
        assert!(policy(r#"{ "default" : "US" }"#).is_empty());
        assert!(policy(r#"{"default":"US","pick":"legacy"}"#).is_empty());
        assert!(policy(r#"{"default":"US","pick":"nonsense"}"#).is_empty());
        assert!(policy(r#"{"default":5}"#).is_empty());
        // Absent, invalid or not an object: the defaults, the same as {"default":"US"}.
        assert!(diff(&[("policy/global", "[1]")], &[]).is_empty());
        assert!(diff(&[("policy/global", "{")], &[("policy/global", "{}")]).is_empty());
        assert_eq!(
            diff(&[], &[("policy/global", r#"{"default":"DE"}"#)]),
            [CHAIN]
        );
        assert_eq!(
            diff(&[("policy/global", r#"{"default":"DE"}"#)], &[]),
            [CHAIN]
        );
    }

    #[test]
    fn a_change_of_buckets_purges_the_pages_a_bucket_decided() {
        let policy =
            |old: &str, new: &str| diff(&[("policy/global", old)], &[("policy/global", new)]);
        // N changed, buckets on before and after: the pages a bucket decided (dw:b).
        assert_eq!(policy(r#"{"buckets":16}"#, r#"{"buckets":32}"#), [BUCKETS]);
        assert_eq!(policy(r#"{"buckets":2}"#, r#"{"buckets":1024}"#), [BUCKETS]);
        // On to off (0, absent, or a value routers read as off): the same pages.
        for off in [
            r#"{"buckets":0}"#,
            "{}",
            r#"{"buckets":1}"#,
            r#"{"buckets":1025}"#,
            r#"{"buckets":"16"}"#,
            r#"{"buckets":16.0}"#,
            "[1]",
        ] {
            assert_eq!(policy(r#"{"buckets":16}"#, off), [BUCKETS], "{off}");
            // Off to on: every routed page, cached while off without a bucket.
            assert_eq!(policy(off, r#"{"buckets":16}"#), [ALL], "{off}");
        }
        assert_eq!(diff(&[], &[("policy/global", r#"{"buckets":4}"#)]), [ALL]);
        assert_eq!(
            diff(&[("policy/global", r#"{"buckets":4}"#)], &[]),
            [BUCKETS]
        );
        // Read the same: nothing (spelling, off in two spellings, invalid and absent).
        assert!(policy(r#"{"buckets":16}"#, r#"{ "buckets" : 16 }"#).is_empty());
        assert!(policy(r#"{"buckets":0}"#, "{}").is_empty());
        assert!(policy(r#"{"buckets":1}"#, r#"{"buckets":0}"#).is_empty());
        assert!(
            policy(r#"{"buckets":16,"buckets":0}"#, "{}").is_empty(),
            "the last wins"
        );
        // With another field: each line, and `buckets` is no field of tomorrow (no `all`).
        assert_eq!(
            policy(
                r#"{"default":"US","buckets":16}"#,
                r#"{"default":"GB","buckets":64}"#
            ),
            [BUCKETS, CHAIN]
        );
        assert_eq!(header_bytes(BUCKETS), "tag=dw:b, ".len());
    }

    #[test]
    fn a_change_of_a_regions_assignment_purges_that_region() {
        // The region's `buckets` field (its assignment, docs/routing.md) is part of its
        // value: a change of it alone sends the region's line, as any value change does.
        let with = |assignment: &str| {
            DE.replace(
                r#""shard""#,
                &format!(r#""buckets":"{assignment}","shard""#),
            )
        };
        let (a, b) = (with("0:512,1:512"), with("0:511,1:513"));
        assert_eq!(
            diff(
                &[("region/DE", &a), ("region/FR", &a)],
                &[("region/DE", &b), ("region/FR", &a)]
            ),
            ["region/DE"]
        );
        assert_eq!(
            diff(&[("region/DE", DE)], &[("region/DE", &a)]),
            ["region/DE"]
        );
        assert!(diff(&[("region/DE", &a)], &[("region/DE", &a)]).is_empty());
    }

    #[test]
    fn a_policy_field_routing_does_not_read_purges_all() {
        let old = [("policy/global", r#"{"default":"US"}"#), ("region/DE", DE)];
        for value in [
            r#"{"default":"US","honor_client_hints":true}"#,
            r#"{"default":"US","future_field":{"x":1}}"#,
        ] {
            let new = [("policy/global", value), ("region/DE", "{}")];
            assert_eq!(diff(&old, &new), ["all"], "{value}");
        }
        assert_eq!(
            policy_lines(Some("{}"), Some(r#"{"zz":1,"default":"GB"}"#)),
            [CHAIN, ALL]
        );
    }

    #[test]
    fn the_updated_stamp_of_a_policy_write_purges_by_the_fields_only() {
        let at = |updated: &str, default: &str| {
            format!(r#"{{"default":"{default}","updated":"{updated}"}}"#)
        };
        let (a, b) = (
            at("2026-12-03T18:00:00Z", "US"),
            at("2026-12-03T18:00:01Z", "US"),
        );
        assert!(policy_lines(Some(&a), Some(&b)).is_empty());
        let c = at("2026-12-03T18:00:02Z", "GB");
        assert_eq!(policy_lines(Some(&b), Some(&c)), [CHAIN]);
    }

    #[test]
    fn keys_are_encoded_as_the_tags_encode_them() {
        assert_eq!(region_line("DE"), "region/DE");
        assert_eq!(region_line("continent/EU"), "region/continent/EU");
        assert_eq!(region_line("a_b.c-d"), "region/a_b.c-d");
        assert_eq!(region_line("a b"), "region/a%20b");
        assert_eq!(region_line("100%"), "region/100%25");
        assert_eq!(region_line("ü,\n"), "region/%C3%BC%2C%0A");
        assert_eq!(region_line("de"), "region/de");
    }

    #[test]
    fn a_key_longer_than_the_grammar_is_cut_at_its_edge() {
        let line = |geo: &str| region_line(geo).len() - REGION.len();
        assert_eq!(line(&"A".repeat(MAX_LINE_KEY_BYTES)), MAX_LINE_KEY_BYTES);
        assert_eq!(
            line(&"A".repeat(MAX_LINE_KEY_BYTES + 1)),
            MAX_LINE_KEY_BYTES
        );
        assert_eq!(line(&"%".repeat(128)), MAX_LINE_KEY_BYTES);
        // Never inside a %XX: 383 plain bytes leave no room for a 3-byte escape.
        let cut = region_line(&format!("{} ", "A".repeat(383)));
        assert_eq!(cut, format!("region/{}", "A".repeat(383)));
        // Such a line's tags are over 128 bytes: it is counted as dw:long alone.
        assert_eq!(header_bytes(&cut), "tag=dw:long, ".len());
    }

    #[test]
    fn header_bytes_count_three_tags_per_region_line() {
        // tag=dw:r:DE, tag=dw:m:DE, tag=dw:long,
        assert_eq!(header_bytes("region/DE"), 13 + 13 + 13);
        // The longest key with tags of 128 bytes: dw:r: + 123 bytes.
        let longest = format!("region/{}", "A".repeat(123));
        assert_eq!(header_bytes(&longest), 2 * (4 + 128 + 2) + 13);
        assert_eq!(header_bytes(&format!("region/{}", "A".repeat(124))), 13);
        assert_eq!(header_bytes(ALL), "tag=dw, ".len());
        assert_eq!(header_bytes(PICK), "tag=dw, ".len());
        assert_eq!(header_bytes(CHAIN), "tag=dw:chain, ".len());
        assert_eq!(header_bytes(CONTINENT_OF), "tag=dw:cont, ".len());
    }

    #[test]
    fn batches_split_at_the_header_limit_exactly() {
        // Each region/XX line: 39 header bytes; 19 + 204 × 39 = 7975 fits, 205 do not.
        let lines = |n: usize| -> Vec<String> {
            (0..n)
                .map(|i| {
                    format!(
                        "region/{}{}",
                        char::from(b'A' + (i / 26 % 26) as u8),
                        char::from(b'A' + (i % 26) as u8)
                    )
                })
                .collect()
        };
        assert_eq!(batches(&lines(204)).len(), 1);
        let two = batches(&lines(205));
        assert_eq!(two.len(), 2);
        assert_eq!(two[1].split('\n').count(), 1);
        for body in &two {
            assert_within_limits(body);
        }
        assert!(batches(&[]).is_empty());
        assert_eq!(batches(&["all".to_owned()]), ["all"]);
    }

    #[test]
    fn batches_split_at_the_body_limit() {
        // Long keys cost dw:long only in the header, so the body is what fills first:
        // 391-byte lines, 167 of them (plus 166 newlines) fit in 64 KiB, not 168.
        let long: Vec<String> = (0..400)
            .map(|n| format!("region/{n:03}{}", "A".repeat(MAX_LINE_KEY_BYTES - 3)))
            .collect();
        assert_eq!(long[0].len(), 391);
        let bodies = batches(&long);
        let counts: Vec<usize> = bodies.iter().map(|b| b.split('\n').count()).collect();
        assert_eq!(counts, [167, 167, 66]);
        assert!(bodies[0].len() <= MAX_BATCH_BODY_BYTES);
        assert!(bodies[0].len() + 392 > MAX_BATCH_BODY_BYTES);
        // The 1000-line cap never binds before the header's: the cheapest line costs 8
        // header bytes, and (8000 - 19) / 8 < 1000. It holds all the same.
        let cheap = vec![CHAIN.to_owned(); 5000];
        for body in batches(&cheap) {
            assert_within_limits(&body);
        }
    }
}
