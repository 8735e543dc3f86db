//! `apply`: a declarative desired state for regions and policy, its diff against etcd,
//! and the plan that writes the difference.
//!
//! The file is JSON or TOML of the shape
//! `{"policy": {...}, "regions": {"DE": {"shard": ..., "origins": [...], "weight": {...}}}}`
//! (both sections optional). Every value is validated before anything is read from etcd;
//! all failures are reported at once, each naming its field (`regions.DE.weight.fra-a`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{Error, FieldError};
use crate::plan::model::{Changes, State};
use crate::plan::value::{PolicyValue, RegionValue};

/// The desired state read from a file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Desired {
    /// The policy, when the file has a `policy` section.
    pub policy: Option<PolicyValue>,
    /// geo → value of each region the file names.
    pub regions: BTreeMap<String, RegionValue>,
}

/// How a file is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    /// JSON (the default).
    Json,
    /// TOML (a name ending in `.toml`).
    Toml,
}

impl FileFormat {
    /// From the file name's extension; JSON unless it ends in `.toml`.
    pub fn from_path(path: &str) -> FileFormat {
        if path.to_ascii_lowercase().ends_with(".toml") {
            FileFormat::Toml
        } else {
            FileFormat::Json
        }
    }
}

/// Parses and validates a desired state.
pub fn parse_desired(text: &str, format: FileFormat) -> Result<Desired, Error> {
    let document = match format {
        FileFormat::Json => serde_json::from_str::<Value>(text)
            .map_err(|error| Error::invalid("file", format!("not valid JSON: {error}")))?,
        FileFormat::Toml => toml::from_str::<toml::Table>(text)
            .map(|table| toml_to_json(toml::Value::Table(table)))
            .map_err(|error| {
                Error::invalid("file", format!("not valid TOML: {}", error.message()))
            })?,
    };
    let Value::Object(sections) = document else {
        return Err(Error::invalid(
            "file",
            "must be an object with `policy` and/or `regions`",
        ));
    };
    let mut errors = Vec::new();
    let mut desired = Desired::default();
    for (section, body) in sections {
        match section.as_str() {
            "policy" => match PolicyValue::for_write(body.to_string().as_bytes()) {
                Ok(policy) => desired.policy = Some(policy),
                Err(found) => errors.extend(found.into_iter().map(|error| within(error, "policy"))),
            },
            "regions" => match body {
                Value::Object(regions) => {
                    for (geo, value) in regions {
                        let path = format!("regions.{geo}");
                        if let Some(reason) = crate::plan::value::geo_error(&geo) {
                            errors.push(FieldError::new(path, reason));
                            continue;
                        }
                        match RegionValue::for_write(value.to_string().as_bytes()) {
                            Ok(region) => {
                                desired.regions.insert(geo, region);
                            }
                            Err(found) => {
                                errors.extend(found.into_iter().map(|error| within(error, &path)))
                            }
                        }
                    }
                }
                _ => errors.push(FieldError::new(
                    "regions",
                    "must be an object of geo → region",
                )),
            },
            other => errors.push(FieldError::new(
                other,
                "unknown section (the file has `policy` and `regions`)",
            )),
        }
    }
    if errors.is_empty() {
        Ok(desired)
    } else {
        Err(Error::Invalid(errors))
    }
}

/// `json` (the whole value is not an object, not JSON) becomes the section's own path.
fn within(error: FieldError, path: &str) -> FieldError {
    if error.field == "json" {
        FieldError::new(path, error.reason)
    } else {
        error.within(path)
    }
}

/// TOML to the JSON tree the validators read: datetimes become strings, floats stay
/// floats (so `weight = 50.0` is rejected as it is in JSON).
fn toml_to_json(value: toml::Value) -> Value {
    match value {
        toml::Value::String(text) => Value::String(text),
        toml::Value::Integer(number) => Value::from(number),
        toml::Value::Float(number) => serde_json::Number::from_f64(number)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        toml::Value::Boolean(flag) => Value::Bool(flag),
        toml::Value::Datetime(datetime) => Value::String(datetime.to_string()),
        toml::Value::Array(items) => Value::Array(items.into_iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(name, value)| (name, toml_to_json(value)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

/// One line of the diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    /// `+` create, `~` change, `-` delete.
    pub op: char,
    /// Relative key (`region/DE`, `policy/global`).
    pub key: String,
    /// What changes, field by field.
    pub detail: String,
}

/// The changes that turn `state` into `desired`, and their diff.
pub fn plan_apply(state: &State, desired: &Desired, prune: bool) -> (Changes, Vec<DiffLine>) {
    let mut changes = Changes::default();
    let mut diff = Vec::new();
    for (geo, wanted) in &desired.regions {
        let key = format!("region/{geo}");
        match state.region(geo) {
            None => {
                diff.push(DiffLine {
                    op: '+',
                    key,
                    detail: wanted.to_json().to_string(),
                });
                changes.regions.insert(geo.clone(), Some(wanted.clone()));
            }
            Some(Err(error)) => {
                diff.push(DiffLine {
                    op: '~',
                    key,
                    detail: format!(
                        "replaces an invalid value ({error}) with {}",
                        wanted.to_json()
                    ),
                });
                changes.regions.insert(geo.clone(), Some(wanted.clone()));
            }
            Some(Ok(current)) if current == *wanted => {}
            Some(Ok(current)) => {
                diff.push(DiffLine {
                    op: '~',
                    key,
                    detail: describe(&current.to_json(), &wanted.to_json()),
                });
                changes.regions.insert(geo.clone(), Some(wanted.clone()));
            }
        }
    }
    let extra: Vec<&String> = state
        .regions
        .keys()
        .filter(|geo| !desired.regions.contains_key(*geo))
        .collect();
    if prune {
        for geo in extra {
            diff.push(DiffLine {
                op: '-',
                key: format!("region/{geo}"),
                detail: "not in the file (--prune)".into(),
            });
            changes.regions.insert(geo.clone(), None);
        }
    } else if !extra.is_empty() {
        changes.notes.push(format!(
            "{} region(s) not in the file are kept: {extra:?} (--prune deletes them)",
            extra.len()
        ));
    }
    if let Some(wanted) = &desired.policy {
        let current = state.policy();
        let unchanged = matches!(&current, Some(Ok(policy)) if policy == wanted);
        if !unchanged {
            let detail = match current {
                None => wanted.to_json().to_string(),
                Some(Err(error)) => format!(
                    "replaces an invalid value ({error}) with {}",
                    wanted.to_json()
                ),
                Some(Ok(policy)) => describe(&policy.to_json(), &wanted.to_json()),
            };
            let op = if state.policy.is_none() { '+' } else { '~' };
            diff.push(DiffLine {
                op,
                key: "policy/global".into(),
                detail,
            });
            changes.policy = Some(wanted.clone());
        }
    }
    (changes, diff)
}

/// `field: old -> new; ...` for the top-level fields (and weight entries) that differ.
pub fn describe(old: &Value, new: &Value) -> String {
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        return format!("{old} -> {new}");
    };
    let mut parts = Vec::new();
    let mut names: Vec<&String> = old.keys().chain(new.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        match (old.get(name), new.get(name)) {
            (Some(Value::Object(before)), Some(Value::Object(after))) if name == "weight" => {
                let mut origins: Vec<&String> = before.keys().chain(after.keys()).collect();
                origins.sort();
                origins.dedup();
                for origin in origins {
                    let shown =
                        |value: Option<&Value>| value.map_or("-".to_string(), Value::to_string);
                    let (was, now) = (before.get(origin), after.get(origin));
                    if was != now {
                        parts.push(format!("weight.{origin}: {} -> {}", shown(was), shown(now)));
                    }
                }
            }
            (Some(was), Some(now)) if was != now => parts.push(format!("{name}: {was} -> {now}")),
            (Some(was), None) => parts.push(format!("{name}: {was} -> (removed)")),
            (None, Some(now)) => parts.push(format!("{name}: (new) {now}")),
            _ => {}
        }
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(result: Result<Desired, Error>) -> Vec<String> {
        match result {
            Err(Error::Invalid(errors)) => {
                // Sorted: serde_json keeps document order or key order depending on features.
                let mut fields: Vec<String> = errors.into_iter().map(|error| error.field).collect();
                fields.sort();
                fields
            }
            other => panic!("expected validation errors, got {other:?}"),
        }
    }

    #[test]
    fn json_and_toml_describe_the_same_state() {
        let json = r#"{"policy":{"default":"DE"},"regions":{"DE":{"shard":"eu-1","origins":["a","b"],"weight":{"a":60,"b":40}}}}"#;
        let toml = "[policy]\ndefault = \"DE\"\n[regions.DE]\nshard = \"eu-1\"\norigins = [\"a\", \"b\"]\nweight = { a = 60, b = 40 }\n";
        assert_eq!(
            parse_desired(json, FileFormat::Json).unwrap(),
            parse_desired(toml, FileFormat::Toml).unwrap()
        );
    }

    #[test]
    fn reports_every_invalid_field_with_its_path() {
        let text = r#"{"regions":{"DE":{"shard":"","origins":["a"],"weight":{"a":1}},
            "FR":{"shard":"s","origins":["a"],"weight":{"a":1,"zz":1}}},"policy":{"pick":"x"},"extra":1}"#;
        assert_eq!(
            fields(parse_desired(text, FileFormat::Json)),
            [
                "extra",
                "policy.pick",
                "regions.DE.shard",
                "regions.FR.weight.zz"
            ]
        );
        assert_eq!(
            fields(parse_desired(
                "[regions.DE]\nshard = \"s\"\norigins = [\"a\"]\nweight = { a = 50.0 }\n",
                FileFormat::Toml
            )),
            ["regions.DE.weight"]
        );
        assert_eq!(fields(parse_desired("{", FileFormat::Json)), ["file"]);
        assert_eq!(
            fields(parse_desired("[regions", FileFormat::Toml)),
            ["file"]
        );
    }
}
