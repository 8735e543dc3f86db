//! `route GEO [--sticky KEY] [--bucket B] [--node ID | --snapshot FILE]`: where a visitor
//! goes, and why (a sticky key first, then a visitor bucket, then the country). The routing keys are read (from etcd now, from etcd at the revision a node
//! reports, or from a snapshot file; etcd's in pages, by `ops::route`), compiled into a `dw_routing::Table` exactly as an
//! edge node compiles them, and `Table::explain` walks the chain; so the answer is the
//! node's, not a re-implementation of it.

use dw_routing::Table;
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
        None => crate::ops::route::route_table(context, args.node.as_deref()).await?,
    };
    let explanation = table.explain_bucketed(
        args.geo.as_bytes(),
        args.sticky.as_deref().map(str::as_bytes),
        args.bucket,
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
    if let Some(bucket) = json["bucket"].as_u64() {
        let n = json["buckets"].as_u64().unwrap_or(0);
        let of = if n == 0 {
            "buckets off".to_owned()
        } else {
            format!("of {n}")
        };
        lines.push(format!(
            "  bucket {bucket} ({of}): {} (precedence: a sticky key, then a bucket, then the \
             country)",
            text(&json["bucket_outcome"])
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
    fn a_bucket_says_what_it_did_and_the_precedence() {
        let text = describe(&json!({
            "geo": "DE", "shard": "eu-1", "origin": "fra-b", "answered_by": "/dw/routing/region/DE",
            "hash_key": "3", "hash_key_from": "bucket", "bucket": 3, "buckets": 4,
            "bucket_outcome": "picked by the region's assignment (default)",
            "source": {"kind": "etcd", "revision": 3}, "steps": [],
        }));
        assert!(
            text.contains(
                "\n  bucket 3 (of 4): picked by the region's assignment (default) \
                 (precedence: a sticky key, then a bucket, then the country)\n"
            ),
            "{text}"
        );
        let off = describe(&json!({
            "geo": "DE", "fail_open": true, "bucket": 1, "buckets": 0,
            "bucket_outcome": "ignored: policy/global has no buckets (answered as without a bucket)",
            "source": {"kind": "etcd", "revision": 3}, "steps": [],
        }));
        assert!(
            off.contains("  bucket 1 (buckets off): ignored: policy/global has no buckets"),
            "{off}"
        );
        let none = describe(
            &json!({"geo": "DE", "fail_open": true, "source": {"kind": "etcd", "revision": 3}, "steps": []}),
        );
        assert!(!none.contains("bucket"), "{none}");
    }

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
