//! `region get|list|set|delete` (the reads and writes are `ops::region`'s).

use serde_json::{Value, json};

use crate::cli::{RegionCommand, RegionSetArgs};
use crate::context::Context;
use crate::error::Error;
use crate::input::read_input;
use crate::output::{Outcome, Shown, listing_text};
use crate::plan::value::RegionValue;

/// Runs `dwctl region get|list|set|delete`.
pub async fn run(context: &Context, command: RegionCommand) -> Result<Outcome, Error> {
    // Arguments are checked before etcd is contacted: a usage error is exit 2 whether or
    // not etcd is reachable.
    let set_value = match &command {
        RegionCommand::Set(args) => {
            check_geo(&args.geo)?;
            Some(region_input(args)?)
        }
        _ => None,
    };
    match command {
        RegionCommand::Get { geo } => {
            // One key, not the whole prefix.
            let entry = crate::ops::region::get(context, &geo)
                .await?
                .ok_or_else(|| {
                    Error::NotFound(format!("region `{geo}` ({})", context.layout.region(&geo)))
                })?;
            let row = region_row(&geo, &entry.raw, entry.mod_revision);
            let text = format!(
                "{}\nmod_revision {}{}",
                Shown(&String::from_utf8_lossy(&entry.raw)),
                entry.mod_revision,
                row["error"]
                    .as_str()
                    .map(|error| format!("\nINVALID: {}", Shown(error)))
                    .unwrap_or_default()
            );
            Ok(Outcome { text, json: row })
        }
        RegionCommand::List => {
            let state = crate::ops::region::list(context).await?;
            let rows: Vec<Value> = state
                .regions
                .iter()
                .map(|(geo, entry)| region_row(geo, &entry.raw, entry.mod_revision))
                .collect();
            let lines = rows.iter().map(|row| {
                let geo = Shown(row["geo"].as_str().unwrap_or_default()).to_string();
                match row["error"].as_str() {
                    Some(error) => format!("{geo:<6} INVALID: {}", Shown(error)),
                    None => {
                        let value = &row["value"];
                        let weights: Vec<String> = value["origins"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(Value::as_str)
                            .map(|origin| {
                                format!(
                                    "{}:{}",
                                    Shown(origin),
                                    value["weight"][origin].as_u64().unwrap_or(0)
                                )
                            })
                            .collect();
                        format!(
                            "{geo:<6} {:<8} {}  (updated {})",
                            Shown(value["shard"].as_str().unwrap_or_default()).to_string(),
                            weights.join(" "),
                            Shown(row["updated"].as_str().unwrap_or("-"))
                        )
                    }
                }
            });
            Ok(Outcome {
                text: listing_text(lines, "no regions"),
                json: json!({"revision": state.revision, "regions": rows}),
            })
        }
        RegionCommand::Set(args) => {
            let Some(value) = set_value else {
                return Err(Error::Failed("region set: no value was prepared".into()));
            };
            crate::ops::region::set(context, &args.geo, &value, &args.predict.to_guard()).await
        }
        RegionCommand::Delete { geo, predict, .. } => {
            // A bucket key of no continent can be deleted: it is how one is cleaned up.
            if geo.is_empty() {
                return Err(Error::invalid("geo", "must not be empty"));
            }
            crate::ops::region::delete(context, &geo, &predict.to_guard()).await
        }
    }
}

/// One region for `get` and `list`: the value parsed when valid, the reason when not.
fn region_row(geo: &str, raw: &[u8], mod_revision: i64) -> Value {
    let updated = serde_json::from_slice::<Value>(raw)
        .ok()
        .and_then(|value| value.get("updated").cloned())
        .unwrap_or(Value::Null);
    match RegionValue::from_stored(raw) {
        Ok(value) => {
            json!({"geo": geo, "valid": true, "value": value.to_json(), "updated": updated, "mod_revision": mod_revision})
        }
        Err(error) => json!({
            "geo": geo, "valid": false, "error": error.to_string(),
            "raw": String::from_utf8_lossy(raw), "mod_revision": mod_revision,
        }),
    }
}

fn check_geo(geo: &str) -> Result<(), Error> {
    match crate::plan::value::geo_error(geo) {
        Some(reason) => Err(Error::invalid("geo", reason)),
        None => Ok(()),
    }
}

/// The value `region set` was given: JSON text, a file, or --shard/--origin flags.
fn region_input(args: &RegionSetArgs) -> Result<RegionValue, Error> {
    let raw = if let Some(shard) = &args.shard {
        let mut origins = Vec::new();
        let mut weight = serde_json::Map::new();
        for entry in &args.origin {
            let Some((name, text)) = entry.split_once('=') else {
                return Err(Error::Usage(format!(
                    "--origin {entry}: expected NAME=WEIGHT"
                )));
            };
            let parsed = serde_json::from_str::<Value>(text.trim()).map_err(|_| {
                Error::Usage(format!(
                    "--origin {entry}: the weight `{text}` is not a number"
                ))
            })?;
            origins.push(Value::from(name));
            weight.insert(name.to_string(), parsed);
        }
        json!({"shard": shard, "origins": origins, "weight": weight})
            .to_string()
            .into_bytes()
    } else {
        read_input(args.value.as_deref(), args.file.as_deref(), "region value")?
    };
    RegionValue::for_write(&raw).map_err(Error::Invalid)
}
