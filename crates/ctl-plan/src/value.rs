//! Region and policy values as dwctl reads and writes them.
//!
//! Whether a value is valid is decided by `dw-routing`, the one set of rules the extension,
//! the agent and the PHP twin share: dwctl never writes a value those readers would ignore.
//! On top of that, values dwctl *writes* follow a few stricter rules that the readers must
//! tolerate for compatibility but an operator never means: a weight for an origin that is
//! not listed, a policy `pick` that is not a known mode, a `failover` entry that is not a
//! string. Each failure names the field at fault.
//!
//! Values are written as compact JSON with the known fields first and `updated` (the real
//! UTC time of the write) last; unknown fields are kept.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::FieldError;

/// The policy's known pick modes (docs/routing.md).
pub const PICK_MODES: [&str; 2] = ["legacy", "rendezvous"];

/// A valid `region/<geo>` value, without its `updated` stamp.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionValue {
    /// The shard the region's traffic belongs to.
    pub shard: String,
    /// The origins, in order.
    pub origins: Vec<String>,
    /// origin → weight (they sum to 100 in values dwctl writes).
    pub weight: BTreeMap<String, u32>,
    /// Fields dwctl does not know, kept as they are.
    #[serde(flatten, default, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

impl RegionValue {
    /// A value as stored in etcd: valid when the readers would route with it.
    pub fn from_stored(raw: &[u8]) -> Result<RegionValue, FieldError> {
        dw_routing::Region::parse(raw).map_err(routing_error)?;
        extract_region(raw)
    }

    /// A value an operator wants written: the readers' rules, then dwctl's stricter ones.
    pub fn for_write(raw: &[u8]) -> Result<RegionValue, Vec<FieldError>> {
        checked_for_write(RegionValue::from_stored(raw), RegionValue::write_errors)
    }

    /// The stricter rules for values dwctl writes.
    fn write_errors(&self) -> Vec<FieldError> {
        let listed = self.listed_set();
        self.weight
            .keys()
            .filter(|name| !listed.contains(name.as_str()))
            .map(|name| {
                FieldError::new(
                    format!("weight.{name}"),
                    format!("unknown origin `{name}`: it is not listed in `origins`"),
                )
            })
            .collect()
    }

    /// The listed origins as a set (linear checks of many weights against many origins).
    fn listed_set(&self) -> std::collections::HashSet<&str> {
        self.origins.iter().map(String::as_str).collect()
    }

    /// Whether `origin` is listed.
    pub fn lists(&self, origin: &str) -> bool {
        self.origins.iter().any(|listed| listed == origin)
    }

    /// The weight of `origin` (0 when it has none, as the pick reads it).
    pub fn weight_of(&self, origin: &str) -> u32 {
        self.weight.get(origin).copied().unwrap_or(0)
    }

    /// This value as the capacity crate's edit of region `geo`: its shard, its origins and
    /// their weights in list order (what a prediction of the value, or a shed from it,
    /// starts from).
    pub fn as_edit(&self, geo: &str) -> dw_capacity::RegionEdit {
        dw_capacity::RegionEdit {
            geo: geo.to_string(),
            shard: self.shard.clone(),
            origins: self.origins.clone(),
            weight: self.listed_weights(),
        }
    }

    /// The listed origins with their weights, in list order.
    pub fn listed_weights(&self) -> Vec<(String, u32)> {
        self.origins
            .iter()
            .map(|origin| (origin.clone(), self.weight_of(origin)))
            .collect()
    }

    /// Sum of every weight entry (what the legacy pick divides by).
    pub fn weight_sum(&self) -> u64 {
        self.weight.values().map(|weight| u64::from(*weight)).sum()
    }

    /// Whether the routing and the membership are the same (ignores `extra`).
    pub fn same_routing(&self, other: &RegionValue) -> bool {
        self.origins == other.origins && self.weight == other.weight
    }

    /// The value without its `buckets` field, the visitor-bucket assignment dwctl computes
    /// and writes itself (`crate::bucket_assignment`): what `apply` compares.
    pub fn without_assignment(&self) -> RegionValue {
        let mut value = self.clone();
        value.extra.remove("buckets");
        value
    }

    /// Compact JSON: `shard`, `origins`, `weight` (listed origins first, in list order),
    /// unknown fields, then `updated`.
    pub fn encode(&self, updated: &str) -> String {
        let mut out = String::with_capacity(128);
        out.push_str("{\"shard\":");
        out.push_str(&json_string(&self.shard));
        out.push_str(",\"origins\":");
        out.push_str(&Value::from(self.origins.clone()).to_string());
        out.push_str(",\"weight\":{");
        let listed = self
            .origins
            .iter()
            .filter(|origin| self.weight.contains_key(*origin));
        let listed_set = self.listed_set();
        let unlisted = self
            .weight
            .keys()
            .filter(|name| !listed_set.contains(name.as_str()));
        for (index, name) in listed.chain(unlisted).enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(&json_string(name));
            out.push(':');
            out.push_str(&self.weight_of(name).to_string());
        }
        out.push('}');
        push_fields(&mut out, &self.extra);
        out.push_str(",\"updated\":");
        out.push_str(&json_string(updated));
        out.push('}');
        out
    }

    /// The value as a JSON tree (without `updated`), for output and diffs.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

fn extract_region(raw: &[u8]) -> Result<RegionValue, FieldError> {
    let mut object = parse_object(raw)?;
    object.remove("updated");
    let shard = match object.remove("shard") {
        Some(Value::String(shard)) if !shard.is_empty() => shard,
        _ => return Err(FieldError::new("shard", "must be a non-empty string")),
    };
    let origins = match object.remove("origins") {
        Some(Value::Array(items)) => items
            .into_iter()
            .enumerate()
            .map(|(index, item)| match item {
                Value::String(origin) if !origin.is_empty() => Ok(origin),
                _ => Err(FieldError::new(
                    format!("origins[{index}]"),
                    "must be a non-empty string",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err(FieldError::new("origins", "must be a non-empty array")),
    };
    let weight = match object.remove("weight") {
        Some(Value::Object(entries)) => entries
            .into_iter()
            .map(|(name, weight)| {
                // serde_json reads `-0` as a float; the readers count it as the integer 0.
                let negative_zero =
                    weight.as_f64() == Some(0.0) && !weight.is_i64() && !weight.is_u64();
                weight
                    .as_i64()
                    .or(negative_zero.then_some(0))
                    .and_then(|weight| u32::try_from(weight).ok())
                    .filter(|weight| *weight <= dw_routing::MAX_WEIGHT)
                    .map(|weight| (name.clone(), weight))
                    .ok_or_else(|| {
                        FieldError::new(
                            format!("weight.{name}"),
                            format!("must be an integer from 0 to {}", dw_routing::MAX_WEIGHT),
                        )
                    })
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?,
        _ => return Err(FieldError::new("weight", "must be a JSON object")),
    };
    Ok(RegionValue {
        shard,
        origins,
        weight,
        extra: object,
    })
}

/// A `policy/global` value, without its `updated` stamp. Every field is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyValue {
    /// Every field of the value, `updated` aside.
    pub fields: Map<String, Value>,
}

/// Known policy fields, written first and in this order.
const POLICY_FIELDS: [&str; 6] = [
    "default",
    "failover",
    "honor_client_hints",
    "pick",
    "continent_of",
    "buckets",
];

impl PolicyValue {
    /// A value as stored in etcd: valid when the readers would use it.
    pub fn from_stored(raw: &[u8]) -> Result<PolicyValue, FieldError> {
        dw_routing::Policy::parse(raw).map_err(routing_error)?;
        let mut fields = parse_object(raw)?;
        fields.remove("updated");
        Ok(PolicyValue { fields })
    }

    /// A value an operator wants written: the readers' rules, then dwctl's stricter ones.
    pub fn for_write(raw: &[u8]) -> Result<PolicyValue, Vec<FieldError>> {
        checked_for_write(PolicyValue::from_stored(raw), PolicyValue::write_errors)
    }

    /// The stricter rules for values dwctl writes.
    fn write_errors(&self) -> Vec<FieldError> {
        let mut errors = Vec::new();
        match self.fields.get("default") {
            None => {}
            Some(Value::String(geo)) if !geo.is_empty() => {
                policy_geo_errors("default".into(), geo, &mut errors)
            }
            Some(_) => errors.push(FieldError::new(
                "default",
                "must be a non-empty string (a geo)",
            )),
        }
        match self.fields.get("failover") {
            None => {}
            Some(Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    match item {
                        Value::String(geo) if !geo.is_empty() => {
                            policy_geo_errors(format!("failover[{index}]"), geo, &mut errors)
                        }
                        _ => errors.push(FieldError::new(
                            format!("failover[{index}]"),
                            "must be a non-empty string (a geo)",
                        )),
                    }
                }
            }
            Some(_) => errors.push(FieldError::new("failover", "must be an array of geos")),
        }
        match self.fields.get("pick") {
            None => {}
            Some(Value::String(mode)) if PICK_MODES.contains(&mode.as_str()) => {}
            Some(_) => errors.push(FieldError::new(
                "pick",
                format!(
                    "must be one of {PICK_MODES:?} (an unknown mode would silently mean legacy)"
                ),
            )),
        }
        match self.fields.get("continent_of") {
            None => {}
            Some(Value::Object(overrides)) => {
                for (country, continent) in overrides {
                    let field = format!("continent_of.{}", country.escape_default());
                    if !dw_routing::is_country(country.as_bytes()) {
                        errors.push(FieldError::new(
                            field.clone(),
                            "the key must be a country code (two letters A-Z)",
                        ));
                    }
                    let known = continent
                        .as_str()
                        .and_then(|code| dw_routing::Continent::parse(code.as_bytes()));
                    if known.is_none() {
                        errors.push(FieldError::new(
                            field,
                            format!("must be one of the continent codes {}", continent_codes()),
                        ));
                    }
                }
            }
            Some(_) => errors.push(FieldError::new(
                "continent_of",
                "must be an object of country code → continent code",
            )),
        }
        if let Err(error) = self.buckets() {
            errors.push(error);
        }
        match self.fields.get("honor_client_hints") {
            None | Some(Value::Bool(_)) => {}
            Some(_) => errors.push(FieldError::new(
                "honor_client_hints",
                "must be true or false",
            )),
        }
        errors
    }

    /// The visitor buckets N the policy asks for (`buckets`): `None` when off (the field
    /// absent or 0); an error for anything but 0 or an integer from 2 to 1024.
    pub fn buckets(&self) -> Result<Option<dw_routing::buckets::BucketCount>, FieldError> {
        let Some(value) = self.fields.get("buckets") else {
            return Ok(None);
        };
        let bad = || {
            FieldError::new(
                "buckets",
                format!(
                    "must be 0 (off) or an integer from {} to {} (got {})",
                    dw_routing::buckets::MIN_BUCKETS,
                    dw_routing::buckets::MAX_BUCKETS,
                    crate::shown::escape(&value.to_string())
                ),
            )
        };
        let n = value.as_i64().filter(|_| value.is_i64()).ok_or_else(bad)?;
        if n == 0 {
            return Ok(None);
        }
        dw_routing::buckets::BucketCount::new(n)
            .map(Some)
            .map_err(|_| bad())
    }

    /// Compact JSON: the known fields in a fixed order, the others, then `updated`.
    pub fn encode(&self, updated: &str) -> String {
        let mut members: Vec<String> = POLICY_FIELDS
            .iter()
            .filter_map(|name| self.fields.get(*name).map(|value| member(name, value)))
            .collect();
        members.extend(
            self.fields
                .iter()
                .filter(|(name, _)| !POLICY_FIELDS.contains(&name.as_str()) && *name != "updated")
                .map(|(name, value)| member(name, value)),
        );
        members.push(member("updated", &Value::from(updated)));
        format!("{{{}}}", members.join(","))
    }

    /// The fields as a JSON object.
    pub fn to_json(&self) -> Value {
        Value::Object(self.fields.clone())
    }
}

/// Why `geo` cannot be written as a region key, if it cannot: an empty geo names no
/// region, and a geo of the bucket namespace must be `continent/` and one of the seven
/// continent codes (anything else there would never route).
pub fn geo_error(geo: &str) -> Option<String> {
    if geo.is_empty() {
        return Some("a geo must not be empty".into());
    }
    match dw_routing::bucket_of_geo(geo.as_bytes()) {
        Some(None) => Some(format!(
            "a continent bucket is `{}` and one of {} (got `{}`)",
            dw_routing::BUCKET_PREFIX,
            continent_codes(),
            geo.escape_default()
        )),
        _ => None,
    }
}

/// The seven continent codes, space separated.
fn continent_codes() -> String {
    dw_routing::Continent::ALL
        .map(dw_routing::Continent::code)
        .join(" ")
}

/// Errors of a policy geo (`default`, `failover[i]`) that names a bucket of no continent.
fn policy_geo_errors(field: String, geo: &str, errors: &mut Vec<FieldError>) {
    if dw_routing::bucket_of_geo(geo.as_bytes()) == Some(None) {
        errors.push(FieldError::new(
            field,
            format!(
                "a bucket is `{}` and one of {}",
                dw_routing::BUCKET_PREFIX,
                continent_codes()
            ),
        ));
    }
}

/// `dw-routing`'s verdict as a field error.
fn routing_error(error: dw_routing::Error) -> FieldError {
    match error {
        dw_routing::Error::Region { field, reason }
        | dw_routing::Error::Policy { field, reason } => FieldError::new(field, reason),
        other => FieldError::new("json", other.to_string()),
    }
}

fn parse_object(raw: &[u8]) -> Result<Map<String, Value>, FieldError> {
    match serde_json::from_slice::<Value>(raw) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err(FieldError::new("json", "must be a JSON object")),
        Err(error) => Err(FieldError::new("json", format!("not valid JSON: {error}"))),
    }
}

/// Appends `,"name":value` for every field but `updated`, in key order.
fn push_fields(out: &mut String, fields: &Map<String, Value>) {
    for (name, value) in fields.iter().filter(|(name, _)| *name != "updated") {
        out.push(',');
        out.push_str(&member(name, value));
    }
}

/// `"name":value` as compact JSON.
fn member(name: &str, value: &Value) -> String {
    format!("{}:{value}", json_string(name))
}

fn json_string(text: &str) -> String {
    Value::from(text).to_string()
}

/// A value the readers accept (`parsed`) that also passes dwctl's stricter `rules`, or
/// every error found.
fn checked_for_write<T>(
    parsed: Result<T, FieldError>,
    rules: impl FnOnce(&T) -> Vec<FieldError>,
) -> Result<T, Vec<FieldError>> {
    let value = parsed.map_err(|error| vec![error])?;
    let errors = rules(&value);
    if errors.is_empty() {
        Ok(value)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(raw: &str) -> Result<RegionValue, Vec<FieldError>> {
        RegionValue::for_write(raw.as_bytes())
    }

    fn fields(errors: Vec<FieldError>) -> Vec<String> {
        errors.into_iter().map(|error| error.field).collect()
    }

    #[test]
    fn encodes_compactly_with_updated_last_and_unknown_fields_kept() {
        let value = region(
            r#"{"weight":{"fra-b":30,"fra-a":70},"note":"x","origins":["fra-b","fra-a"],"shard":"eu-1","updated":"old"}"#,
        )
        .unwrap();
        assert_eq!(
            value.encode("2026-01-01T00:00:00Z"),
            r#"{"shard":"eu-1","origins":["fra-b","fra-a"],"weight":{"fra-b":30,"fra-a":70},"note":"x","updated":"2026-01-01T00:00:00Z"}"#
        );
        let again = RegionValue::for_write(value.encode("t").as_bytes()).unwrap();
        assert_eq!(again, value);
    }

    #[test]
    fn names_the_field_at_fault() {
        assert_eq!(
            fields(region(r#"{"shard":"","origins":["a"],"weight":{"a":1}}"#).unwrap_err()),
            ["shard"]
        );
        assert_eq!(
            fields(region(r#"{"shard":"s","origins":["a","a"],"weight":{"a":1}}"#).unwrap_err()),
            ["origins"]
        );
        assert_eq!(
            fields(region(r#"{"shard":"s","origins":["a"],"weight":{"a":-1}}"#).unwrap_err()),
            ["weight"]
        );
        assert_eq!(
            fields(region(r#"{"shard":"s","origins":["a"],"weight":{"a":50.5}}"#).unwrap_err()),
            ["weight"]
        );
        assert_eq!(
            fields(region(r#"{"shard":"s","origins":["a"],"weight":{"a":1000001}}"#).unwrap_err()),
            ["weight"]
        );
        assert_eq!(
            fields(region(r#"{"shard":"s","origins":["a"],"weight":{"a":1,"b":1}}"#).unwrap_err()),
            ["weight.b"]
        );
        assert_eq!(fields(region(r#"{"shard":"s","#).unwrap_err()), ["json"]);
    }

    #[test]
    fn buckets_and_continent_overrides_are_checked() {
        assert_eq!(geo_error("continent/EU"), None);
        assert_eq!(geo_error("DE-BY"), None);
        assert!(geo_error("continent/ZZ").is_some());
        assert!(geo_error("continent/eu").is_some());
        assert!(geo_error("continent/").is_some());
        assert!(geo_error("").is_some());
        let good = br#"{"default":"continent/EU","failover":["continent/NA"],"continent_of":{"TR":"EU","CY":"EU"}}"#;
        assert!(PolicyValue::for_write(good).is_ok());
        let bad = br#"{"default":"continent/XX","failover":["continent/"],"continent_of":{"TR":"Europe","t1":"EU","RU":null}}"#;
        assert_eq!(
            fields(PolicyValue::for_write(bad).unwrap_err()),
            [
                "default",
                "failover[0]",
                "continent_of.TR",
                "continent_of.t1",
                "continent_of.RU"
            ]
        );
        assert_eq!(
            fields(PolicyValue::for_write(br#"{"continent_of":["EU"]}"#).unwrap_err()),
            ["continent_of"]
        );
    }

    #[test]
    fn policy_is_strict_on_known_fields_and_keeps_the_rest() {
        let policy =
            PolicyValue::for_write(br#"{"pick":"rendezvous","x":1,"default":"DE"}"#).unwrap();
        assert_eq!(
            policy.encode("t"),
            r#"{"default":"DE","pick":"rendezvous","x":1,"updated":"t"}"#
        );
        assert_eq!(
            PolicyValue::for_write(b"{}").unwrap().encode("t"),
            r#"{"updated":"t"}"#
        );
        assert_eq!(
            PolicyValue::for_write(br#"{"x":1}"#).unwrap().encode("t"),
            r#"{"x":1,"updated":"t"}"#
        );
        let errors =
            PolicyValue::for_write(br#"{"pick":"rendevous","failover":["GB",3],"default":7}"#)
                .unwrap_err();
        assert_eq!(fields(errors), ["default", "failover[1]", "pick"]);
        assert_eq!(
            fields(PolicyValue::for_write(b"[1]").unwrap_err()),
            ["json"]
        );
    }
}
