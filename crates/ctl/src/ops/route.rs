//! `dwctl route`'s read: the routing prefix as a node would compile it, now or at the
//! revision a node reports, read in pages at one revision (no single response holds the
//! whole prefix, docs/ARCHITECTURE.md), with the stages a node would apply.

use std::collections::BTreeMap;

use dw_routing::{Snapshot, Table};
use etcd_client::Client;
use serde_json::{Value, json};

use crate::context::Context;
use crate::error::Error;
use crate::ops::fleet::read_nodes;

/// The routing prefix read in pages at one revision: its keys as a snapshot holds them,
/// and each stage key's `mod_revision` (the overlay orders stages by it).
#[derive(Debug, Clone)]
pub struct RoutingRead {
    /// Every key under the prefix (in full) with its value, at `snapshot.revision`.
    pub snapshot: Snapshot,
    /// The `mod_revision` of each stage key (`<prefix>stage/...`).
    pub stage_revisions: BTreeMap<String, u64>,
    /// How many pages it took.
    pub pages: u32,
}

/// Reads every key under `prefix`, `page_keys` keys per request
/// (`dw_etcd::DEFAULT_PAGE_KEYS` for dwctl's own reads), at `revision` when given
/// (otherwise at the revision of the first page).
pub async fn read_routing(
    client: &mut Client,
    prefix: &str,
    revision: Option<i64>,
    page_keys: i64,
) -> Result<RoutingRead, Error> {
    let mut kv = dw_etcd::kv_client(client);
    let stage_prefix = format!("{prefix}{}", dw_routing::keys::STAGE);
    let mut kvs = BTreeMap::new();
    let mut stage_revisions = BTreeMap::new();
    let end = dw_etcd::prefix_range_end(prefix.as_bytes());
    let read = dw_etcd::visit_range_pages(
        &mut kv,
        prefix.as_bytes(),
        &end,
        revision,
        page_keys,
        None,
        |page| {
            for kv in page.kvs() {
                let key = String::from_utf8_lossy(kv.key()).into_owned();
                if key.starts_with(&stage_prefix) {
                    stage_revisions
                        .insert(key.clone(), u64::try_from(kv.mod_revision()).unwrap_or(0));
                }
                kvs.insert(key, String::from_utf8_lossy(kv.value()).into_owned());
            }
        },
    )
    .await
    .map_err(|failure| match (failure.cause, revision) {
        (dw_etcd::PageCause::Etcd(error), Some(revision)) => Error::Failed(format!(
            "cannot read {prefix} at revision {revision} (compacted?): {error}"
        )),
        (dw_etcd::PageCause::Etcd(error), None) => Error::Etcd(error),
        (dw_etcd::PageCause::Deadline(after), _) => Error::Failed(format!(
            "cannot read {prefix}: no answer within {} ms",
            after.as_millis()
        )),
    })?;
    let revision = revision.unwrap_or(read.revision);
    let mut snapshot = Snapshot::new(u64::try_from(revision).unwrap_or(0), prefix);
    snapshot.kvs = kvs;
    Ok(RoutingRead {
        snapshot,
        stage_revisions,
        pages: read.pages,
    })
}

/// The table `dwctl route` explains: etcd's routing prefix now, as a node in no cohort
/// serves it, or (`node`) at the revision that node reports, with its own stages applied;
/// and the description of that source for the output.
pub async fn route_table(context: &Context, node: Option<&str>) -> Result<(Table, Value), Error> {
    let mut client = context.etcd.connect().await?;
    let node_revision = match node {
        None => None,
        Some(id) => {
            let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
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
    let read = read_routing(
        &mut client,
        &context.layout.prefix,
        node_revision.as_ref().map(|(_, revision, _, _)| *revision),
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await?;
    let revision = read.snapshot.revision;
    match node_revision {
        // The node routes from etcd's keys as they were at its revision, with its own
        // stages in place (the overlay its agent applies).
        Some((id, revision, live, labels)) => {
            let node = dw_routing::stage::Node {
                id: &id,
                labels: &labels,
            };
            let overlay =
                dw_routing::stage::overlay(&read.snapshot, &read.stage_revisions, Some(&node));
            let source = json!({
                "kind": "node", "node": id, "live": live, "revision": revision,
                "stages": overlay.snapshot.stages,
            });
            Ok((Table::from_snapshot(&overlay.snapshot), source))
        }
        // Current routing, as a node in no cohort serves it.
        None => {
            let overlay = dw_routing::stage::overlay(&read.snapshot, &read.stage_revisions, None);
            let source = json!({"kind": "etcd", "revision": revision});
            Ok((Table::from_snapshot(&overlay.snapshot), source))
        }
    }
}
