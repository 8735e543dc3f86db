//! The global policy (`<prefix>policy/global`): where a country without a region goes, and
//! which pick the table uses.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::Error;
use crate::buckets::BucketCount;
use crate::continent::{Continent, is_country};
use crate::json::{self, Kind};

/// The default geo when the policy names none (or there is no policy).
const DEFAULT_GEO: &str = "US";

/// How a region's origin is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PickMode {
    /// The original router's crc32 walk ([`crate::legacy_pick`]): every visitor of a country
    /// lands on the same origin unless a sticky key is given.
    #[default]
    Legacy,
    /// Weighted rendezvous hashing ([`crate::rendezvous_pick`]).
    Rendezvous,
}

/// The parsed policy. Every field of the value is optional and falls back to its default
/// when absent or of another type; only a value that is not a JSON object is invalid.
#[derive(Debug, Clone)]
pub struct Policy {
    /// The geo tried when the visitor's country has no valid region.
    pub default: String,
    /// Geos tried, in order, after `default`.
    pub failover: Vec<String>,
    /// `"rendezvous"` selects [`PickMode::Rendezvous`]; anything else, unknown modes
    /// included, keeps [`PickMode::Legacy`] so a typo moves no traffic.
    pub pick: PickMode,
    /// `continent_of`: countries moved to another continent than the built-in table's,
    /// in document order (a later entry for a country wins). Entries whose key is not a
    /// country code (`^[A-Z]{2}$`) or whose value is not one of the seven continent codes
    /// are ignored by the readers (and refused by `dwctl`).
    pub continent_of: Vec<([u8; 2], Continent)>,
    /// `buckets`: visitor buckets' N (docs/routing.md, "Buckets"), `None` when off. An
    /// integer from 2 to 1024 turns them on; absent or `0` is off; anything else (`1`,
    /// `1025`, `-4`, `16.0`, `"16"`) is a policy error on the field `buckets` that the
    /// readers handle as other bad fields: the field falls back to its default, off, so a
    /// typo moves no visitor (and `dwctl` refuses to write it).
    pub buckets: Option<BucketCount>,
    /// The value's JSON text as the snapshot holds it, known fields and unknown ones;
    /// empty for the defaults.
    source: String,
}

/// Equal when they mean the same: the whole object is compared as read, not the source
/// text's spelling (spaces, escapes).
impl PartialEq for Policy {
    fn eq(&self, other: &Policy) -> bool {
        self.default == other.default
            && self.failover == other.failover
            && self.pick == other.pick
            && self.continent_of == other.continent_of
            && self.buckets == other.buckets
            && self.object() == other.object()
    }
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            default: DEFAULT_GEO.to_owned(),
            failover: Vec::new(),
            pick: PickMode::Legacy,
            continent_of: Vec::new(),
            buckets: None,
            source: String::new(),
        }
    }
}

impl Policy {
    /// Parses a policy value (the raw bytes of the etcd value).
    pub fn parse(value: &[u8]) -> Result<Policy, Error> {
        let text = json::validate(value).map_err(|reason| Error::Policy {
            field: "json",
            reason,
        })?;
        let members = json::object_members(text).ok_or_else(|| Error::Policy {
            field: "json",
            reason: format!("is {}, not an object", Kind::of(text).described()),
        })?;
        let field = |name: &str| json::member(&members, name).map(RawValue::get);

        let default = field("default")
            .and_then(json::string)
            .unwrap_or_else(|| DEFAULT_GEO.to_owned());
        let failover = field("failover")
            .and_then(json::array_elements)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|geo| json::string(geo.get()))
            .collect();
        let pick = match field("pick").and_then(json::string) {
            Some(mode) if mode == "rendezvous" => PickMode::Rendezvous,
            _ => PickMode::Legacy,
        };
        let continent_of = field("continent_of")
            .and_then(json::object_members)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(country, continent)| {
                let continent = Continent::parse(json::string(continent.get())?.as_bytes())?;
                match *country.as_bytes() {
                    [a, b] if is_country(&[a, b]) => Some(([a, b], continent)),
                    _ => None,
                }
            })
            .collect();
        let buckets =
            field("buckets").and_then(|buckets| parse_buckets_field(buckets).ok().flatten());
        Ok(Policy {
            default,
            failover,
            pick,
            continent_of,
            buckets,
            source: text.to_owned(),
        })
    }

    /// The policy value's JSON text, exactly as the snapshot holds it (empty when the
    /// defaults apply), for a reader that wants to decode it with PHP itself.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The whole object, in document order, read as PHP's `json_decode()` reads it, except
    /// that a number beyond the double range (PHP: ±INF) is null here.
    fn object(&self) -> Value {
        if self.source.is_empty() {
            return Value::Object(Map::new());
        }
        json::to_value(&self.source)
    }
}

/// The N a policy's `buckets` field (its raw JSON) asks for: `None` for `0` (off), the
/// count for an integer from 2 to 1024, else the policy error on the field `buckets` that
/// `dwctl` refuses with (the readers then keep buckets off).
pub fn parse_buckets_field(field: &str) -> Result<Option<BucketCount>, Error> {
    match json::integer(field) {
        Some(0) => Ok(None),
        Some(n) => BucketCount::new(n).map(Some),
        None => Err(Error::Policy {
            field: "buckets",
            reason: format!(
                "is {}, not an integer from 2 to 1024 (or 0: off)",
                Kind::of(field).described()
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(value: &str) -> Policy {
        Policy::parse(value.as_bytes()).unwrap()
    }

    #[test]
    fn defaults() {
        let policy = Policy::default();
        assert_eq!(policy.default, "US");
        assert!(policy.failover.is_empty());
        assert_eq!(policy.pick, PickMode::Legacy);
        assert_eq!(policy.object(), serde_json::json!({}));
        let empty = self::policy("{}");
        assert_eq!(empty, Policy::default());
    }

    #[test]
    fn reads_every_field_and_keeps_the_whole_object() {
        let policy = policy(
            r#"{"default":"DE","failover":["GB","US"],"honor_client_hints":false,
                "pick":"rendezvous","zz":{"nested":[1,2]},"aa":1}"#,
        );
        assert_eq!(policy.default, "DE");
        assert_eq!(policy.failover, ["GB", "US"]);
        assert_eq!(policy.pick, PickMode::Rendezvous);
        let object = policy.object();
        let names: Vec<&str> = object
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            names,
            [
                "default",
                "failover",
                "honor_client_hints",
                "pick",
                "zz",
                "aa"
            ]
        );
        assert_eq!(object["zz"], serde_json::json!({"nested": [1, 2]}));
        assert_eq!(object["honor_client_hints"], Value::Bool(false));
        assert!(policy.source().starts_with(r#"{"default":"DE""#));
        assert_eq!(Policy::default().source(), "");
    }

    #[test]
    fn a_field_of_another_type_falls_back_to_its_default() {
        let policy = policy(r#"{"default":5,"failover":"GB","pick":["rendezvous"]}"#);
        assert_eq!(policy.default, "US");
        assert!(policy.failover.is_empty());
        assert_eq!(policy.pick, PickMode::Legacy);
        assert_eq!(
            policy.object().as_object().unwrap().len(),
            3,
            "the whole object keeps them as written"
        );
        for default in ["null", "true", "[\"DE\"]", "{}"] {
            assert_eq!(
                self::policy(&format!(r#"{{"default":{default}}}"#)).default,
                "US"
            );
        }
        assert_eq!(
            self::policy(r#"{"default":""}"#).default,
            "",
            "an empty string is a string"
        );
    }

    #[test]
    fn failover_keeps_its_strings_in_order() {
        let policy = policy(r#"{"failover":["GB",1,null,"US",["FR"],"GB",{}]}"#);
        assert_eq!(policy.failover, ["GB", "US", "GB"]);
    }

    #[test]
    fn continent_of_keeps_the_entries_the_chain_can_use() {
        let policy = policy(
            r#"{"continent_of":{"TR":"EU","cy":"EU","RU":"Europe","EG":"AS","T1":"EU","PA":1,"EG":"EU","GE":"EU"}}"#,
        );
        assert_eq!(
            policy.continent_of,
            [
                (*b"TR", Continent::EU),
                (*b"EG", Continent::EU),
                (*b"GE", Continent::EU)
            ],
            "the last EG wins, at its first position"
        );
        for other in ["[]", "\"EU\"", "null", "{\"TR\":[\"EU\"]}"] {
            assert!(
                self::policy(&format!(r#"{{"continent_of":{other}}}"#))
                    .continent_of
                    .is_empty()
            );
        }
    }

    #[test]
    fn buckets_from_2_to_1024_else_off() {
        assert_eq!(Policy::default().buckets, None);
        for (field, n) in [
            ("2", Some(2)),
            ("1024", Some(1024)),
            ("16", Some(16)),
            ("-0", None),
            ("0", None),
        ] {
            let policy = policy(&format!(r#"{{"buckets":{field}}}"#));
            assert_eq!(policy.buckets.map(BucketCount::get), n, "{field}");
            assert!(parse_buckets_field(field).is_ok(), "{field}");
        }
        for field in [
            "1",
            "1025",
            "-4",
            "16.0",
            "1e1",
            "\"16\"",
            "null",
            "true",
            "[16]",
            "99999999999999999999",
        ] {
            assert_eq!(
                policy(&format!(r#"{{"buckets":{field}}}"#)).buckets,
                None,
                "{field}"
            );
            assert!(
                matches!(
                    parse_buckets_field(field),
                    Err(Error::Policy {
                        field: "buckets",
                        ..
                    })
                ),
                "{field}"
            );
        }
        assert_eq!(
            parse_buckets_field("1").unwrap_err().to_string(),
            "policy: field `buckets`: is 1, not an integer from 2 to 1024"
        );
        assert_eq!(
            parse_buckets_field("\"16\"").unwrap_err().to_string(),
            "policy: field `buckets`: is a string, not an integer from 2 to 1024 (or 0: off)"
        );
        assert_eq!(
            policy(r#"{"buckets":16,"buckets":0}"#).buckets,
            None,
            "the last wins"
        );
        assert_ne!(policy(r#"{"buckets":16}"#), policy(r#"{"buckets":32}"#));
    }

    #[test]
    fn only_rendezvous_selects_rendezvous() {
        for pick in [
            r#""legacy""#,
            r#""Rendezvous""#,
            r#""rendezvous ""#,
            r#""x""#,
            "1",
            "null",
            "true",
        ] {
            assert_eq!(
                policy(&format!(r#"{{"pick":{pick}}}"#)).pick,
                PickMode::Legacy,
                "{pick}"
            );
        }
        assert_eq!(
            policy(r#"{"pick":"legacy","pick":"rendezvous"}"#).pick,
            PickMode::Rendezvous
        );
    }

    #[test]
    fn refuses_what_is_not_a_json_object() {
        for value in [
            "",
            "[]",
            "null",
            "\"US\"",
            "1",
            "{",
            "{\"default\":\"US\",}",
            "{'a':1}",
        ] {
            assert!(
                matches!(
                    Policy::parse(value.as_bytes()),
                    Err(Error::Policy { field: "json", .. })
                ),
                "{value:?}"
            );
        }
        let error = Policy::parse(b"[]").unwrap_err();
        assert_eq!(
            error.to_string(),
            "policy: field `json`: is an array, not an object"
        );
    }
}
