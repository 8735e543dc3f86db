//! The node's stages: what this node routes from when stage keys (`<prefix>stage/<id>`)
//! are open. The rule itself is `dw_routing::stage::overlay`; this module only decides
//! when it is needed and who the node is.
//!
//! With no stage key in the mirror (the usual state) nothing is computed and the mirror's
//! snapshot is published as it is, so an agent without stages does exactly what it did
//! before they existed.

use dw_routing::Snapshot;
use dw_routing::keys::STAGE;
use dw_routing::stage::{Node, Overlay, overlay};

use crate::agent::mirror::Mirror;
use crate::config::ReportConfig;

/// The effective state for this node, or `None` when the mirror holds no stage key (the
/// mirror's snapshot is then the effective one). A node without an id (reports off) is in
/// no cohort: the overlay then only leaves the stage keys out.
pub(crate) fn effective(mirror: &Mirror, node: Option<&ReportConfig>) -> Option<Overlay> {
    let snapshot = mirror.snapshot();
    if !has_stage_keys(snapshot) {
        return None;
    }
    let node = node.map(|report| Node {
        id: &report.node_id,
        labels: &report.labels,
    });
    Some(overlay(snapshot, mirror.stage_revisions(), node.as_ref()))
}

/// Whether the snapshot holds any `<prefix>stage/` key.
fn has_stage_keys(snapshot: &Snapshot) -> bool {
    let start = format!("{}{STAGE}", snapshot.prefix);
    snapshot
        .kvs
        .range(start.clone()..)
        .next()
        .is_some_and(|(key, _)| key.starts_with(&start))
}
