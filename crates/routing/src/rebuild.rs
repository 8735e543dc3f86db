//! Building a [`Table`]: from a [`Snapshot`], or from a snapshot file's bytes after the
//! table before it, reusing every region whose value has not changed, so that a reload
//! after a drain validates only what changed.

use std::borrow::Cow;
use std::sync::Arc;

use crate::buckets::{AssignmentSource, effective_assignment};
use crate::continent::{BUCKET_PREFIX, Continent, bucket_of_geo};
use crate::error::Error;
use crate::keys::{DEFAULT_PREFIX, POLICY as POLICY_KEY, REGION as REGION_KIND};
use crate::literal_scan;
use crate::policy::Policy;
use crate::region::Region;
use crate::snapshot::{self, Snapshot};
use crate::table::{Compiled, InvalidKey, Table, stored_of};

/// A position in a table's regions, moved forward only: readings meet geos in key order,
/// as the table holds them, so finding each one is a step, not a lookup.
struct Cursor<'t> {
    table: &'t Table,
    at: usize,
}

impl<'t> Cursor<'t> {
    fn new(table: &'t Table) -> Cursor<'t> {
        Cursor { table, at: 0 }
    }

    /// The index of `geo`'s region, if the table has it at or after the cursor. A geo out
    /// of order is not found (the caller then does without the previous table's help).
    fn seek(&mut self, geo: &str) -> Option<usize> {
        while self.at < self.table.region_count() {
            match self.table.geo_at(self.at).cmp(geo) {
                std::cmp::Ordering::Less => self.at += 1,
                std::cmp::Ordering::Equal => return Some(self.at),
                std::cmp::Ordering::Greater => return None,
            }
        }
        None
    }
}

/// A value as a table is built from it: plain text, or the JSON string literal that
/// holds it in a snapshot file.
#[derive(Clone, Copy)]
enum Value<'v> {
    Plain(&'v str),
    Escaped(&'v str),
}

impl<'v> Value<'v> {
    fn text(self) -> Option<Cow<'v, str>> {
        match self {
            Value::Plain(text) => Some(Cow::Borrowed(text)),
            Value::Escaped(literal) => serde_json::from_str::<String>(literal).ok().map(Cow::Owned),
        }
    }

    fn literal(self) -> Option<&'v str> {
        match self {
            Value::Plain(_) => None,
            Value::Escaped(literal) => Some(literal),
        }
    }
}

impl Table {
    /// Compiles a snapshot. Never fails: an invalid region or policy is left out and
    /// recorded in [`Table::invalid_keys`]; keys outside the prefix or of other kinds
    /// (`origin/...`) are ignored.
    pub fn from_snapshot(snapshot: &Snapshot) -> Table {
        Table::from_snapshot_after(snapshot, &Table::empty())
    }

    /// [`Table::from_snapshot`], reusing `previous`'s compiled regions whose value is
    /// byte for byte the same: a reload after a drain re-validates only what changed.
    pub fn from_snapshot_after(snapshot: &Snapshot, previous: &Table) -> Table {
        let entries = snapshot
            .kvs
            .iter()
            .map(|(key, value)| (key.as_str(), Value::Plain(value), None));
        build(snapshot.revision, &snapshot.prefix, entries, previous)
            .map(|table| table.with_stages(snapshot.stages.clone()))
            .unwrap_or_else(Table::empty)
    }

    /// Parses snapshot bytes and compiles them. Fails only when the file as a whole is
    /// unreadable ([`Error::Snapshot`]).
    pub fn parse(bytes: &[u8]) -> Result<Table, Error> {
        Ok(Table::from_snapshot(&Snapshot::parse(bytes)?))
    }

    /// [`Table::parse`], reusing `previous`'s unchanged regions (see
    /// [`Table::from_snapshot_after`]).
    pub fn parse_after(bytes: &[u8], previous: &Table) -> Result<Table, Error> {
        if let Some(table) = parse_common_after(bytes, previous) {
            return Ok(table);
        }
        Ok(Table::from_snapshot_after(
            &Snapshot::parse(bytes)?,
            previous,
        ))
    }
}

/// Compiles `entries` (full key, value, and the index of `previous`'s region already
/// known to hold the same value, if any) at `revision`. `None` only when an escaped
/// value turns out not to be a JSON string (then the exact reading decides).
fn build<'v>(
    revision: u64,
    prefix: &str,
    entries: impl Iterator<Item = (&'v str, Value<'v>, Option<usize>)>,
    previous: &Table,
) -> Option<Table> {
    let mut table = Table::sized_like(revision, prefix, previous);
    let mut cursor = Cursor::new(previous);

    for (key, value, known_unchanged) in entries {
        let Some(relative) = key.strip_prefix(prefix) else {
            continue;
        };
        if let Some(geo) = relative.strip_prefix(REGION_KIND) {
            if let Err(error) = check_geo(geo) {
                table.push_invalid_key(key, error);
                continue;
            }
            // The previous table's region for this geo, if its value is the same: it is
            // shared, with no unescaping and no validation.
            let unchanged = known_unchanged.or_else(|| {
                cursor.seek(geo).filter(|&index| match value {
                    Value::Plain(text) => *previous.compiled_at(index).value == *text,
                    Value::Escaped(literal) => previous.literal_at(index) == Some(literal),
                })
            });
            if let Some(index) = unchanged {
                let compiled = Arc::clone(previous.compiled_at(index));
                table.push_region(compiled, geo, value.literal());
                continue;
            }
            let text = value.text()?;
            match parse_region(geo, text.as_ref()) {
                Ok(region) => {
                    let compiled = Arc::new(Compiled::new(text.into(), region));
                    table.push_region(compiled, geo, value.literal());
                }
                Err(error) => table.push_invalid_key(key, error),
            }
        } else if relative == POLICY_KEY {
            match Policy::parse(value.text()?.as_bytes()) {
                Ok(policy) => table.set_policy(policy),
                Err(error) => table.push_invalid_key(key, error),
            }
        }
    }
    table.finish();
    Some(table)
}

/// Why a `region/<geo>` key cannot route whatever its value: it names no geo, or a
/// bucket of no continent.
fn check_geo(geo: &str) -> Result<(), Error> {
    if geo.is_empty() {
        return Err(Error::Region {
            field: "geo",
            reason: "the key names no geo".into(),
        });
    }
    if bucket_of_geo(geo.as_bytes()) == Some(None) {
        return Err(Error::Region {
            field: "geo",
            reason: format!(
                "`{BUCKET_PREFIX}` names none of the continents {}",
                Continent::ALL.map(Continent::code).join(" ")
            ),
        });
    }
    Ok(())
}

/// The region a `region/<geo>` key's value compiles to, or why it is left out.
fn parse_region(geo: &str, text: &str) -> Result<Region, Error> {
    check_geo(geo)?;
    Region::parse(text.as_bytes())
}

/// The keys of `snapshot` that [`Table::from_snapshot`] would leave out, with why, in key
/// order, checked one at a time: what a table's [`Table::invalid_keys`] says, without
/// building (and holding) the table. The agent reports them after each publication.
pub fn invalid_keys(snapshot: &Snapshot) -> Vec<InvalidKey> {
    let mut invalid = Vec::new();
    for (key, value) in &snapshot.kvs {
        let Some(relative) = key.strip_prefix(snapshot.prefix.as_str()) else {
            continue;
        };
        let checked = if let Some(geo) = relative.strip_prefix(REGION_KIND) {
            parse_region(geo, value).map(drop)
        } else if relative == POLICY_KEY {
            Policy::parse(value.as_bytes()).map(drop)
        } else {
            continue;
        };
        if let Err(error) = checked {
            invalid.push(InvalidKey {
                key: key.clone(),
                error,
            });
        }
    }
    invalid
}

/// The regions of `snapshot` whose stored `buckets` field (their assignment) routers
/// ignore for the policy's N, answering with the default assignment instead, with why,
/// in key order (full keys): what a table's [`Table::ignored_assignments`] says, checked
/// one region at a time without building (and holding) the table, like [`invalid_keys`].
/// Empty when buckets are off (or the policy is invalid: the defaults, off). The agent
/// reports them after each publication.
pub fn ignored_assignments(snapshot: &Snapshot) -> Vec<InvalidKey> {
    let policy = [snapshot.prefix.as_str(), POLICY_KEY].concat();
    let Some(n) = snapshot
        .kvs
        .get(&policy)
        .and_then(|value| Policy::parse(value.as_bytes()).ok())
        .and_then(|policy| policy.buckets)
    else {
        return Vec::new();
    };
    let mut ignored = Vec::new();
    for (key, value) in &snapshot.kvs {
        let Some(geo) = key
            .strip_prefix(snapshot.prefix.as_str())
            .and_then(|relative| relative.strip_prefix(REGION_KIND))
        else {
            continue;
        };
        let Ok(region) = parse_region(geo, value) else {
            continue;
        };
        if let Ok((_, AssignmentSource::DefaultStoredIgnored(error))) =
            effective_assignment(stored_of(&region), region.listed_weights(), n)
        {
            ignored.push(InvalidKey {
                key: key.clone(),
                error,
            });
        }
    }
    ignored
}

/// The common case of [`Table::parse_after`]: one pass over the file that keeps each
/// value as its JSON string literal (see [`crate::literal_scan`]), so that an unchanged
/// region is recognised by comparing bytes, without checking or unescaping it again.
/// `None` whenever the exact reading must decide.
fn parse_common_after(bytes: &[u8], previous: &Table) -> Option<Table> {
    let text = snapshot::common_text(bytes)?;
    let mut cursor = Cursor::new(previous);
    let known = |key: &str| {
        let geo = key
            .strip_prefix(previous.prefix())?
            .strip_prefix(REGION_KIND)?;
        let index = cursor.seek(geo)?;
        Some((index, previous.literal_at(index)?))
    };
    let snapshot = literal_scan::scan(text, known)?;
    let prefix = snapshot.prefix.unwrap_or(DEFAULT_PREFIX);
    // A compiled region depends on its value alone, so a value the scan found byte for
    // byte in the previous table reuses that region, whatever geo it is under now.
    let entries = snapshot
        .kvs
        .iter()
        .map(|entry| (entry.key, Value::Escaped(entry.literal), entry.unchanged));
    build(snapshot.revision, prefix, entries, previous)
        .map(|table| table.with_stages(snapshot.stages.clone()))
}

#[cfg(test)]
mod tests {
    use crate::{DEFAULT_PREFIX, Region, Snapshot, Table};

    #[test]
    fn invalid_keys_says_what_a_table_leaves_out() {
        let file = serde_json::json!({"format": 1, "revision": 9, "kvs": {
            "/dw/routing/origin/fra-a": "{}",
            "/dw/routing/policy/global": "[1]",
            "/dw/routing/region/": "{\"shard\":\"eu-1\",\"origins\":[\"a\"],\"weight\":{\"a\":1},\"updated\":\"2026-11-30T08:00:00Z\"}",
            "/dw/routing/region/DE": "{\"shard\":\"eu-1\",\"origins\":[\"a\"],\"weight\":{\"a\":1},\"updated\":\"2026-11-30T08:00:00Z\"}",
            "/dw/routing/region/FR": "not json",
            "/dw/routing/region/IT": "{\"shard\":\"\",\"origins\":[]}",
            "/other/region/XX": "not json"}})
        .to_string();
        let snapshot = Snapshot::parse(file.as_bytes()).expect("the test file parses");
        let expected = Table::from_snapshot(&snapshot).invalid_keys().to_vec();
        let keys: Vec<&str> = expected.iter().map(|k| k.key.as_str()).collect();
        assert_eq!(
            keys,
            [
                "/dw/routing/policy/global",
                "/dw/routing/region/",
                "/dw/routing/region/FR",
                "/dw/routing/region/IT"
            ]
        );
        assert_eq!(crate::invalid_keys(&snapshot), expected);
    }

    #[test]
    fn the_one_pass_readings_hand_edge_files_to_the_exact_one() {
        // A lone surrogate, as PHP refuses it, in a key and in a value.
        for file in [
            &br#"{"format":1,"revision":1,"kvs":{"/dw/routing/region/\ud800":"x"}}"#[..],
            br#"{"format":1,"revision":1,"kvs":{"/dw/routing/region/DE":"\udc00"}}"#,
        ] {
            assert!(Snapshot::parse(file).is_err());
            assert!(Table::parse_after(file, &Table::empty()).is_err());
        }
        // An unknown field, however deep, is ignored by the exact reading up to PHP's limit.
        let deep = format!(
            r#"{{"format":1,"revision":4,"kvs":{{}},"extra":{}{}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(
            Table::parse_after(deep.as_bytes(), &Table::empty())
                .unwrap()
                .revision(),
            4
        );
        let too_deep = format!(
            r#"{{"format":1,"revision":4,"kvs":{{}},"extra":{}{}}}"#,
            "[".repeat(600),
            "]".repeat(600)
        );
        assert!(Table::parse_after(too_deep.as_bytes(), &Table::empty()).is_err());
        assert!(Snapshot::parse(too_deep.as_bytes()).is_err());
    }

    #[test]
    fn arrays_in_place_of_objects_are_refused_by_every_reading() {
        // serde's derived structs accept a sequence of the fields; PHP does not.
        assert!(Region::parse(br#"["x-1",["a"],{"a":1}]"#).is_err());
        assert!(Region::parse(br#" ["x-1",["a"],{"a":1}]"#).is_err());
        assert!(Snapshot::parse(br#"[1,7,"/dw/routing/",{}]"#).is_err());
        assert!(Region::parse(br#"{"shard":"x","origins":["a"],"weight":[1]}"#).is_err());
    }

    #[test]
    fn reading_a_file_after_a_table_answers_as_a_fresh_read() {
        let region = |origin: &str, weight: u32| {
            format!(
                r#"{{"shard":"eu-1","origins":["{origin}","b"],"weight":{{"{origin}":{weight},"b":40}}}}"#
            )
        };
        let mut snapshot = Snapshot::new(1, DEFAULT_PREFIX);
        snapshot
            .kvs
            .insert("/dw/routing/region/DE".into(), region("a", 60));
        snapshot
            .kvs
            .insert("/dw/routing/region/FR".into(), region("c", 10));
        snapshot.kvs.insert(
            "/dw/routing/policy/global".into(),
            r#"{"default":"FR"}"#.into(),
        );
        let first = Table::parse_after(&snapshot.to_json(), &Table::empty()).unwrap();
        snapshot.revision = 2;
        snapshot
            .kvs
            .insert("/dw/routing/region/FR".into(), region("c", 90));
        snapshot
            .kvs
            .insert("/dw/routing/region/NL".into(), "{".into());
        let bytes = snapshot.to_json();
        let (after, fresh) = (
            Table::parse_after(&bytes, &first).unwrap(),
            Table::parse(&bytes).unwrap(),
        );
        assert_eq!(after.revision(), 2);
        assert_eq!(after.region_count(), fresh.region_count());
        assert_eq!(after.invalid_keys().len(), 1);
        assert_eq!(after.region(b"FR"), fresh.region(b"FR"));
        assert_eq!(after.region(b"DE"), first.region(b"DE"));
        assert_eq!(after.policy(), fresh.policy());
        for key in 0..200u32 {
            let key = key.to_string();
            for country in [&b"DE"[..], b"FR", b"XX"] {
                let (a, b) = (
                    after.resolve(country, Some(key.as_bytes())),
                    fresh.resolve(country, Some(key.as_bytes())),
                );
                assert_eq!(
                    a.map(|r| (r.shard, r.origin)),
                    b.map(|r| (r.shard, r.origin))
                );
            }
        }
        // A file the one-pass reading declines still loads through the exact reading.
        let array_value = br#"{"format":1,"revision":3,"kvs":{"/dw/routing/region/DE":5}}"#;
        assert!(Table::parse_after(array_value, &first).is_err());
    }

    #[test]
    fn a_reload_reuses_unchanged_regions_and_reparses_changed_ones() {
        let region = |origin: &str| {
            format!(
                r#"{{"shard":"eu-1","origins":["{origin}","b"],"weight":{{"{origin}":60,"b":40}}}}"#
            )
        };
        let mut first = Snapshot::new(1, DEFAULT_PREFIX);
        first
            .kvs
            .insert("/dw/routing/region/DE".into(), region("a"));
        first
            .kvs
            .insert("/dw/routing/region/FR".into(), region("c"));
        let previous = Table::from_snapshot(&first);

        let mut second = first.clone();
        second.revision = 2;
        second
            .kvs
            .insert("/dw/routing/region/FR".into(), r#"{"shard":""}"#.into());
        second
            .kvs
            .insert("/dw/routing/region/NL".into(), region("n"));
        let reloaded = Table::from_snapshot_after(&second, &previous);
        let fresh = Table::from_snapshot(&second);

        assert_eq!(reloaded.revision(), 2);
        assert_eq!(reloaded.region_count(), fresh.region_count());
        assert_eq!(
            reloaded.region_count(),
            2,
            "DE reused, NL new, FR now invalid"
        );
        assert_eq!(reloaded.invalid_keys().len(), 1);
        assert_eq!(reloaded.invalid_keys()[0].key, "/dw/routing/region/FR");
        for country in [&b"DE"[..], b"FR", b"NL", b"XX"] {
            for key in [None, Some(&b"v1"[..]), Some(b"v2")] {
                let (a, b) = (reloaded.resolve(country, key), fresh.resolve(country, key));
                assert_eq!(
                    a.map(|r| (r.shard, r.origin)),
                    b.map(|r| (r.shard, r.origin))
                );
            }
        }
        assert_eq!(reloaded.region(b"DE"), previous.region(b"DE"));
    }
}
