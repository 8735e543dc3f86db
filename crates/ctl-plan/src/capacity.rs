//! Origin capacities and the guard's headroom, as dwctl stores them (pure: bytes in,
//! values out, and back).
//!
//! An origin's capacity is operator data under the control prefix, never under the
//! agents' prefix and never in `policy/global` (no edge node reloads for it):
//!
//! - `<control>capacity/<origin>`: `{"answers_per_s": 1200, "by": "ops@host",
//!   "at": "2026-12-04T09:00:00Z"}` (and `"reason"` when one was given), the answers per
//!   second (as `dw_router_answers_total` counts them) the origin takes;
//! - `<control>capacity-headroom`: `{"headroom": 0.8, "by": ..., "at": ...}`, the share of
//!   its capacity the guard lets a planned change put on an origin ([`DEFAULT_HEADROOM`]
//!   when the key is absent).
//!
//! An origin's **home** geos (`dwctl origin home`) are kept in the same capacity record, as
//! `"home": ["AT", "DE"]` (sorted, no duplicates, absent when there are none). They go
//! with the capacity because the autopilot is their one reader and it acts only on origins
//! with a capacity; and every reader of capacities (the state read at a plan's revision,
//! the roles' read grant on `capacity/`, `dwctl history` and `rollback` of
//! `capacity/<origin>`) then has them with no key, grant or read of their own. Each geo
//! follows the rules of a region key (`value::geo_error`); at most [`MAX_HOME_GEOS`] geos
//! and [`MAX_HOME_BYTES`] bytes of them joined with commas.
//!
//! Limits, checked on every value read and written: a capacity is a finite number,
//! above 0 and at most [`MAX_ANSWERS_PER_S`]; a headroom is finite, above 0 and at most 1;
//! the origin id follows the rules of every origin id dwctl takes (non-empty, no `/`);
//! `reason` is at most [`MAX_REASON_BYTES`]. Fields dwctl does not know are refused on
//! write and ignored on read.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::FieldError;

/// The guard's headroom when `<control>capacity-headroom` is absent: refuse a change that
/// puts an origin above 80 % of its capacity.
pub const DEFAULT_HEADROOM: f64 = 0.8;
/// The largest capacity accepted, in answers per second (a billion: far above any origin,
/// small enough that sums over every origin stay exact in an `f64`).
pub const MAX_ANSWERS_PER_S: f64 = 1e9;
/// The longest `reason` kept in a capacity or headroom record, in bytes.
pub const MAX_REASON_BYTES: usize = 1024;

/// The most home geos one origin may have: enough for a country and its neighbours, or a
/// country's subdivisions, small enough that the autopilot's tiering stays cheap.
pub const MAX_HOME_GEOS: usize = 64;
/// The longest list of home geos, in bytes, joined with commas (`DE,AT`).
pub const MAX_HOME_BYTES: usize = 1024;

/// One origin's capacity, as stored at `<control>capacity/<origin>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// Answers per second the origin takes (finite, in (0, [`MAX_ANSWERS_PER_S`]]).
    pub answers_per_s: f64,
    /// The origin's home geos (`dwctl origin home`), which the autopilot moves last.
    pub home: BTreeSet<String>,
    /// Who set it (`user@host`).
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Why, when given.
    pub reason: Option<String>,
}

/// The guard's headroom, as stored at `<control>capacity-headroom`.
#[derive(Debug, Clone, PartialEq)]
pub struct Headroom {
    /// The share of capacity a planned change may use (finite, in (0, 1]).
    pub headroom: f64,
    /// Who set it.
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Why, when given.
    pub reason: Option<String>,
}

/// What is wrong with `origin` as an origin id, by the rules of every origin id dwctl
/// takes (`plan::drain::check_origin_name`): non-empty, no `/`.
pub fn origin_error(origin: &str) -> Option<&'static str> {
    if origin.is_empty() {
        Some("must not be empty")
    } else if origin.contains('/') {
        Some("must not contain `/`")
    } else {
        None
    }
}

/// Checks a capacity: finite, above 0, at most [`MAX_ANSWERS_PER_S`].
pub fn check_answers_per_s(field: &str, value: f64) -> Result<f64, FieldError> {
    if !value.is_finite() || value <= 0.0 || value > MAX_ANSWERS_PER_S {
        return Err(FieldError::new(
            field,
            format!(
                "must be a number of answers per second above 0 and at most \
                 {MAX_ANSWERS_PER_S:.0}, not {value}"
            ),
        ));
    }
    Ok(value)
}

/// Checks a headroom: finite, above 0, at most 1.
pub fn check_headroom(field: &str, value: f64) -> Result<f64, FieldError> {
    if !value.is_finite() || value <= 0.0 || value > 1.0 {
        return Err(FieldError::new(
            field,
            format!("must be a share above 0 and at most 1 (0.8 is 80 %), not {value}"),
        ));
    }
    Ok(value)
}

/// Checks a reason's length.
pub fn check_reason(field: &str, reason: &str) -> Result<(), FieldError> {
    if reason.len() > MAX_REASON_BYTES {
        return Err(FieldError::new(
            field,
            format!(
                "is {} bytes; at most {MAX_REASON_BYTES} are kept",
                reason.len()
            ),
        ));
    }
    Ok(())
}

/// A number as the command line gives it (`1200`, `1e3`, `0.85`).
pub fn parse_number(field: &str, text: &str) -> Result<f64, FieldError> {
    text.trim()
        .parse::<f64>()
        .map_err(|_| FieldError::new(field, format!("{text:?} is not a number")))
}

/// A number as JSON holds it: whole numbers written without a fraction (`1200`, not
/// `1200.0`).
pub fn number_json(value: f64) -> Value {
    if value.fract() == 0.0 && value.abs() <= 9_007_199_254_740_992.0 {
        Value::from(value as i64)
    } else {
        serde_json::Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

/// The fields a record stored under `key` has: an object with `number_field` and the
/// stamps; unknown fields are ignored (a newer dwctl may add some).
fn parse_record(
    raw: &[u8],
    number_field: &str,
    check: fn(&str, f64) -> Result<f64, FieldError>,
) -> Result<(f64, String, String, Option<String>), FieldError> {
    let value: Value = serde_json::from_slice(raw)
        .map_err(|error| FieldError::new("value", format!("not valid JSON: {error}")))?;
    let Value::Object(object) = value else {
        return Err(FieldError::new("value", "must be a JSON object"));
    };
    let number = object
        .get(number_field)
        .and_then(Value::as_f64)
        .ok_or_else(|| FieldError::new(number_field, "is missing or not a number"))?;
    let number = check(number_field, number)?;
    let text = |name: &str| object.get(name).and_then(Value::as_str).map(str::to_owned);
    Ok((
        number,
        text("by").unwrap_or_default(),
        text("at").unwrap_or_default(),
        text("reason"),
    ))
}

fn encode_record(
    number_field: &str,
    number: f64,
    by: &str,
    at: &str,
    reason: &Option<String>,
) -> String {
    let mut object = Map::new();
    object.insert(number_field.into(), number_json(number));
    object.insert("by".into(), Value::from(by));
    object.insert("at".into(), Value::from(at));
    if let Some(reason) = reason {
        object.insert("reason".into(), Value::from(reason.as_str()));
    }
    Value::Object(object).to_string()
}

/// Checks a list of home geos: each one a geo a region key may name, at most
/// [`MAX_HOME_GEOS`] of them (after removing duplicates) and at most [`MAX_HOME_BYTES`]
/// joined with commas.
pub fn check_home_geos<'a>(
    field: &str,
    geos: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeSet<String>, FieldError> {
    let mut home = BTreeSet::new();
    for geo in geos {
        if let Some(why) = crate::value::geo_error(geo) {
            return Err(FieldError::new(field, why));
        }
        if let Some(c) = geo
            .chars()
            .find(|c| c.is_control() || c.is_whitespace() || *c == ',')
        {
            return Err(FieldError::new(
                field,
                format!("a geo must not contain {:?}", c),
            ));
        }
        home.insert(geo.to_owned());
    }
    if home.len() > MAX_HOME_GEOS {
        return Err(FieldError::new(
            field,
            format!(
                "names {} geos; an origin has at most {MAX_HOME_GEOS} home geos",
                home.len()
            ),
        ));
    }
    let bytes = home_text(&home).len();
    if bytes > MAX_HOME_BYTES {
        return Err(FieldError::new(
            field,
            format!("is {bytes} bytes joined with commas; at most {MAX_HOME_BYTES} are kept"),
        ));
    }
    Ok(home)
}

/// Home geos as the command line gives them: `DE,AT` (commas, no spaces needed; an empty
/// item is refused).
pub fn parse_home_geos(field: &str, text: &str) -> Result<BTreeSet<String>, FieldError> {
    if text.len() > MAX_HOME_BYTES * 2 {
        return Err(FieldError::new(
            field,
            format!("is {} bytes; at most {MAX_HOME_BYTES} are kept", text.len()),
        ));
    }
    let geos: Vec<&str> = text.split(',').map(str::trim).collect();
    if geos.iter().any(|geo| geo.is_empty()) {
        return Err(FieldError::new(
            field,
            "must be geos separated by commas (DE,AT), with no empty item",
        ));
    }
    check_home_geos(field, geos)
}

/// Home geos joined with commas, sorted (`AT,DE`).
pub fn home_text(home: &BTreeSet<String>) -> String {
    home.iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(",")
}

/// The `home` field of a stored capacity record: absent is none; present, it must be an
/// array of strings that [`check_home_geos`] accepts.
fn parse_home_field(raw: &[u8]) -> Result<BTreeSet<String>, FieldError> {
    let Ok(Value::Object(object)) = serde_json::from_slice::<Value>(raw) else {
        return Ok(BTreeSet::new());
    };
    match object.get("home") {
        None | Some(Value::Null) => Ok(BTreeSet::new()),
        Some(Value::Array(items)) => {
            let mut geos = Vec::with_capacity(items.len().min(MAX_HOME_GEOS + 1));
            for item in items.iter().take(MAX_HOME_GEOS * 4 + 1) {
                match item.as_str() {
                    Some(geo) => geos.push(geo),
                    None => return Err(FieldError::new("home", "must be an array of geos")),
                }
            }
            check_home_geos("home", geos)
        }
        Some(_) => Err(FieldError::new("home", "must be an array of geos")),
    }
}

impl Capacity {
    /// The record of `origin` as stored; `Err` names what is wrong with it.
    pub fn parse(origin: &str, raw: &[u8]) -> Result<Capacity, FieldError> {
        if let Some(reason) = origin_error(origin) {
            return Err(FieldError::new("origin", reason));
        }
        let (answers_per_s, by, at, reason) =
            parse_record(raw, "answers_per_s", check_answers_per_s)?;
        let home = parse_home_field(raw)?;
        Ok(Capacity {
            answers_per_s,
            home,
            by,
            at,
            reason,
        })
    }

    /// Compact JSON: `answers_per_s`, `by`, `at`, then `reason` when there is one, then
    /// `home` when there are home geos.
    pub fn encode(&self) -> String {
        let record = encode_record(
            "answers_per_s",
            self.answers_per_s,
            &self.by,
            &self.at,
            &self.reason,
        );
        if self.home.is_empty() {
            return record;
        }
        let mut object: Map<String, Value> =
            serde_json::from_str(&record).unwrap_or_else(|_| Map::new());
        object.insert(
            "home".into(),
            Value::from(self.home.iter().cloned().collect::<Vec<_>>()),
        );
        Value::Object(object).to_string()
    }

    /// The record as a JSON tree, for output.
    pub fn to_json(&self) -> Value {
        json!({"answers_per_s": number_json(self.answers_per_s), "home": self.home,
               "by": self.by, "at": self.at, "reason": self.reason})
    }
}

impl Headroom {
    /// The record as stored; `Err` names what is wrong with it.
    pub fn parse(raw: &[u8]) -> Result<Headroom, FieldError> {
        let (headroom, by, at, reason) = parse_record(raw, "headroom", check_headroom)?;
        Ok(Headroom {
            headroom,
            by,
            at,
            reason,
        })
    }

    /// Compact JSON: `headroom`, `by`, `at`, then `reason` when there is one.
    pub fn encode(&self) -> String {
        encode_record("headroom", self.headroom, &self.by, &self.at, &self.reason)
    }

    /// The record as a JSON tree, for output.
    pub fn to_json(&self) -> Value {
        json!({"headroom": number_json(self.headroom), "by": self.by, "at": self.at,
               "reason": self.reason})
    }
}

/// The capacities section of an `apply` file: `{"fra-a": 1200, "fra-b": 800}` (origin →
/// answers per second). Every error names its field (`capacities.fra-a`).
pub fn parse_capacities_section(body: &Value) -> Result<BTreeMap<String, f64>, Vec<FieldError>> {
    let Value::Object(entries) = body else {
        return Err(vec![FieldError::new(
            "capacities",
            "must be an object of origin → answers per second",
        )]);
    };
    let mut errors = Vec::new();
    let mut capacities = BTreeMap::new();
    for (origin, value) in entries {
        let field = format!("capacities.{origin}");
        if let Some(reason) = origin_error(origin) {
            errors.push(FieldError::new(field, reason));
            continue;
        }
        match value.as_f64() {
            Some(number) => match check_answers_per_s(&field, number) {
                Ok(number) => {
                    capacities.insert(origin.clone(), number);
                }
                Err(error) => errors.push(error),
            },
            None => errors.push(FieldError::new(
                field,
                "must be a number of answers per second",
            )),
        }
    }
    if errors.is_empty() {
        Ok(capacities)
    } else {
        Err(errors)
    }
}

/// A share as a percentage for people, at most two decimals (`0.8` → `80`, `0.855` →
/// `85.5`).
pub fn percent(share: f64) -> String {
    number_json((share * 10_000.0).round() / 100.0).to_string()
}

/// What an origin's load is next to its capacity: `used` is load / capacity.
pub fn used_share(load: f64, capacity: f64) -> Option<f64> {
    (capacity > 0.0 && load.is_finite()).then(|| load / capacity)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capacity(answers_per_s: f64) -> Capacity {
        Capacity {
            answers_per_s,
            home: BTreeSet::new(),
            by: "ops@host".into(),
            at: "2026-12-04T09:00:00Z".into(),
            reason: None,
        }
    }

    #[test]
    fn a_capacity_round_trips_and_whole_numbers_stay_whole() {
        let stored = capacity(1200.0).encode();
        assert_eq!(
            stored,
            r#"{"answers_per_s":1200,"by":"ops@host","at":"2026-12-04T09:00:00Z"}"#
        );
        assert_eq!(
            Capacity::parse("fra-a", stored.as_bytes()).unwrap(),
            capacity(1200.0)
        );
        let fractional = Capacity {
            reason: Some("CHG-1".into()),
            ..capacity(12.5)
        };
        let parsed = Capacity::parse("fra-a", fractional.encode().as_bytes()).unwrap();
        assert_eq!(parsed, fractional);
        // Unknown fields from a newer dwctl are ignored on read.
        let newer = br#"{"answers_per_s":5,"by":"","at":"","burst":9}"#;
        assert_eq!(Capacity::parse("o", newer).unwrap().answers_per_s, 5.0);
    }

    #[test]
    fn capacities_are_checked_at_their_edges() {
        assert!(check_answers_per_s("c", MAX_ANSWERS_PER_S).is_ok());
        assert!(check_answers_per_s("c", f64::MIN_POSITIVE).is_ok());
        for bad in [
            0.0,
            -1.0,
            MAX_ANSWERS_PER_S.next_up(),
            f64::NAN,
            f64::INFINITY,
        ] {
            let error = check_answers_per_s("c", bad).unwrap_err();
            assert!(error.reason.contains("at most 1000000000"), "{error}");
        }
        assert!(Capacity::parse("o", br#"{"answers_per_s":0}"#).is_err());
        assert!(Capacity::parse("o", br#"{"answers_per_s":"12"}"#).is_err());
        assert!(Capacity::parse("o", br#"[1]"#).is_err());
        assert!(Capacity::parse("o", b"garbage").is_err());
        assert!(Capacity::parse("a/b", br#"{"answers_per_s":1}"#).is_err());
        assert!(Capacity::parse("", br#"{"answers_per_s":1}"#).is_err());
    }

    #[test]
    fn headroom_is_a_share_above_zero_and_at_most_one() {
        assert!(check_headroom("h", 1.0).is_ok());
        assert!(check_headroom("h", f64::MIN_POSITIVE).is_ok());
        for bad in [0.0, -0.5, 1.0f64.next_up(), f64::NAN, f64::NEG_INFINITY] {
            assert!(check_headroom("h", bad).is_err(), "{bad}");
        }
        let headroom = Headroom {
            headroom: 0.85,
            by: "b".into(),
            at: "a".into(),
            reason: None,
        };
        assert_eq!(headroom.encode(), r#"{"headroom":0.85,"by":"b","at":"a"}"#);
        assert_eq!(
            Headroom::parse(headroom.encode().as_bytes()).unwrap(),
            headroom
        );
        assert!(Headroom::parse(br#"{"headroom":1.5}"#).is_err());
    }

    #[test]
    fn reasons_are_bounded_at_their_edge() {
        assert!(check_reason("reason", &"x".repeat(MAX_REASON_BYTES)).is_ok());
        assert!(check_reason("reason", &"x".repeat(MAX_REASON_BYTES + 1)).is_err());
    }

    #[test]
    fn an_apply_section_names_each_bad_field() {
        let good = json!({"fra-a": 1200, "fra-b": 0.5});
        let parsed = parse_capacities_section(&good).unwrap();
        assert_eq!(parsed["fra-a"], 1200.0);
        let bad = json!({"fra-a": 0, "a/b": 1, "fra-c": "many", "fra-d": 2e9});
        let mut fields: Vec<String> = parse_capacities_section(&bad)
            .unwrap_err()
            .into_iter()
            .map(|error| error.field)
            .collect();
        fields.sort();
        assert_eq!(
            fields,
            [
                "capacities.a/b",
                "capacities.fra-a",
                "capacities.fra-c",
                "capacities.fra-d"
            ]
        );
        assert!(parse_capacities_section(&json!([1])).is_err());
    }

    #[test]
    fn home_geos_round_trip_and_are_bounded_at_their_edges() {
        let with_home = Capacity {
            home: parse_home_geos("home", "DE, AT,DE,continent/EU").unwrap(),
            ..capacity(10.0)
        };
        assert_eq!(home_text(&with_home.home), "AT,DE,continent/EU");
        let stored = with_home.encode();
        assert!(
            stored.ends_with(r#""home":["AT","DE","continent/EU"]}"#),
            "{stored}"
        );
        assert_eq!(Capacity::parse("o", stored.as_bytes()).unwrap(), with_home);
        // No home: no field, as before home geos existed.
        assert!(!capacity(10.0).encode().contains("home"));
        // The count's edge: 64 distinct geos pass, 65 do not (duplicates count once).
        let names = |count: usize| (0..count).map(|i| format!("G{i:02}")).collect::<Vec<_>>();
        assert_eq!(
            check_home_geos("home", names(MAX_HOME_GEOS).iter().map(String::as_str))
                .unwrap()
                .len(),
            MAX_HOME_GEOS
        );
        let over = check_home_geos("home", names(MAX_HOME_GEOS + 1).iter().map(String::as_str))
            .unwrap_err();
        assert!(
            over.reason.contains("names 65 geos") && over.reason.contains("at most 64"),
            "{over}"
        );
        let twice: Vec<String> = names(MAX_HOME_GEOS)
            .into_iter()
            .chain(names(MAX_HOME_GEOS))
            .collect();
        assert!(check_home_geos("home", twice.iter().map(String::as_str)).is_ok());
        // The bytes' edge: 4 geos joined with 3 commas, exactly 1024 bytes, then 1025.
        let long = |last: usize| {
            let mut geos = vec!["a".repeat(255), "b".repeat(255), "c".repeat(255)];
            geos.push("d".repeat(last));
            geos
        };
        let at_edge = long(MAX_HOME_BYTES - 3 * 255 - 3);
        assert_eq!(
            home_text(&check_home_geos("home", at_edge.iter().map(String::as_str)).unwrap()).len(),
            MAX_HOME_BYTES
        );
        let past = long(MAX_HOME_BYTES - 3 * 255 - 2);
        let error = check_home_geos("home", past.iter().map(String::as_str)).unwrap_err();
        assert!(
            error.reason.contains("1025 bytes") && error.reason.contains("at most 1024"),
            "{error}"
        );
        // Geo syntax as for region keys; empty items and stray characters refused.
        for bad in ["", "DE,,AT", "DE,", "continent/XX", "D E", "DE\u{1b}[31m"] {
            assert!(parse_home_geos("home", bad).is_err(), "{bad:?}");
        }
        // A stored record whose home is wrong is malformed, as a bad capacity is.
        for bad in [
            r#"{"answers_per_s":1,"home":"DE"}"#,
            r#"{"answers_per_s":1,"home":[1]}"#,
            r#"{"answers_per_s":1,"home":["continent/ZZ"]}"#,
        ] {
            assert!(Capacity::parse("o", bad.as_bytes()).is_err(), "{bad}");
        }
    }

    #[test]
    fn used_share_needs_a_capacity() {
        assert_eq!(used_share(600.0, 1200.0), Some(0.5));
        assert_eq!(used_share(1.0, 0.0), None);
        assert_eq!(percent(0.8), "80");
        assert_eq!(percent(0.57), "57");
        assert_eq!(percent(0.855), "85.5");
    }
}
