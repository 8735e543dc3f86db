//! One region value (`<prefix>region/<geo>`): validation and the data the picks need.

use std::collections::HashSet;

use serde_json::Value;

use crate::{Error, json};

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
    /// `implode('', $origins)`: the legacy pick hashes it after the key.
    joined_origins: Vec<u8>,
}

impl Region {
    /// Parses and validates a region value (the raw bytes of the etcd value).
    pub fn parse(value: &[u8]) -> Result<Region, Error> {
        let document = json::decode(value).map_err(|reason| invalid("json", reason))?;
        let Value::Object(object) = document else {
            return Err(invalid(
                "json",
                format!("is {}, not an object", kind(&document)),
            ));
        };

        let shard = match object.get("shard") {
            Some(Value::String(shard)) if !shard.is_empty() => shard.clone(),
            Some(Value::String(_)) => return Err(invalid("shard", "is empty".into())),
            Some(other) => {
                return Err(invalid(
                    "shard",
                    format!("is {}, not a string", kind(other)),
                ));
            }
            None => return Err(invalid("shard", "is missing".into())),
        };

        let origins = parse_origins(object.get("origins"))?;

        let weights = match object.get("weight") {
            Some(Value::Object(entries)) => {
                let mut weights = Vec::with_capacity(entries.len());
                for (name, entry) in entries {
                    let weight = weight_value(entry)
                        .or_else(|| is_negative_zero_integer(value, name, entry).then_some(0))
                        .ok_or_else(|| {
                            invalid(
                                "weight",
                                format!(
                                    "weight of {name:?} is {entry}, not an integer from 0 to \
                                     {MAX_WEIGHT}"
                                ),
                            )
                        })?;
                    weights.push((name.clone(), weight));
                }
                weights
            }
            Some(other) => {
                return Err(invalid(
                    "weight",
                    format!("is {}, not an object", kind(other)),
                ));
            }
            None => return Err(invalid("weight", "is missing".into())),
        };

        let listed_weights: Vec<u32> = origins
            .iter()
            .map(|origin| lookup(&weights, origin))
            .collect();
        if listed_weights.iter().all(|&weight| weight == 0) {
            return Err(invalid(
                "weight",
                "no listed origin has a positive weight".into(),
            ));
        }
        let weight_sum = weights.iter().map(|&(_, weight)| u64::from(weight)).sum();
        let joined_origins = origins.concat().into_bytes();

        Ok(Region {
            shard,
            origins,
            weights,
            listed_weights,
            weight_sum,
            joined_origins,
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

    /// `weight(origins[i])` for every listed origin, in list order.
    pub(crate) fn listed_weights(&self) -> &[u32] {
        &self.listed_weights
    }

    /// The sum of every weight entry, listed or not; at least 1 for a valid region.
    pub(crate) fn weight_sum(&self) -> u64 {
        self.weight_sum
    }

    /// The listed origins concatenated, as PHP's `implode('', $origins)`.
    pub(crate) fn joined_origins(&self) -> &[u8] {
        &self.joined_origins
    }
}

fn parse_origins(origins: Option<&Value>) -> Result<Vec<String>, Error> {
    let items = match origins {
        Some(Value::Array(items)) if !items.is_empty() => items,
        Some(Value::Array(_)) => return Err(invalid("origins", "is empty".into())),
        Some(other) => {
            return Err(invalid(
                "origins",
                format!("is {}, not an array", kind(other)),
            ));
        }
        None => return Err(invalid("origins", "is missing".into())),
    };
    let mut seen = HashSet::with_capacity(items.len());
    let mut origins = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let origin = match item {
            Value::String(origin) if !origin.is_empty() => origin,
            Value::String(_) => {
                return Err(invalid("origins", format!("origin {index} is empty")));
            }
            other => {
                return Err(invalid(
                    "origins",
                    format!("origin {index} is {}, not a string", kind(other)),
                ));
            }
        };
        if !seen.insert(origin.as_str()) {
            return Err(invalid(
                "origins",
                format!("origin {origin:?} is listed twice"),
            ));
        }
        origins.push(origin.clone());
    }
    Ok(origins)
}

/// A weight is a JSON integer from 0 to MAX_WEIGHT: serde_json reads those (and only those)
/// as unsigned integers; `50.0`, `1e2` and `-1` are floats or negative.
fn weight_value(entry: &Value) -> Option<u32> {
    entry
        .as_u64()
        .filter(|&weight| weight <= u64::from(MAX_WEIGHT))
        .and_then(|weight| u32::try_from(weight).ok())
}

/// `-0` is an integer (0) to PHP but a float to serde_json; `-0.0` and `-0e0` are floats to
/// both. Only a negative zero needs its source text looked at.
fn is_negative_zero_integer(value: &[u8], name: &str, entry: &Value) -> bool {
    let negative_zero = entry
        .as_f64()
        .is_some_and(|number| number == 0.0 && number.is_sign_negative());
    negative_zero
        && json::last_member_text(value, "weight")
            .and_then(|weight| json::last_member_text(weight.as_bytes(), name))
            == Some("-0")
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

/// What a JSON value is, for error messages.
pub(crate) fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
