//! `route GEO [--sticky KEY] [--node ID | --snapshot FILE]`: where a visitor goes, and
//! why. The routing keys are read (from etcd now, from etcd at the revision a node
//! reports, or from a snapshot file), compiled into a `dw_routing::Table` exactly as an
//! edge node compiles them, and `Table::explain` walks the chain; so the answer is the
//! node's, not a re-implementation of it.

use dw_routing::{Snapshot, Table};
use etcd_client::GetOptions;
use serde_json::{Value, json};

use crate::cli::RouteArgs;
use crate::context::Context;
use crate::error::Error;
use crate::input::{Refused, read_regular_file};
use crate::output::{Outcome, escape};

/// The largest snapshot file `--snapshot` reads: the extension's default
/// `dw_router.max_snapshot_bytes`.
pub const MAX_SNAPSHOT_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Runs `dwctl route`.
pub async fn run(context: &Context, args: RouteArgs) -> Result<Outcome, Error> {
    let (table, source) = match &args.snapshot {
        Some(path) => read_snapshot_file(path)?,
        None => read_etcd(context, args.node.as_deref()).await?,
    };
    let explanation = table.explain(
        args.geo.as_bytes(),
        args.sticky.as_deref().map(str::as_bytes),
    );
    let mut json = explanation.to_json();
    json["source"] = source;
    let text = describe(&json);
    Ok(Outcome { text, json })
}

/// The table of a snapshot file, and the description of the source.
fn read_snapshot_file(path: &std::path::Path) -> Result<(Table, Value), Error> {
    let bytes =
        read_regular_file(path, MAX_SNAPSHOT_FILE_BYTES).map_err(|refused| match refused {
            Refused::Io(source) => Error::Io {
                path: path.display().to_string(),
                source,
            },
            Refused::NotRegular(kind) => Error::Io {
                path: path.display().to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("is {kind}, not a regular file"),
                ),
            },
            Refused::TooLarge => Error::Failed(format!(
                "{}: larger than {MAX_SNAPSHOT_FILE_BYTES} bytes, the most a node reads",
                path.display()
            )),
        })?;
    let table = Table::parse(&bytes).map_err(|error| {
        Error::Failed(format!(
            "{}: not a snapshot a node would load: {error}",
            path.display()
        ))
    })?;
    let source = json!({"kind": "snapshot", "path": path.display().to_string()});
    Ok((table, source))
}

/// The table of etcd's routing prefix, now or at the revision `node` reports.
async fn read_etcd(context: &Context, node: Option<&str>) -> Result<(Table, Value), Error> {
    let mut client = context.etcd.connect().await?;
    let node_revision = match node {
        None => None,
        Some(id) => {
            let nodes = crate::ops::fleet::read_nodes(&mut client, &context.layout.nodes).await?;
            let report = nodes
                .into_iter()
                .find(|report| report.id == id)
                .ok_or_else(|| {
                    Error::NotFound(format!(
                        "node `{}` (no report under {})",
                        id.escape_default(),
                        context.layout.nodes
                    ))
                })?;
            // `None`: the report's revision is absent or not a valid revision.
            let Some(revision) = report.revision.filter(|&revision| revision > 0) else {
                return Err(Error::Failed(format!(
                    "node `{}` reports no revision it routes from (state {})",
                    id.escape_default(),
                    report.state.escape_default()
                )));
            };
            Some((report.id, revision, report.live, report.labels))
        }
    };
    let prefix = context.layout.prefix.as_str();
    let mut options = GetOptions::new().with_prefix();
    if let Some((_, revision, _, _)) = &node_revision {
        options = options.with_revision(*revision);
    }
    let response =
        client
            .get(prefix, Some(options))
            .await
            .map_err(|error| match &node_revision {
                Some((_, revision, _, _)) => Error::Failed(format!(
                    "cannot read {prefix} at revision {revision} (compacted?): {error}"
                )),
                None => Error::Etcd(error),
            })?;
    let revision = match &node_revision {
        Some((_, revision, _, _)) => *revision,
        None => response.header().map_or(0, |header| header.revision()),
    };
    let mut snapshot = Snapshot::new(u64::try_from(revision).unwrap_or(0), prefix);
    let stage_prefix = format!("{prefix}{}", dw_routing::keys::STAGE);
    let mut stage_revisions = std::collections::BTreeMap::new();
    for kv in response.kvs() {
        let key = String::from_utf8_lossy(kv.key()).into_owned();
        if key.starts_with(&stage_prefix) {
            stage_revisions.insert(key.clone(), u64::try_from(kv.mod_revision()).unwrap_or(0));
        }
        snapshot
            .kvs
            .insert(key, String::from_utf8_lossy(kv.value()).into_owned());
    }
    match node_revision {
        // The node routes from etcd's keys as they were at its revision, with its own
        // stages in place (the overlay its agent applies).
        Some((id, revision, live, labels)) => {
            let node = dw_routing::stage::Node {
                id: &id,
                labels: &labels,
            };
            let overlay = dw_routing::stage::overlay(&snapshot, &stage_revisions, Some(&node));
            let source = json!({
                "kind": "node", "node": id, "live": live, "revision": revision,
                "stages": overlay.snapshot.stages,
            });
            Ok((Table::from_snapshot(&overlay.snapshot), source))
        }
        // Current routing, as a node in no cohort serves it.
        None => {
            let overlay = dw_routing::stage::overlay(&snapshot, &stage_revisions, None);
            let source = json!({"kind": "etcd", "revision": revision});
            Ok((Table::from_snapshot(&overlay.snapshot), source))
        }
    }
}

/// The explanation for people. Every string from etcd or the command line is escaped.
fn describe(json: &Value) -> String {
    let text = |value: &Value| escape(value.as_str().unwrap_or("-"));
    let mut lines = Vec::new();
    let geo = text(&json["geo"]);
    if json["fail_open"] == Value::Bool(true) {
        lines.push(format!(
            "{geo} -> FAIL-OPEN: no step answers; each node serves its own ini route \
             (dw_router.fallback_shard / dw_router.fallback_origin), which etcd does not know"
        ));
    } else {
        lines.push(format!(
            "{geo} -> shard {}, origin {}",
            text(&json["shard"]),
            text(&json["origin"])
        ));
        lines.push(format!(
            "  answered by {}, hash key {} ({})",
            text(&json["answered_by"]),
            text(&json["hash_key"]),
            text(&json["hash_key_from"])
        ));
    }
    let source = &json["source"];
    lines.push(match source["kind"].as_str() {
        Some("node") => format!(
            "  from etcd at revision {}, the one node {} reports ({})",
            source["revision"],
            text(&source["node"]),
            if source["live"] == Value::Bool(true) {
                "live"
            } else {
                "gone"
            }
        ),
        Some("snapshot") => format!(
            "  from the snapshot file {} (revision {})",
            text(&source["path"]),
            json["revision"]
        ),
        _ => format!("  from etcd at revision {} (current)", source["revision"]),
    });
    if let Some(stages) = source["stages"]
        .as_array()
        .filter(|stages| !stages.is_empty())
    {
        let names: Vec<String> = stages
            .iter()
            .map(|stage| format!("{} (revision {})", text(&stage["id"]), stage["revision"]))
            .collect();
        lines.push(format!(
            "  with the node's stages applied: {}",
            names.join(", ")
        ));
    }
    lines.push(match json["continent"].as_str() {
        Some(continent) => format!(
            "  continent {continent} (from {}; table {})",
            text(&json["continent_source"]),
            text(&json["continent_table"])
        ),
        None => format!("  no continent (table {})", text(&json["continent_table"])),
    });
    for (number, step) in json["steps"].as_array().into_iter().flatten().enumerate() {
        let stage = match step["index"].as_u64() {
            Some(index) => format!("failover[{index}]"),
            None => text(&step["stage"]),
        };
        let reason = step["reason"]
            .as_str()
            .map(|reason| format!(": {}", escape(reason)))
            .unwrap_or_default();
        lines.push(format!(
            "  {}. {stage:<12} {:<16} {}{reason}",
            number + 1,
            text(&step["geo"]),
            text(&step["outcome"]),
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_by_the_output_layer() {
        let text = describe(&json!({
            "geo": "DE\u{1b}[2J\n", "shard": "eu-1\u{202e}", "origin": "Zürich\\u{1b}",
            "answered_by": "DE", "hash_key": "k", "hash_key_from": "sticky",
            "source": {"kind": "etcd", "revision": 3}, "steps": [],
        }));
        assert!(
            text.starts_with("DE\\u{1b}[2J\\u{a} -> shard eu-1\\u{202e}, origin Zürich\\\\u{1b}\n"),
            "{text}"
        );
    }
}
