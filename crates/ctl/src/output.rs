//! What commands print: one [`Outcome`] per command (text or JSON), and one line per event
//! for the long-running ones.

use std::io::Write;

use serde_json::{Value, json};

use crate::apply::describe;
use crate::cli::OutputFormat;
use crate::state::{Changes, State};

/// A finished command's result, in both forms; `--output` picks one.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub text: String,
    pub json: Value,
}

impl Outcome {
    pub fn print(&self, format: OutputFormat) {
        let mut stdout = std::io::stdout().lock();
        let _ = match format {
            OutputFormat::Text if self.text.is_empty() => Ok(()),
            OutputFormat::Text => writeln!(stdout, "{}", self.text.trim_end()),
            OutputFormat::Json => writeln!(stdout, "{}", self.json),
        };
    }
}

/// Prints the events of a long-running command, one line each, flushed at once (so that
/// journald and pipes see them as they happen).
#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    pub format: OutputFormat,
}

impl Reporter {
    pub fn event(&self, event: &str, text: &str, mut fields: Value) {
        let line = match self.format {
            OutputFormat::Text => format!("{event}: {text}"),
            OutputFormat::Json => {
                if let Value::Object(object) = &mut fields {
                    object.insert("event".into(), Value::from(event));
                    object.insert("at".into(), Value::from(crate::clock::now_rfc3339()));
                }
                fields.to_string()
            }
        };
        let mut stdout = std::io::stdout().lock();
        let _ = writeln!(stdout, "{line}");
        let _ = stdout.flush();
    }
}

/// The lines and JSON of a plan: each key that changes, before and after.
pub fn render_changes(state: &State, changes: &Changes) -> (Vec<String>, Value) {
    let mut lines = Vec::new();
    let mut regions = serde_json::Map::new();
    for (geo, new) in &changes.regions {
        let before = state.region(geo);
        let before_json = match &before {
            Some(Ok(value)) => value.to_json(),
            Some(Err(_)) => {
                Value::from(String::from_utf8_lossy(&state.regions[geo].raw).into_owned())
            }
            None => Value::Null,
        };
        let after_json = new.as_ref().map_or(Value::Null, |value| value.to_json());
        lines.push(match (&before, new) {
            (None, Some(value)) => format!("+ region/{geo} {}", value.to_json()),
            (Some(Ok(old)), Some(value)) => format!(
                "~ region/{geo} {}",
                describe(&old.to_json(), &value.to_json())
            ),
            (Some(Err(error)), Some(value)) => format!(
                "~ region/{geo} replaces an invalid value ({error}) with {}",
                value.to_json()
            ),
            (_, None) => format!("- region/{geo}"),
        });
        regions.insert(
            geo.clone(),
            json!({"before": before_json, "after": after_json}),
        );
    }
    let mut policy = Value::Null;
    if let Some(new) = &changes.policy {
        let old = state.policy();
        lines.push(match &old {
            Some(Ok(old)) => format!(
                "~ policy/global {}",
                describe(&old.to_json(), &new.to_json())
            ),
            _ => format!("+ policy/global {}", new.to_json()),
        });
        policy = json!({
            "before": old.and_then(Result::ok).map(|value| value.to_json()),
            "after": new.to_json(),
        });
    }
    let mut drains = serde_json::Map::new();
    for (origin, record) in &changes.drains {
        let existed = state.drains.contains_key(origin);
        lines.push(match (existed, record) {
            (false, Some(record)) => format!(
                "+ drain record {origin} (regions {:?})",
                record.regions.keys().collect::<Vec<_>>()
            ),
            (true, Some(record)) => format!(
                "~ drain record {origin} (regions {:?})",
                record.regions.keys().collect::<Vec<_>>()
            ),
            (_, None) => format!("- drain record {origin}"),
        });
        drains.insert(
            origin.clone(),
            record.as_ref().map_or(Value::Null, |record| {
                serde_json::to_value(record).unwrap_or(Value::Null)
            }),
        );
    }
    (
        lines,
        json!({"regions": regions, "policy": policy, "drains": drains}),
    )
}
