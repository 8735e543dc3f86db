//! The compiled routing table: what a snapshot means for routing, built once and then read
//! by any number of threads.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::keys::{POLICY as POLICY_KEY, REGION as REGION_KIND};
use crate::pick::{legacy_index, rendezvous_index};
use crate::{Error, PickMode, Policy, Region, Snapshot};

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
    /// Geos of more than 7 bytes to index into `regions`. FxHash: the keys come from
    /// configuration, and a visitor's country only probes, so a fast unkeyed hash is safe.
    by_long_geo: FxHashMap<Box<[u8]>, u32>,
    /// The same for other geos of at most 7 bytes, keyed by the packed bytes: one integer
    /// hash and compare instead of a slice hash and a memcmp, and no allocation for the
    /// key when a table is built.
    by_short_geo: FxHashMap<u64, u32>,
    /// Geos of two characters from `A-Z0-9` (every `CF-IPCountry` value: ISO codes, `XX`,
    /// `T1`): the region index at `code(first) * 36 + code(second)`, [`NO_REGION`] if none.
    /// No hashing at all for the common case.
    by_country_code: Box<[u32]>,
    /// The longest geo: a longer country cannot match, so it is not even hashed.
    longest_geo: usize,
    /// The region of the first of `policy.default`, `policy.failover...` that has one.
    fallback: Option<u32>,
    invalid_keys: Vec<InvalidKey>,
}

/// A valid region with the value it was compiled from.
#[derive(Debug)]
struct Compiled {
    /// The raw value, to recognise it unchanged when a table is built from a [`Snapshot`].
    value: Box<str>,
    region: Region,
}

/// Where one region's geo and value literal sit in a table's `geo_text` and
/// `literal_text`, as (start, length). No literal when the table was built from a
/// [`Snapshot`] rather than read from a file.
#[derive(Debug, Clone, Copy)]
struct RegionText {
    geo: (usize, usize),
    literal: Option<(usize, usize)>,
}

/// A position in a table's regions, moved forward only: readings meet geos in key order,
/// as the table holds them, so finding each one is a step, not a lookup.
struct Cursor<'t> {
    table: &'t Table,
    at: usize,
}

impl<'t> Cursor<'t> {
    /// The index of `geo`'s region, if the table has it at or after the cursor. A geo out
    /// of order is not found (the caller then does without the previous table's help).
    fn seek(&mut self, geo: &str) -> Option<usize> {
        while self.at < self.table.texts.len() {
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
    fn text(self) -> Option<std::borrow::Cow<'v, str>> {
        match self {
            Value::Plain(text) => Some(std::borrow::Cow::Borrowed(text)),
            Value::Escaped(literal) => serde_json::from_str::<String>(literal)
                .ok()
                .map(std::borrow::Cow::Owned),
        }
    }

    fn literal(self) -> Option<&'v str> {
        match self {
            Value::Plain(_) => None,
            Value::Escaped(literal) => Some(literal),
        }
    }
}

/// Up to 7 bytes and their length in one integer (bytes in the low 7, the length in the
/// top one); distinct inputs give distinct keys. Two overlapping loads, no byte loop and no
/// memcpy: the overlapped bytes are the same in both, so or-ing them is exact.
#[inline]
fn pack_short_geo(geo: &[u8]) -> Option<u64> {
    let len = geo.len();
    let bytes = match *geo {
        [] => 0,
        [first] => u64::from(first),
        [first, second, ..] if len <= 3 => {
            let head = u64::from(u16::from_le_bytes([first, second]));
            let tail = u64::from(u16::from_le_bytes([geo[len - 2], geo[len - 1]]));
            head | tail << (8 * (len - 2))
        }
        [a, b, c, d, ..] if len <= 7 => {
            let head = u64::from(u32::from_le_bytes([a, b, c, d]));
            let tail = u64::from(u32::from_le_bytes([
                geo[len - 4],
                geo[len - 3],
                geo[len - 2],
                geo[len - 1],
            ]));
            head | tail << (8 * (len - 4))
        }
        _ => return None,
    };
    Some(bytes | (len as u64) << 56)
}

/// "No region" in [`Table::by_country_code`].
const NO_REGION: u32 = u32::MAX;

/// `A-Z` as 0-25 and `0-9` as 26-35; anything else [`NOT_CODE`].
static CODE_OF_BYTE: [u8; 256] = {
    let mut codes = [NOT_CODE; 256];
    let mut letter = 0;
    while letter < 26 {
        codes[b'A' as usize + letter] = letter as u8;
        letter += 1;
    }
    let mut digit = 0;
    while digit < 10 {
        codes[b'0' as usize + digit] = 26 + digit as u8;
        digit += 1;
    }
    codes
};
const NOT_CODE: u8 = u8::MAX;

/// The slot of a two-character `A-Z0-9` geo in [`Table::by_country_code`].
#[inline(always)]
fn country_code_slot(geo: &[u8]) -> Option<usize> {
    CountryCode::of(geo).map(CountryCode::index)
}

/// A two-character `A-Z0-9` country (what `CF-IPCountry` sends: ISO 3166 codes, `XX`,
/// `T1`), as a dense index below [`CountryCode::COUNT`]. A table looks these up by direct
/// index, and a caller can key its own per-country memo the same way: with no sticky
/// key, [`Table::resolve`] is a function of the table and the country alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountryCode(u16);

impl CountryCode {
    /// How many country codes there are (36 × 36).
    pub const COUNT: usize = 36 * 36;

    /// The code of `country`, if it is two characters of `A-Z0-9`.
    #[inline(always)]
    pub fn of(country: &[u8]) -> Option<CountryCode> {
        let [first, second] = *country else {
            return None;
        };
        let (first, second) = (CODE_OF_BYTE[first as usize], CODE_OF_BYTE[second as usize]);
        (first != NOT_CODE && second != NOT_CODE)
            .then_some(CountryCode(u16::from(first) * 36 + u16::from(second)))
    }

    /// Its index, below [`CountryCode::COUNT`].
    #[inline(always)]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl Table {
    /// A table in which nothing routes: revision 0, default policy, no regions.
    pub fn empty() -> Table {
        Table {
            revision: 0,
            prefix: crate::DEFAULT_PREFIX.to_owned(),
            policy: Policy::default(),
            regions: Vec::new(),
            geo_text: String::new(),
            literal_text: String::new(),
            texts: Vec::new(),
            by_long_geo: FxHashMap::default(),
            by_short_geo: FxHashMap::default(),
            by_country_code: vec![NO_REGION; CountryCode::COUNT].into_boxed_slice(),
            longest_geo: 0,
            fallback: None,
            invalid_keys: Vec::new(),
        }
    }

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
        Table::build(snapshot.revision, &snapshot.prefix, entries, previous)
            .unwrap_or_else(Table::empty)
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
        let mut table = Table::empty();
        table.revision = revision;
        prefix.clone_into(&mut table.prefix);
        // A reload rarely changes the number of regions, or their size.
        table.regions.reserve(previous.regions.len());
        table.texts.reserve(previous.texts.len());
        table.geo_text.reserve(previous.geo_text.len());
        table.literal_text.reserve(previous.literal_text.len());
        table.by_short_geo.reserve(previous.by_short_geo.len());
        let mut cursor = previous.cursor();

        for (key, value, known_unchanged) in entries {
            let Some(relative) = key.strip_prefix(prefix) else {
                continue;
            };
            if let Some(geo) = relative.strip_prefix(REGION_KIND) {
                // The previous table's region for this geo, if its value is the same: it is
                // shared, with no unescaping and no validation.
                let unchanged = known_unchanged.or_else(|| {
                    cursor.seek(geo).filter(|&index| match value {
                        Value::Plain(text) => *previous.regions[index].value == *text,
                        Value::Escaped(literal) => previous.literal_at(index) == Some(literal),
                    })
                });
                if let Some(index) = unchanged {
                    let compiled = Arc::clone(&previous.regions[index]);
                    table.push_region(compiled, geo, value.literal());
                    continue;
                }
                let text = value.text()?;
                let region = if geo.is_empty() {
                    Err(Error::Region {
                        field: "geo",
                        reason: "the key names no geo".into(),
                    })
                } else {
                    Region::parse(text.as_bytes())
                };
                match region {
                    Ok(region) => {
                        let compiled = Arc::new(Compiled {
                            value: text.into(),
                            region,
                        });
                        table.push_region(compiled, geo, value.literal());
                    }
                    Err(error) => table.invalid_keys.push(InvalidKey {
                        key: key.to_owned(),
                        error,
                    }),
                }
            } else if relative == POLICY_KEY {
                match Policy::parse(value.text()?.as_bytes()) {
                    Ok(policy) => table.policy = policy,
                    Err(error) => table.invalid_keys.push(InvalidKey {
                        key: key.to_owned(),
                        error,
                    }),
                }
            }
        }

        table.fallback = std::iter::once(&table.policy.default)
            .chain(&table.policy.failover)
            .find_map(|geo| table.index_of(geo.as_bytes()));
        Some(table)
    }

    /// The common case of [`Table::parse_after`]: one pass over the file that keeps each
    /// value as its JSON string literal (see [`crate::literal_scan`]), so that an unchanged
    /// region is recognised by comparing bytes, without checking or unescaping it again.
    /// `None` whenever the exact reading must decide.
    fn parse_common_after(bytes: &[u8], previous: &Table) -> Option<Table> {
        let text = crate::snapshot::common_text(bytes)?;
        let mut cursor = previous.cursor();
        let known = |key: &str| {
            let geo = key
                .strip_prefix(previous.prefix.as_str())?
                .strip_prefix(REGION_KIND)?;
            let index = cursor.seek(geo)?;
            Some((index, previous.literal_at(index)?))
        };
        let snapshot = crate::literal_scan::scan(text, known)?;
        let prefix = snapshot.prefix.unwrap_or(crate::DEFAULT_PREFIX);
        // A compiled region depends on its value alone, so a value the scan found byte for
        // byte in the previous table reuses that region, whatever geo it is under now.
        let entries = snapshot
            .kvs
            .iter()
            .map(|entry| (entry.key, Value::Escaped(entry.literal), entry.unchanged));
        Table::build(snapshot.revision, prefix, entries, previous)
    }

    /// Parses snapshot bytes and compiles them. Fails only when the file as a whole is
    /// unreadable ([`Error::Snapshot`]).
    pub fn parse(bytes: &[u8]) -> Result<Table, Error> {
        Ok(Table::from_snapshot(&Snapshot::parse(bytes)?))
    }

    /// [`Table::parse`], reusing `previous`'s unchanged regions (see
    /// [`Table::from_snapshot_after`]).
    pub fn parse_after(bytes: &[u8], previous: &Table) -> Result<Table, Error> {
        if let Some(table) = Table::parse_common_after(bytes, previous) {
            return Ok(table);
        }
        Ok(Table::from_snapshot_after(
            &Snapshot::parse(bytes)?,
            previous,
        ))
    }

    fn push_region(&mut self, compiled: Arc<Compiled>, geo: &str, literal: Option<&str>) {
        let Ok(index) = u32::try_from(self.regions.len()) else {
            // Four billion regions do not fit in memory before this happens.
            return;
        };
        let geo_bytes = geo.as_bytes();
        if let Some(slot) = country_code_slot(geo_bytes) {
            self.by_country_code[slot] = index;
        } else if let Some(packed) = pack_short_geo(geo_bytes) {
            self.by_short_geo.insert(packed, index);
        } else {
            self.by_long_geo.insert(geo_bytes.into(), index);
        }
        self.longest_geo = self.longest_geo.max(geo.len());
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

    fn geo_at(&self, index: usize) -> &str {
        let (start, len) = self.texts[index].geo;
        &self.geo_text[start..start + len]
    }

    fn literal_at(&self, index: usize) -> Option<&str> {
        let (start, len) = self.texts[index].literal?;
        Some(&self.literal_text[start..start + len])
    }

    fn cursor(&self) -> Cursor<'_> {
        Cursor { table: self, at: 0 }
    }

    /// The index of `geo`'s valid region, if any. A country code, the common case, is
    /// looked up inline; other geos out of line, so `resolve()` stays small.
    #[inline(always)]
    fn index_of(&self, geo: &[u8]) -> Option<u32> {
        match country_code_slot(geo) {
            Some(slot) => Some(self.by_country_code[slot]).filter(|&index| index != NO_REGION),
            None => self.index_of_other(geo),
        }
    }

    #[inline(never)]
    fn index_of_other(&self, geo: &[u8]) -> Option<u32> {
        if let Some(packed) = pack_short_geo(geo) {
            self.by_short_geo.get(&packed).copied()
        } else if geo.len() <= self.longest_geo {
            self.by_long_geo.get(geo).copied()
        } else {
            None
        }
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

    /// The index of `geo`'s valid region (as in [`Route::region_index`]), if any.
    #[inline(always)]
    pub fn region_index(&self, geo: &[u8]) -> Option<u32> {
        self.index_of(geo)
    }

    /// The valid region of `geo`, if any.
    pub fn region(&self, geo: &[u8]) -> Option<&Region> {
        let index = self.index_of(geo)?;
        Some(&self.regions[index as usize].region)
    }

    /// Every valid region with its geo, in key order; the position is the region index.
    pub fn regions(&self) -> impl Iterator<Item = (&str, &Region)> {
        self.regions
            .iter()
            .enumerate()
            .map(|(index, compiled)| (self.geo_at(index), &compiled.region))
    }

    /// Routes a visitor: the first of `country`, `policy.default`, `policy.failover...` that
    /// has a valid region answers, with the origin the policy's pick chooses for
    /// `sticky_key`, or `country` when there is none. `None` when no candidate has a region:
    /// the caller then fails open to its configured fallback.
    ///
    /// Any bytes are a valid country or key (empty, long, NUL, not UTF-8). No allocation.
    #[inline(always)]
    pub fn resolve(&self, country: &[u8], sticky_key: Option<&[u8]>) -> Option<Route<'_>> {
        let region_index = self.index_of(country).or(self.fallback)?;
        let region = &self.regions.get(region_index as usize)?.region;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DEFAULT_PREFIX, legacy_pick, rendezvous_pick};

    #[test]
    fn country_codes_are_dense_and_only_two_characters_of_a_to_z_and_0_to_9() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut seen = vec![false; CountryCode::COUNT];
        for &first in alphabet {
            for &second in alphabet {
                let code = CountryCode::of(&[first, second]).expect("a country code");
                assert!(!seen[code.index()], "{} twice", code.index());
                seen[code.index()] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        for other in [
            &b""[..],
            b"D",
            b"DEU",
            b"de",
            b"D-",
            b"\0E",
            b"D\xc3",
            b" D",
        ] {
            assert_eq!(CountryCode::of(other), None, "{other:?}");
        }
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

    const DE: &str =
        r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#;
    const US: &str =
        r#"{"shard":"us-1","origins":["iad-a","iad-b"],"weight":{"iad-a":1,"iad-b":1}}"#;
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
    fn packing_is_the_bytes_then_the_length() {
        // The plain definition the overlapping loads must agree with.
        let reference = |geo: &[u8]| {
            let mut bytes = [0u8; 8];
            bytes[..geo.len()].copy_from_slice(geo);
            bytes[7] = geo.len() as u8;
            u64::from_le_bytes(bytes)
        };
        for len in 0..=7u8 {
            for seed in 0..200u32 {
                let geo: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_mul(2_654_435_761) >> (i * 3)) as u8)
                    .collect();
                assert_eq!(pack_short_geo(&geo), Some(reference(&geo)), "{geo:?}");
            }
        }
        assert_eq!(pack_short_geo(b"ABCDEFGH"), None);
        // Trailing NULs do not collide with a shorter geo.
        assert_ne!(pack_short_geo(b"DE"), pack_short_geo(b"DE\0"));
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
                table.index_of(geo.as_bytes()),
                Some(route.region_index),
                "{geo}"
            );
        }
        for absent in [&b"FR"[..], b"D\0", b"d", b"DE ", b"ABCDEF", b"ABCDEFGHI"] {
            assert_eq!(table.index_of(absent), None, "{absent:?}");
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
            Table::parse(br#"{"format":1,"revision":9,"kvs":{"/dw/routing/region/US":"{}"}}"#)
                .unwrap();
        assert_eq!(table.revision(), 9);
        assert_eq!(table.invalid_keys().len(), 1);
    }
}
