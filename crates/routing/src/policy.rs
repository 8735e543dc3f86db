//! The global policy (`<prefix>policy/global`): where a country without a region goes, and
//! which pick the table uses.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::Error;
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
#[derive(Debug, Clone, PartialEq)]
pub struct Policy {
    /// The geo tried when the visitor's country has no valid region.
    pub default: String,
    /// Geos tried, in order, after `default`.
    pub failover: Vec<String>,
    /// `"rendezvous"` selects [`PickMode::Rendezvous`]; anything else, unknown modes
    /// included, keeps [`PickMode::Legacy`] so a typo moves no traffic.
    pub pick: PickMode,
    /// The whole object as written, known fields and unknown ones, in document order.
    pub raw: Map<String, Value>,
}

impl Default for Policy {
    fn default() -> Policy {
        Policy {
            default: DEFAULT_GEO.to_owned(),
            failover: Vec::new(),
            pick: PickMode::Legacy,
            raw: Map::new(),
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
        let raw = members
            .iter()
            .map(|(name, member)| (name.clone(), json::to_value(member.get())))
            .collect();
        Ok(Policy {
            default,
            failover,
            pick,
            raw,
        })
    }
}
