//! `apply`: a declarative desired state for regions and policy, its diff against etcd,
//! and the plan that writes the difference.
//!
//! The file is JSON or TOML of the shape
//! `{"policy": {...}, "regions": {"DE": {"shard": ..., "origins": [...], "weight": {...}}}}`
//! (both sections optional), and beside the regions the origins' capacities and the
//! guard's headroom: `"capacities": {"fra-a": 1200}, "capacity_headroom": 0.8` (each
//! optional: what a file does not name is left alone). Every value is validated before anything is read from etcd;
//! all failures are reported at once, each naming its field (`regions.DE.weight.fra-a`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::capacity::{
    Capacity, DEFAULT_HEADROOM, Headroom, check_headroom, number_json, parse_capacities_section,
};
use crate::model::{Changes, State};
use crate::value::{PolicyValue, RegionValue};
use crate::{Error, FieldError};

/// The desired state read from a file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Desired {
    /// The policy, when the file has a `policy` section.
    pub policy: Option<PolicyValue>,
    /// geo → value of each region the file names.
    pub regions: BTreeMap<String, RegionValue>,
    /// origin → capacity (answers/s), when the file has a `capacities` section: the
    /// capacities are then made to match it (with `--prune`, those not in it are
    /// cleared); without the section they are left alone.
    pub capacities: Option<BTreeMap<String, f64>>,
    /// The capacity guard's headroom, when the file has `capacity_headroom`; without it
    /// the headroom is left alone (also with `--prune`).
    pub capacity_headroom: Option<f64>,
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
            "must be an object with `policy`, `regions`, `capacities` and/or \
             `capacity_headroom`",
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
                        if let Some(reason) = crate::value::geo_error(&geo) {
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
            "capacities" => match parse_capacities_section(&body) {
                Ok(capacities) => desired.capacities = Some(capacities),
                Err(found) => errors.extend(found),
            },
            "capacity_headroom" => match body.as_f64() {
                Some(share) => match check_headroom("capacity_headroom", share) {
                    Ok(share) => desired.capacity_headroom = Some(share),
                    Err(error) => errors.push(error),
                },
                None => errors.push(FieldError::new(
                    "capacity_headroom",
                    "must be a number above 0 and at most 1",
                )),
            },
            other => errors.push(FieldError::new(
                other,
                "unknown section (the file has `policy`, `regions`, `capacities` and \
                 `capacity_headroom`)",
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
            // dwctl owns `buckets` (crate::bucket_assignment): a file need not repeat it.
            Some(Ok(current)) if current.without_assignment() == wanted.without_assignment() => {}
            Some(Ok(current)) => {
                diff.push(DiffLine {
                    op: '~',
                    key,
                    detail: describe(
                        &current.without_assignment().to_json(),
                        &wanted.without_assignment().to_json(),
                    ),
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

/// Adds to `changes` (and `diff`) what makes the capacities and the headroom match
/// `desired`: only what the file names (a file without `capacities` leaves every capacity
/// alone; with `prune`, a `capacities` section clears the capacities it does not name; the
/// headroom changes only when the file names it). New records are stamped `by`, `at`.
pub fn plan_apply_capacities(
    state: &State,
    desired: &Desired,
    prune: bool,
    (by, at): (&str, &str),
    changes: &mut Changes,
    diff: &mut Vec<DiffLine>,
) {
    let record = |answers_per_s: f64| Capacity {
        answers_per_s,
        home: Default::default(),
        by: by.to_owned(),
        at: at.to_owned(),
        reason: Some("dwctl apply".into()),
    };
    if let Some(wanted) = &desired.capacities {
        for (origin, answers_per_s) in wanted {
            let key = format!("capacity/{origin}");
            let shown = number_json(*answers_per_s);
            let detail = match state.capacity(origin) {
                Some(Ok(current)) if current.answers_per_s == *answers_per_s => continue,
                Some(Ok(current)) => format!(
                    "answers_per_s: {} -> {shown}",
                    number_json(current.answers_per_s)
                ),
                Some(Err(error)) => {
                    format!("replaces a malformed record ({error}) with {shown} answers/s")
                }
                None => format!("{shown} answers/s"),
            };
            let op = if state.capacities.contains_key(origin) {
                '~'
            } else {
                '+'
            };
            diff.push(DiffLine { op, key, detail });
            // An apply file holds no home geos: the ones in place stay.
            let home = match state.capacity(origin) {
                Some(Ok(current)) => current.home,
                _ => Default::default(),
            };
            changes.capacities.insert(
                origin.clone(),
                Some(Capacity {
                    home,
                    ..record(*answers_per_s)
                }),
            );
        }
        let extra: Vec<&String> = state
            .capacities
            .keys()
            .filter(|origin| !wanted.contains_key(*origin))
            .collect();
        if prune {
            for origin in extra {
                diff.push(DiffLine {
                    op: '-',
                    key: format!("capacity/{origin}"),
                    detail: "not in the file's capacities (--prune)".into(),
                });
                changes.capacities.insert(origin.clone(), None);
            }
        } else if !extra.is_empty() {
            changes.notes.push(format!(
                "{} capacit(ies) not in the file are kept: {extra:?} (--prune clears them)",
                extra.len()
            ));
        }
    }
    if let Some(share) = desired.capacity_headroom {
        let detail = match state.headroom_record() {
            Some(Ok(current)) if current.headroom == share => None,
            Some(Ok(current)) => Some(format!(
                "headroom: {} -> {}",
                number_json(current.headroom),
                number_json(share)
            )),
            Some(Err(error)) => Some(format!(
                "replaces a malformed record ({error}) with {}",
                number_json(share)
            )),
            None => Some(format!(
                "headroom: {} (the default) -> {}",
                number_json(DEFAULT_HEADROOM),
                number_json(share)
            )),
        };
        if let Some(detail) = detail {
            diff.push(DiffLine {
                op: '~',
                key: "capacity-headroom".into(),
                detail,
            });
            changes.headroom = Some(Some(Headroom {
                headroom: share,
                by: by.to_owned(),
                at: at.to_owned(),
                reason: Some("dwctl apply".into()),
            }));
        }
    }
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

    fn stored(raw: &str) -> crate::model::Entry {
        crate::model::Entry {
            raw: raw.as_bytes().to_vec(),
            mod_revision: 3,
        }
    }

    #[test]
    fn capacities_sit_beside_the_regions_and_only_what_a_file_names_changes() {
        let json = r#"{"capacities":{"fra-a":1200,"fra-b":800},"capacity_headroom":0.9}"#;
        let toml = "capacity_headroom = 0.9\n[capacities]\nfra-a = 1200\nfra-b = 800.0\n";
        let desired = parse_desired(json, FileFormat::Json).unwrap();
        assert_eq!(desired, parse_desired(toml, FileFormat::Toml).unwrap());
        let mut state = State::default();
        state.capacities.insert(
            "fra-a".into(),
            stored(r#"{"answers_per_s":1200,"by":"x","at":"y"}"#),
        );
        state.capacities.insert(
            "old".into(),
            stored(r#"{"answers_per_s":5,"by":"x","at":"y"}"#),
        );
        let plan = |desired: &Desired, prune: bool| {
            let (mut changes, mut diff) = plan_apply(&state, desired, prune);
            plan_apply_capacities(
                &state,
                desired,
                prune,
                ("me", "now"),
                &mut changes,
                &mut diff,
            );
            (changes, diff)
        };
        // fra-a is unchanged, fra-b is new, `old` is kept without --prune.
        let (changes, diff) = plan(&desired, false);
        let keys: Vec<&str> = diff.iter().map(|line| line.key.as_str()).collect();
        assert_eq!(keys, ["capacity/fra-b", "capacity-headroom"]);
        assert_eq!(
            changes.capacities["fra-b"].as_ref().unwrap().answers_per_s,
            800.0
        );
        assert!(!changes.capacities.contains_key("old"));
        assert!(
            changes
                .notes
                .iter()
                .any(|note| note.contains("--prune clears"))
        );
        assert_eq!(
            changes
                .headroom
                .as_ref()
                .unwrap()
                .as_ref()
                .unwrap()
                .headroom,
            0.9
        );
        // --prune clears the capacities the section does not name.
        let (changes, _) = plan(&desired, true);
        assert_eq!(changes.capacities["old"], None);
        // A file without capacities leaves them alone, also with --prune.
        let regions_only = parse_desired(r#"{"regions":{}}"#, FileFormat::Json).unwrap();
        let (changes, diff) = plan(&regions_only, true);
        assert!(
            changes.capacities.is_empty() && changes.headroom.is_none(),
            "{diff:?}"
        );
    }

    #[test]
    fn capacity_sections_name_each_bad_field() {
        assert_eq!(
            fields(parse_desired(
                r#"{"capacities":{"fra-a":-1,"b":"x"},"capacity_headroom":1.5}"#,
                FileFormat::Json
            )),
            ["capacities.b", "capacities.fra-a", "capacity_headroom"]
        );
        assert_eq!(
            fields(parse_desired(
                r#"{"capacity_headroom":"high"}"#,
                FileFormat::Json
            )),
            ["capacity_headroom"]
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
