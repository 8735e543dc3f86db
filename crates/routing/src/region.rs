//! One region value (`<prefix>region/<geo>`): validation and the data the picks need.

use std::collections::{HashMap, HashSet};

use serde_json::value::RawValue;

use crate::Error;
use crate::json::{self, Kind};
use crate::quoted;

/// The largest weight a region may give an origin.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// A valid region: a shard, its origins in order, and their weights.
///
/// Only [`Region::parse`] makes one, so every `Region` satisfies the rules of
/// docs/routing.md: a non-empty shard, a non-empty list of distinct non-empty origins, and at
/// least one listed origin with a positive weight.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Region {
    shard: String,
    origins: Vec<String>,
    /// Every entry of `weight`, listed origins or not, in document order (a duplicated name
    /// keeps its first position and its last value, as PHP's `json_decode()` does).
    weights: Vec<(String, u32)>,
    /// `weight[origins[i]] ?? 0`, precomputed for the picks.
    listed_weights: Vec<u32>,
    /// The sum of every entry of `weights`: the legacy pick's modulus counts unlisted origins.
    weight_sum: u64,
    /// `implode('', $origins)`, which the legacy pick hashes after the key, as a hash
    /// suffix: its checksum and shift are computed once, so a pick only hashes its key
    /// (see `crc`).
    joined_suffix: crate::crc::Suffix,
    /// The value's `buckets` field (visitor buckets' stored assignment), if it has one:
    /// its string, or why it is not one. Read against the policy's N when a table is built
    /// ([`crate::buckets::effective_assignment`]); never a reason to refuse the value.
    stored_buckets: Option<StoredBuckets>,
}

/// A region value's `buckets` field as read, before the policy's N is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoredBuckets {
    /// A JSON string: the text form of an assignment (not checked yet).
    Text(Box<str>),
    /// Another JSON type (`is a number`, ...): it never decodes.
    NotText(&'static str),
}

impl Region {
    /// Parses and validates a region value (the raw bytes of the etcd value).
    pub fn parse(value: &[u8]) -> Result<Region, Error> {
        if let Some(region) = Region::parse_common(value) {
            return Ok(region);
        }
        Region::parse_exact(value)
    }

    /// The common case in one serde pass. `None` whenever this reading might not agree
    /// with PHP's (anything it would reject, duplicates, lone surrogate escapes, deep
    /// nesting): then [`Region::parse_exact`] decides, and gives the reason. So this only
    /// ever accepts what the exact reading accepts, and builds the same region.
    fn parse_common(value: &[u8]) -> Option<Region> {
        if !json::starts_with_object(value)
            || std::str::from_utf8(value).is_err()
            || json::may_hold_surrogate_escape(value)
            || !json::nests_at_most(value, 64)
        {
            return None;
        }
        let wire: CommonRegion = serde_json::from_slice(value).ok()?;
        if wire.shard.is_empty() || wire.origins.is_empty() {
            return None;
        }
        let mut names = HashSet::with_capacity(wire.origins.len());
        if !wire
            .origins
            .iter()
            .all(|o| !o.is_empty() && names.insert(o.as_str()))
        {
            return None;
        }
        let mut names = HashSet::with_capacity(wire.weight.0.len());
        if !wire
            .weight
            .0
            .iter()
            .all(|(name, weight)| *weight <= u64::from(MAX_WEIGHT) && names.insert(name.as_str()))
        {
            return None;
        }
        let weights = wire
            .weight
            .0
            .into_iter()
            .map(|(name, weight)| (name, weight as u32))
            .collect();
        let stored = wire.buckets.map(|text| StoredBuckets::Text(text.into()));
        Region::assemble(wire.shard, wire.origins, weights, stored).ok()
    }

    /// The exact reading, PHP's `json_decode()` rules at every edge.
    fn parse_exact(value: &[u8]) -> Result<Region, Error> {
        let text = json::validate(value).map_err(|reason| invalid("json", reason))?;
        let members = json::object_members(text).ok_or_else(|| {
            invalid(
                "json",
                format!("is {}, not an object", Kind::of(text).described()),
            )
        })?;

        let shard = match json::member(&members, "shard") {
            None => return Err(invalid("shard", "is missing".into())),
            Some(shard) => match json::string(shard.get()) {
                Some(shard) if !shard.is_empty() => shard,
                Some(_) => return Err(invalid("shard", "is empty".into())),
                None => return Err(not_a("shard", shard, "a string")),
            },
        };
        let origins = parse_origins(json::member(&members, "origins"))?;
        let weights = parse_weights(json::member(&members, "weight"))?;
        let stored =
            json::member(&members, "buckets").map(|field| match json::string(field.get()) {
                Some(text) => StoredBuckets::Text(text.into()),
                None => StoredBuckets::NotText(Kind::of(field.get()).described()),
            });
        Region::assemble(shard, origins, weights, stored)
    }

    /// Builds a region from validated fields: checks that a listed origin has weight and
    /// precomputes what the picks need.
    fn assemble(
        shard: String,
        origins: Vec<String>,
        weights: Vec<(String, u32)>,
        stored_buckets: Option<StoredBuckets>,
    ) -> Result<Region, Error> {
        // A map, not `lookup`, so that many origins and many weights stay linear.
        let by_name: HashMap<&str, u32> = weights
            .iter()
            .map(|(name, weight)| (name.as_str(), *weight))
            .collect();
        let listed_weights: Vec<u32> = origins
            .iter()
            .map(|origin| by_name.get(origin.as_str()).copied().unwrap_or(0))
            .collect();
        if listed_weights.iter().all(|&weight| weight == 0) {
            return Err(invalid(
                "weight",
                "no listed origin has a positive weight".into(),
            ));
        }
        let weight_sum = weights.iter().map(|&(_, weight)| u64::from(weight)).sum();
        let joined_suffix = crate::crc::Suffix::of(origins.concat().as_bytes());

        Ok(Region {
            shard,
            origins,
            weights,
            listed_weights,
            weight_sum,
            joined_suffix,
            stored_buckets,
        })
    }

    /// The shard every visitor of this region is served from.
    pub fn shard(&self) -> &str {
        &self.shard
    }

    /// The listed origins, in order.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// The weight the region gives `origin`; 0 when the weight object does not name it.
    pub fn weight(&self, origin: &str) -> u32 {
        lookup(&self.weights, origin)
    }

    /// Every entry of the weight object, listed origins or not, in document order.
    pub fn weights(&self) -> impl Iterator<Item = (&str, u32)> {
        self.weights
            .iter()
            .map(|(name, weight)| (name.as_str(), *weight))
    }

    /// The value's `buckets` field, if it has one (see [`StoredBuckets`]).
    pub fn stored_buckets(&self) -> Option<&StoredBuckets> {
        self.stored_buckets.as_ref()
    }

    /// `weight(origins[i])` for every listed origin, in list order.
    pub fn listed_weights(&self) -> &[u32] {
        &self.listed_weights
    }

    /// The sum of every weight entry, listed or not; at least 1 for a valid region.
    pub(crate) fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    /// The listed origins concatenated, as PHP's `implode('', $origins)`.
    pub(crate) fn joined_suffix(&self) -> &crate::crc::Suffix {
        &self.joined_suffix
    }
}

fn parse_origins(origins: Option<&RawValue>) -> Result<Vec<String>, Error> {
    let Some(origins) = origins else {
        return Err(invalid("origins", "is missing".into()));
    };
    let items =
        json::array_elements(origins.get()).ok_or_else(|| not_a("origins", origins, "an array"))?;
    if items.is_empty() {
        return Err(invalid("origins", "is empty".into()));
    }
    let mut seen = HashSet::with_capacity(items.len());
    let mut listed = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let origin = json::string(item.get()).ok_or_else(|| {
            invalid(
                "origins",
                format!(
                    "origin {index} is {}, not a string",
                    Kind::of(item.get()).described()
                ),
            )
        })?;
        if origin.is_empty() {
            return Err(invalid("origins", format!("origin {index} is empty")));
        }
        if !seen.insert(origin.clone()) {
            return Err(invalid(
                "origins",
                format!("origin {:?} is listed twice", quoted(&origin)),
            ));
        }
        listed.push(origin);
    }
    Ok(listed)
}

/// Every entry of the weight object, each a JSON integer from 0 to MAX_WEIGHT as PHP reads
/// integers: `-0` is one; `50.0`, `1e2`, `"50"`, `true` are not.
fn parse_weights(weight: Option<&RawValue>) -> Result<Vec<(String, u32)>, Error> {
    let Some(weight) = weight else {
        return Err(invalid("weight", "is missing".into()));
    };
    let entries =
        json::object_members(weight.get()).ok_or_else(|| not_a("weight", weight, "an object"))?;
    entries
        .into_iter()
        .map(|(name, entry)| {
            json::integer(entry.get())
                .and_then(|weight| u32::try_from(weight).ok())
                .filter(|&weight| weight <= MAX_WEIGHT)
                .map(|weight| (name.clone(), weight))
                .ok_or_else(|| {
                    invalid(
                        "weight",
                        format!(
                            "weight of {:?} is {}, not an integer from 0 to {MAX_WEIGHT}",
                            quoted(&name),
                            quoted(entry.get())
                        ),
                    )
                })
        })
        .collect()
}

fn lookup(weights: &[(String, u32)], origin: &str) -> u32 {
    weights
        .iter()
        .find(|(name, _)| name == origin)
        .map_or(0, |&(_, weight)| weight)
}

fn invalid(field: &'static str, reason: String) -> Error {
    Error::Region { field, reason }
}

fn not_a(field: &'static str, value: &RawValue, wanted: &str) -> Error {
    invalid(
        field,
        format!("is {}, not {wanted}", Kind::of(value.get()).described()),
    )
}

/// A region as the common-case reader sees it; unknown fields are skipped.
#[derive(serde::Deserialize)]
struct CommonRegion {
    shard: String,
    origins: Vec<String>,
    weight: CommonWeights,
    /// Absent is `None`; JSON null or another type than a string fails this reading, and
    /// the exact reading decides.
    #[serde(default, deserialize_with = "string_not_null")]
    buckets: Option<String>,
}

/// A present `buckets` must be a string here (serde would read `null` as `None`).
fn string_not_null<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    <String as serde::Deserialize>::deserialize(deserializer).map(Some)
}

/// `weight` in document order, duplicates kept (so they can be detected).
struct CommonWeights(Vec<(String, u64)>);

impl<'de> serde::Deserialize<'de> for CommonWeights {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Entries;
        impl<'de> serde::de::Visitor<'de> for Entries {
            type Value = CommonWeights;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an object of integer weights")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CommonWeights, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some(entry) = map.next_entry::<String, u64>()? {
                    entries.push(entry);
                }
                Ok(CommonWeights(entries))
            }
        }
        deserializer.deserialize_map(Entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The field a value is refused for, or None when it is valid.
    fn refused_field(value: &str) -> Option<&'static str> {
        match Region::parse(value.as_bytes()) {
            Ok(_) => None,
            Err(Error::Region { field, .. }) => Some(field),
            Err(other) => panic!("not a region error: {other}"),
        }
    }

    /// A region value with `shard`, `origins` and `weight` spliced in as raw JSON.
    fn region_with(shard: &str, origins: &str, weight: &str) -> String {
        format!(r#"{{"shard":{shard},"origins":{origins},"weight":{weight},"updated":"now"}}"#)
    }

    const ORIGINS: &str = r#"["fra-a","fra-b"]"#;
    const WEIGHT: &str = r#"{"fra-a":50,"fra-b":30}"#;

    #[test]
    fn parses_a_valid_region() {
        let region = Region::parse(region_with(r#""eu-1""#, ORIGINS, WEIGHT).as_bytes()).unwrap();
        assert_eq!(region.shard(), "eu-1");
        assert_eq!(region.origins(), ["fra-a", "fra-b"]);
        assert_eq!(region.weight("fra-a"), 50);
        assert_eq!(region.weight("fra-b"), 30);
        assert_eq!(region.weight("nope"), 0);
        assert_eq!(region.weight_sum(), 80);
        assert_eq!(
            region.joined_suffix(),
            &crate::crc::Suffix::of(b"fra-afra-b")
        );
    }

    #[test]
    fn refuses_what_is_not_a_json_object() {
        for value in [
            "",
            "{",
            r#"{"shard":"a",}"#,
            "nul",
            "\u{feff}{}",
            "[]",
            r#""x""#,
            "1",
            "null",
        ] {
            assert_eq!(refused_field(value), Some("json"), "{value:?}");
        }
        assert!(matches!(
            Region::parse(b"\xff"),
            Err(Error::Region { field: "json", .. })
        ));
    }

    #[test]
    fn refuses_a_missing_empty_or_non_string_shard() {
        let missing = format!(r#"{{"origins":{ORIGINS},"weight":{WEIGHT}}}"#);
        assert_eq!(refused_field(&missing), Some("shard"));
        for shard in [
            r#""""#,
            "5",
            "null",
            "true",
            r#"["eu-1"]"#,
            r#"{"a":"eu-1"}"#,
        ] {
            assert_eq!(
                refused_field(&region_with(shard, ORIGINS, WEIGHT)),
                Some("shard"),
                "{shard}"
            );
        }
    }

    #[test]
    fn refuses_bad_origins() {
        let missing = format!(r#"{{"shard":"eu-1","weight":{WEIGHT}}}"#);
        assert_eq!(refused_field(&missing), Some("origins"));
        for origins in [
            "[]",
            r#""fra-a""#,
            r#"{"0":"fra-a"}"#,
            "null",
            r#"["fra-a",1]"#,
            r#"["fra-a",null]"#,
            r#"["fra-a",["fra-b"]]"#,
            r#"["fra-a",""]"#,
            r#"["fra-a","fra-b","fra-a"]"#,
        ] {
            assert_eq!(
                refused_field(&region_with(r#""eu-1""#, origins, WEIGHT)),
                Some("origins"),
                "{origins}"
            );
        }
    }

    #[test]
    fn refuses_a_weight_that_is_not_an_object() {
        let missing = format!(r#"{{"shard":"eu-1","origins":{ORIGINS}}}"#);
        assert_eq!(refused_field(&missing), Some("weight"));
        for weight in ["[]", "[50,30]", "null", "50", r#""fra-a""#] {
            assert_eq!(
                refused_field(&region_with(r#""eu-1""#, ORIGINS, weight)),
                Some("weight"),
                "{weight}"
            );
        }
    }

    #[test]
    fn refuses_weights_that_are_not_integers_in_range() {
        for bad in [
            "50.0",
            "1e2",
            "1E2",
            "0.0",
            "\"50\"",
            "-1",
            "1000001",
            "9223372036854775808",
            "true",
            "null",
            "[50]",
            "{}",
        ] {
            let weight = format!(r#"{{"fra-a":50,"fra-b":{bad}}}"#);
            assert_eq!(
                refused_field(&region_with(r#""eu-1""#, ORIGINS, &weight)),
                Some("weight"),
                "{bad}"
            );
            // An unlisted origin's weight obeys the same rule.
            let weight = format!(r#"{{"fra-a":50,"old":{bad}}}"#);
            assert_eq!(
                refused_field(&region_with(r#""eu-1""#, ORIGINS, &weight)),
                Some("weight"),
                "{bad}"
            );
        }
    }

    #[test]
    fn accepts_the_bounds_and_minus_zero() {
        // `-0` is the integer 0 to PHP's json_decode().
        let weight = r#"{"fra-a":1000000,"fra-b":-0,"old":0}"#;
        let region = Region::parse(region_with(r#""eu-1""#, ORIGINS, weight).as_bytes()).unwrap();
        assert_eq!(region.weight("fra-a"), MAX_WEIGHT);
        assert_eq!(region.weight("fra-b"), 0);
        assert_eq!(region.weight_sum(), 1_000_000);
    }

    #[test]
    fn refuses_a_region_without_a_positive_listed_weight() {
        for weight in [
            "{}",
            r#"{"fra-a":0,"fra-b":0}"#,
            r#"{"old":50}"#,
            r#"{"fra-a":0,"old":50}"#,
        ] {
            assert_eq!(
                refused_field(&region_with(r#""eu-1""#, ORIGINS, weight)),
                Some("weight"),
                "{weight}"
            );
        }
    }

    #[test]
    fn unlisted_weights_are_kept_and_counted_in_the_sum() {
        let weight = r#"{"old":7,"fra-b":30,"fra-a":50,"older":1000000}"#;
        let region = Region::parse(region_with(r#""eu-1""#, ORIGINS, weight).as_bytes()).unwrap();
        let weights: Vec<(&str, u32)> = region.weights().collect();
        assert_eq!(
            weights,
            [
                ("old", 7),
                ("fra-b", 30),
                ("fra-a", 50),
                ("older", 1_000_000)
            ]
        );
        assert_eq!(region.listed_weights(), [50, 30]);
        assert_eq!(region.weight_sum(), 1_000_087);
        assert_eq!(region.weight("old"), 7);
    }

    #[test]
    fn duplicate_keys_resolve_as_php_does() {
        // The last value wins, at the first position.
        let value = r#"{"shard":5,"origins":["x"],"weight":{"a":1e2,"b":1,"a":3},
                        "shard":"eu-1","origins":["a","b"]}"#;
        let region = Region::parse(value.as_bytes()).unwrap();
        assert_eq!(region.shard(), "eu-1");
        assert_eq!(region.origins(), ["a", "b"]);
        assert_eq!(region.weights().collect::<Vec<_>>(), [("a", 3), ("b", 1)]);
        let value = r#"{"shard":"eu-1","origins":["a"],"weight":{"a":1},"shard":""}"#;
        assert_eq!(refused_field(value), Some("shard"));
    }

    #[test]
    fn ignores_unknown_fields_and_escapes_decode() {
        let value = r#"{"updated":[1e400,{"deep":null}],"shard":"eu\u002d1",
                        "origins":["fr\u00e4","\ud83d\ude00"],"weight":{"fr\u00e4":1,"😀":2},"x":{}}"#;
        let region = Region::parse(value.as_bytes()).unwrap();
        assert_eq!(region.shard(), "eu-1");
        assert_eq!(region.origins(), ["frä", "😀"]);
        assert_eq!(region.weight("😀"), 2);
    }

    #[test]
    fn errors_name_their_field() {
        let error = Region::parse(region_with(r#""eu-1""#, ORIGINS, "[]").as_bytes()).unwrap_err();
        assert_eq!(
            error.to_string(),
            "region: field `weight`: is an array, not an object"
        );
        let error =
            Region::parse(region_with(r#""eu-1""#, r#"["a","a"]"#, WEIGHT).as_bytes()).unwrap_err();
        assert_eq!(
            error.to_string(),
            r#"region: field `origins`: origin "a" is listed twice"#
        );
    }
}
