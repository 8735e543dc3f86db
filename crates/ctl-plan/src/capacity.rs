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
//! Limits, checked on every value read and written: a capacity is a finite number,
//! above 0 and at most [`MAX_ANSWERS_PER_S`]; a headroom is finite, above 0 and at most 1;
//! the origin id follows the rules of every origin id dwctl takes (non-empty, no `/`);
//! `reason` is at most [`MAX_REASON_BYTES`]. Fields dwctl does not know are refused on
//! write and ignored on read.

use std::collections::BTreeMap;

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

/// One origin's capacity, as stored at `<control>capacity/<origin>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Capacity {
    /// Answers per second the origin takes (finite, in (0, [`MAX_ANSWERS_PER_S`]]).
    pub answers_per_s: f64,
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

impl Capacity {
    /// The record of `origin` as stored; `Err` names what is wrong with it.
    pub fn parse(origin: &str, raw: &[u8]) -> Result<Capacity, FieldError> {
        if let Some(reason) = origin_error(origin) {
            return Err(FieldError::new("origin", reason));
        }
        let (answers_per_s, by, at, reason) =
            parse_record(raw, "answers_per_s", check_answers_per_s)?;
        Ok(Capacity {
            answers_per_s,
            by,
            at,
            reason,
        })
    }

    /// Compact JSON: `answers_per_s`, `by`, `at`, then `reason` when there is one.
    pub fn encode(&self) -> String {
        encode_record(
            "answers_per_s",
            self.answers_per_s,
            &self.by,
            &self.at,
            &self.reason,
        )
    }

    /// The record as a JSON tree, for output.
    pub fn to_json(&self) -> Value {
        json!({"answers_per_s": number_json(self.answers_per_s), "by": self.by, "at": self.at,
               "reason": self.reason})
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
    fn used_share_needs_a_capacity() {
        assert_eq!(used_share(600.0, 1200.0), Some(0.5));
        assert_eq!(used_share(1.0, 0.0), None);
        assert_eq!(percent(0.8), "80");
        assert_eq!(percent(0.57), "57");
        assert_eq!(percent(0.855), "85.5");
    }
}
