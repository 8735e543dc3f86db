//! `dwctl origin`: `register` (runs the registration daemon in `daemons::origin`), `list`,
//! `capacity` (a plan like every routing change, in `commands::capacity`) and `forget`.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::{capacity, home};
use crate::cli::OriginCommand;
use crate::context::Context;
use crate::daemons::origin::{RegisterConfig, register};
use crate::error::Error;
use crate::input::json_object_arg;
use crate::ops::registration::forget as forget_registration;
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard};
use crate::output::{Outcome, Shown, listing_text};
use crate::plan::autopilot::status::{header_line, origin_line};
use crate::plan::capacity::{number_json, percent};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::check_origin_name;
use crate::plan::registration::{ForgetRequest, forget_audit_key};
use crate::shutdown::Shutdown;

/// The largest `--meta` accepted, in bytes of its JSON text as written to etcd: every
/// node's agent copies it into its snapshot, and every publication re-writes it.
pub const MAX_META_BYTES: usize = 4096;

/// Parses `--meta` and checks its size (its JSON text as it is written, compact).
fn meta_arg(text: &str) -> Result<Map<String, Value>, Error> {
    let meta = json_object_arg("meta", text)?;
    let size = Value::Object(meta.clone()).to_string().len();
    if size > MAX_META_BYTES {
        return Err(Error::Usage(format!(
            "--meta is {size} bytes as JSON; at most {MAX_META_BYTES} are accepted (it is \
             copied into every node's snapshot): keep only what the origin needs to be found"
        )));
    }
    Ok(meta)
}
/// Runs one `dwctl origin` subcommand.
pub async fn run(
    context: &Context,
    command: OriginCommand,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    match command {
        OriginCommand::Register { id, ttl, meta } => {
            check_origin_name("id", &id)?;
            let config = RegisterConfig {
                etcd: context.etcd.clone(),
                layout: context.layout.clone(),
                id: id.clone(),
                ttl,
                meta: meta_arg(&meta)?,
            };
            register(&config, context.reporter(), shutdown).await?;
            Ok(Outcome {
                text: String::new(),
                json: json!({"origin": id, "stopped": true}),
            })
        }
        OriginCommand::List => list(context).await,
        // A plan like every routing change.
        OriginCommand::Capacity(args) => capacity::run(context, args).await,
        OriginCommand::Home(args) => home::run(context, args).await,
        OriginCommand::Forget {
            id,
            reason,
            dry_run,
        } => forget(context, id, reason, dry_run).await,
    }
}

/// `origin forget`: the registration record deleted through the write path, audited.
async fn forget(
    context: &Context,
    id: String,
    reason: Option<String>,
    dry_run: bool,
) -> Result<Outcome, Error> {
    check_origin_name("id", &id)?;
    let request = ForgetRequest {
        origin: id.clone(),
        reason,
        by: operator(),
        at: now_rfc3339(),
    };
    // A registration record moves no load.
    let exempt = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Registration));
    let ran = forget_registration(context, &request, dry_run, &exempt).await?;
    let audit = forget_audit_key(&context.layout, &request);
    let key = context.layout.registration(&id);
    let text = match ran.committed.revision {
        Some(revision) => format!(
            "forgot {id}: rebalance no longer drains it when its key vanishes (until it \
             registers again)\ndeleted {} at revision {revision}; audit record {}",
            Shown(&key),
            Shown(&audit)
        ),
        None => format!(
            "origin forget {id}: dry run, nothing written (would delete {} and write the \
             audit record {})",
            Shown(&key),
            Shown(&audit)
        ),
    };
    Ok(Outcome {
        text,
        json: json!({"origin": id, "forgotten": !dry_run, "dry_run": dry_run,
                     "revision": ran.committed.revision, "key": key,
                     "audit": audit}),
    })
}

/// Live origins (with their lease's remaining ttl), registered origins that are down, and
/// drained origins (registered or not), with who drained them and why.
async fn list(context: &Context) -> Result<Outcome, Error> {
    let (listing, ttls) = crate::ops::origin::list_with_ttls(context).await?;
    let autopilot = crate::ops::autopilot_status::read(context).await;
    let mut rows = Vec::new();
    let ids: BTreeSet<&String> = listing
        .live
        .keys()
        .chain(listing.registered.iter())
        .chain(listing.drains.keys())
        .chain(listing.malformed_drains.keys())
        .chain(listing.capacities.keys())
        .chain(listing.malformed_capacities.keys())
        .collect();
    for id in ids {
        let live = listing.live.get(id);
        let ttl = ttls.get(id).copied().flatten();
        let drained = listing.drains.get(id);
        rows.push(json!({
            "origin": id,
            "live": live.is_some(),
            "ttl": ttl,
            "meta": live.map(|(value, _)| serde_json::from_slice::<Value>(value).unwrap_or_else(|_| Value::from(String::from_utf8_lossy(value).into_owned()))),
            "registered": listing.registered.contains(id),
            "drained": drained.map(|record| json!({"reason": record.reason, "source": record.source, "by": record.by, "at": record.at, "regions": record.regions.keys().collect::<Vec<_>>(), "state": record.state_label(), "shed_percent": record.shed.as_ref().map(|shed| shed.percent), "shed_regions": record.shed_regions(), "parts": record.part_labels()})),
            "malformed_drain_record": listing.malformed_drains.get(id),
            "capacity": listing.capacities.get(id).map(|capacity| number_json(*capacity)),
            "home": listing.homes.get(id).map_or_else(Vec::new, |home| home.iter().cloned().collect()),
            "malformed_capacity_record": listing.malformed_capacities.get(id),
        }));
    }
    let lines = rows.iter().map(|row| {
        let state = if row["live"].as_bool() == Some(true) {
            format!(
                "live (ttl {}s)",
                row["ttl"]
                    .as_i64()
                    .map_or("?".to_string(), |ttl| ttl.to_string())
            )
        } else if row["registered"].as_bool() == Some(true) {
            "DOWN (registered before, key gone)".to_string()
        } else {
            "not registered".to_string()
        };
        let drained = match (&row["drained"], row["malformed_drain_record"].as_str()) {
            (_, Some(error)) => format!("  MALFORMED DRAIN RECORD: {}", Shown(error)),
            (Value::Null, None) => String::new(),
            (record, None) => match record["parts"].as_array() {
                // Several sources' parts: each listed with its source.
                Some(parts) if parts.len() > 1 => format!(
                    "  {}: {}",
                    Shown(record["state"].as_str().unwrap_or("drained")),
                    parts
                        .iter()
                        .map(|part| Shown(part.as_str().unwrap_or("?")).to_string())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                _ => format!(
                    "  {} by {}: {}",
                    Shown(record["state"].as_str().unwrap_or("drained")),
                    Shown(record["source"].as_str().unwrap_or("?")),
                    Shown(record["reason"].as_str().unwrap_or("?"))
                ),
            },
        };
        let capacity = match (&row["capacity"], row["malformed_capacity_record"].as_str()) {
            (_, Some(error)) => format!("  MALFORMED CAPACITY RECORD: {}", Shown(error)),
            (Value::Null, None) => "  capacity not set".to_string(),
            (capacity, None) => format!("  capacity {capacity} answers/s"),
        };
        let home = match row["home"].as_array() {
            Some(geos) if !geos.is_empty() => format!(
                "  home {}",
                Shown(
                    &geos
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(",")
                )
            ),
            _ => String::new(),
        };
        let origin = row["origin"].as_str().unwrap_or_default();
        let held =
            origin_line(&autopilot, origin).map_or_else(String::new, |line| format!("  {line}"));
        format!(
            "{:<12} {state}{capacity}{home}{drained}{held}",
            Shown(origin).to_string()
        )
    });
    let mut text = listing_text(lines, "no origins");
    text.push('\n');
    text.push_str(&header_line(&autopilot));
    match &listing.capacities_unreadable {
        Some(why) => text.push_str(&format!("\ncapacities not shown: {}", Shown(why))),
        None => text.push_str(&format!(
            "\ncapacity guard: refuses a change above {}% of an origin's capacity \
             (`dwctl origin capacity --headroom`)",
            percent(listing.headroom)
        )),
    }
    Ok(Outcome {
        text,
        json: json!({"origins": rows, "capacity_headroom": number_json(listing.headroom),
                     "capacities_unreadable": listing.capacities_unreadable,
                     "autopilot": autopilot}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_is_bounded_at_its_edge() {
        // {"a":"…"} is 8 bytes around the string.
        let sized = |bytes: usize| format!("{{\"a\":\"{}\"}}", "x".repeat(bytes - 8));
        assert_eq!(
            Value::Object(meta_arg(&sized(MAX_META_BYTES)).unwrap())
                .to_string()
                .len(),
            MAX_META_BYTES
        );
        let refused = meta_arg(&sized(MAX_META_BYTES + 1))
            .unwrap_err()
            .to_string();
        assert!(
            refused.contains("4097 bytes") && refused.contains("at most 4096"),
            "{refused}"
        );
        // Whitespace in the argument does not count: the size is what is written.
        assert!(
            meta_arg(&format!(
                "{{ \"a\" : \"{}\" }}",
                "x".repeat(MAX_META_BYTES - 8)
            ))
            .is_ok()
        );
    }
}
