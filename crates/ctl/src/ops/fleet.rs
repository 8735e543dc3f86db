//! The fleet as the agents report it: the reads behind `dwctl status`
//! (`commands/status.rs`), and `--wait` after a write.
//!
//! Each dw-agent keeps `<nodes prefix><id>` (default `/dw/nodes/<id>`) on a 10 s lease: the
//! node is *live* while that key exists. It writes the same report to
//! `<nodes prefix>-seen/<id>` on a 10 minute lease, so a node whose live key expired is
//! listed as *gone* for ten minutes, then etcd drops the record by itself.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::time::{Duration, SystemTime};

use etcd_client::Client;
use serde_json::{Value, json};

use dw_routing::keys::seen_prefix;

use crate::context::Context;
use crate::error::Error;
use crate::ops::lease::lease_lives;
pub use crate::ops::revision::routing_revision;
use crate::output::{Outcome, OutputFormat, Shown};
use crate::plan::drain_record::DrainRecord;
use crate::plan::keys::Layout;
use crate::plan::node_report::MISSING;
pub use crate::plan::node_report::NodeReport;
pub use crate::plan::node_report::parse_selector;
use crate::plan::wait::{Wait, needed};

/// The exit code of `status` when a live node lags, and of `--wait` on time-out.
pub const EXIT_LAGGING: u8 = 5;

/// Every node report, live ones and gone ones, sorted by id: read in pages at one
/// revision (10,000 reports of 1 KB are 10 MB). A report is checked against
/// its lease and its seen record (see [`NodeReport::untrusted`]); a node whose report is
/// gone while the lease its seen record names still lives is live and `missing`.
pub async fn read_nodes(client: &mut Client, nodes_prefix: &str) -> Result<Vec<NodeReport>, Error> {
    let mut kv = dw_etcd::kv_client(client);
    let page = dw_etcd::DEFAULT_PAGE_KEYS;
    let live = dw_etcd::read_prefix_pages(&mut kv, nodes_prefix.as_bytes(), None, page).await?;
    let seen_prefix = seen_prefix(nodes_prefix);
    let seen =
        dw_etcd::read_prefix_pages(&mut kv, seen_prefix.as_bytes(), Some(live.revision), page)
            .await?;
    let mut nodes: BTreeMap<String, (NodeReport, i64)> = BTreeMap::new();
    for kv in &live.kvs {
        if let Some(id) = crate::plan::keys::strip(kv.key(), nodes_prefix) {
            let report = NodeReport::parse(id, true, kv.value());
            nodes.insert(id.to_owned(), (report, kv.lease()));
        }
    }
    for kv in &seen.kvs {
        let Some(id) = crate::plan::keys::strip(kv.key(), &seen_prefix) else {
            continue;
        };
        let seen = NodeReport::parse(id, false, kv.value());
        match nodes.get_mut(id) {
            Some((report, on_lease)) => {
                report.untrusted = untrusted(report, *on_lease, seen.named_lease());
            }
            None => {
                let mut node = seen;
                if let Some(lease) = node.named_lease().filter(|lease| *lease != 0)
                    && lease_lives(client, lease).await?
                {
                    node.live = true;
                    node.untrusted = Some(format!(
                        "its report is gone while the lease {lease:x} its seen record names lives"
                    ));
                    node.state = MISSING.to_owned();
                }
                nodes.insert(id.to_owned(), (node, 0));
            }
        }
    }
    Ok(nodes
        .into_values()
        .map(|(mut report, on_lease)| {
            if report.live && report.state != MISSING && report.untrusted.is_none() {
                report.untrusted = untrusted(&report, on_lease, None);
            }
            report
        })
        .collect())
}

/// Why a live report (on lease `on_lease`, 0 for none) cannot be believed, if so: the
/// agent puts it on a lease it keeps alive and names that lease in it and in the seen
/// record; a report put by anyone else usually gets one of them wrong.
fn untrusted(report: &NodeReport, on_lease: i64, seen_names: Option<i64>) -> Option<String> {
    if on_lease == 0 {
        return Some("its report is on no lease".into());
    }
    match (report.named_lease(), seen_names) {
        (Some(named), _) if named != on_lease => Some(format!(
            "its report names lease {named:x} but is on lease {on_lease:x}"
        )),
        (_, Some(seen)) if seen != on_lease => Some(format!(
            "its seen record names lease {seen:x}, its report is on lease {on_lease:x}"
        )),
        _ => None,
    }
}

/// Now, on the node reports' clock (`dw_node_report::unix_ms`).
pub(crate) fn now_ms() -> u64 {
    dw_node_report::unix_ms(SystemTime::now())
}

/// Seconds a node has been behind: since the first node in the fleet published a revision
/// past this node's (etcd does not record commit times, the fleet's publications do).
pub(crate) fn lag_seconds(
    node: &NodeReport,
    nodes: &[NodeReport],
    target: i64,
    now: u64,
) -> Option<f64> {
    let revision = node.revision?;
    if revision >= target {
        return Some(0.0);
    }
    let first = nodes
        .iter()
        .filter(|other| other.revision.is_some_and(|other| other > revision))
        .filter_map(|other| other.published_at_ms)
        .min()?;
    Some(now.saturating_sub(first) as f64 / 1000.0)
}

/// How many revisions `node` is behind `target`; `None` when its revision is invalid.
pub(crate) fn lag_revisions(node: &NodeReport, target: i64) -> Option<i64> {
    node.revision
        .map(|revision| target.saturating_sub(revision).max(0))
}

/// A node's revision as the text output shows it.
pub(crate) fn revision_text(node: &NodeReport) -> String {
    node.revision
        .map_or_else(|| "invalid".to_owned(), |revision| revision.to_string())
}

/// The fleet as `status` sees it: the routing revision nodes are compared with, and the
/// reports of the nodes `selector` picks.
pub(crate) async fn read_fleet(
    client: &mut Client,
    layout: &Layout,
    selector: &BTreeMap<String, String>,
) -> Result<(i64, Vec<NodeReport>), Error> {
    let target = routing_revision(client, &layout.prefix, &layout.nodes).await?;
    let nodes = read_nodes(client, &layout.nodes)
        .await?
        .into_iter()
        .filter(|node| node.matches(selector))
        .collect();
    Ok((target, nodes))
}

/// What `status` shows: the routing revision, the reports of the nodes a selector picks,
/// and the drain records that do not parse or shed (by origin, [`drain_records`]).
pub(crate) struct FleetStatus {
    /// The routing revision the nodes are compared with.
    pub target: i64,
    /// The reports of the nodes picked.
    pub nodes: Vec<NodeReport>,
    /// Drain records that do not parse, with why.
    pub malformed: BTreeMap<String, String>,
    /// Shed origins, with what their shed is.
    pub shed: BTreeMap<String, String>,
}

/// `status`'s reads, on a connection of `context`'s.
pub(crate) async fn read_status(
    context: &Context,
    selector: &BTreeMap<String, String>,
) -> Result<FleetStatus, Error> {
    let mut client = context.etcd.connect().await?;
    let (target, nodes) = read_fleet(&mut client, &context.layout, selector).await?;
    let (malformed, shed) = drain_records(&mut client, &context.layout).await?;
    Ok(FleetStatus {
        target,
        nodes,
        malformed,
        shed,
    })
}

/// After a write committed at `revision`: waits until the quorum of live nodes reports it,
/// adds the fleet's answer to the outcome, and fails with exit code 5 on time-out.
pub async fn wait_after(
    context: &Context,
    mut outcome: Outcome,
    revision: i64,
    wait: Wait,
) -> Result<Outcome, Error> {
    let mut client = context.etcd.connect().await?;
    let deadline = tokio::time::Instant::now() + wait.timeout;
    let progress = context.output == OutputFormat::Text && std::io::stderr().is_terminal();
    let started = tokio::time::Instant::now();
    let (reached, nodes) = loop {
        let nodes: Vec<NodeReport> = read_nodes(&mut client, &context.layout.nodes)
            .await?
            .into_iter()
            .filter(|node| node.live)
            .collect();
        let at = nodes.iter().filter(|node| node.serves(revision)).count();
        let need = needed(nodes.len(), wait.quorum);
        if progress {
            let mut stderr = std::io::stderr().lock();
            let _ = write!(stderr, "\r{at}/{} nodes", nodes.len());
            let _ = stderr.flush();
        }
        if at >= need {
            break (true, nodes);
        }
        if tokio::time::Instant::now() >= deadline {
            break (false, nodes);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    if progress {
        eprintln!();
    }
    let at = nodes.iter().filter(|node| node.serves(revision)).count();
    let lagging: Vec<&NodeReport> = nodes.iter().filter(|n| !n.serves(revision)).collect();
    let waited = started.elapsed().as_secs_f64();
    let mut lines = vec![if reached {
        format!(
            "fleet: {at}/{} live nodes at revision {revision} or later after {waited:.1}s",
            nodes.len()
        )
    } else {
        format!(
            "fleet: timed out after {:.1}s: {at}/{} live nodes at revision {revision} (quorum {}%)",
            wait.timeout.as_secs_f64(),
            nodes.len(),
            wait.quorum
        )
    }];
    if !reached {
        for node in &lagging {
            lines.push(format!(
                "  lagging {} at revision {} ({}{})",
                Shown(&node.id),
                revision_text(node),
                Shown(node.shown_state()),
                node.untrusted
                    .as_ref()
                    .or(node.reason.as_ref())
                    .map(|reason| format!(": {}", Shown(reason)))
                    .unwrap_or_default()
            ));
        }
    }
    let fleet = json!({
        "revision": revision,
        "reached": reached,
        "quorum": wait.quorum,
        "live": nodes.len(),
        "at_revision": at,
        "waited_seconds": waited,
        "lagging": lagging.iter().map(|node| json!({
            "id": node.id, "revision": node.revision, "state": node.shown_state(),
            "reason": node.untrusted.as_ref().or(node.reason.as_ref()), "labels": node.labels,
        })).collect::<Vec<_>>(),
    });
    outcome.text = if outcome.text.trim().is_empty() {
        lines.join("\n")
    } else {
        format!("{}\n{}", outcome.text.trim_end(), lines.join("\n"))
    };
    if let Value::Object(object) = &mut outcome.json {
        object.insert("fleet".into(), fleet);
    }
    if reached {
        Ok(outcome)
    } else {
        Err(Error::Lagging(Box::new(outcome)))
    }
}

/// Malformed and shed origins, by origin: the records that do not parse, with why
/// (`status` names them, since each blocks the commands about its origin until `dwctl
/// drain --repair`), and the records with a shed, with what it is (`shed 40%`).
pub(crate) async fn drain_records(
    client: &mut Client,
    layout: &Layout,
) -> Result<(BTreeMap<String, String>, BTreeMap<String, String>), Error> {
    let mut malformed = BTreeMap::new();
    let mut shed = BTreeMap::new();
    for (origin, record) in read_drain_records(client, layout).await? {
        match record {
            Err(error) => {
                malformed.insert(origin, error.to_string());
            }
            Ok(record) if record.shed.is_some() => {
                shed.insert(origin, record.state_label());
            }
            Ok(_) => {}
        }
    }
    Ok((malformed, shed))
}

/// Every drain record (paged), by origin, parsed or with why it does not parse.
pub async fn read_drain_records(
    client: &mut Client,
    layout: &Layout,
) -> Result<Vec<(String, Result<DrainRecord, Error>)>, Error> {
    let mut kv = dw_etcd::kv_client(client);
    let drains = dw_etcd::read_prefix_pages(
        &mut kv,
        layout.drains().as_bytes(),
        None,
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await?;
    Ok(drains
        .kvs
        .iter()
        .filter_map(|kv| {
            let origin = crate::plan::keys::strip(kv.key(), &layout.drains())?;
            let record = DrainRecord::parse(origin, kv.value()).map_err(Error::from);
            Some((origin.to_owned(), record))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conflict_is_never_current() {
        let report = br#"{"revision":9,"state":"conflict","reason":"two agents"}"#;
        let mut node = NodeReport::parse("n", true, report);
        assert!(!node.serves(9));
        assert_eq!(node.shown_state(), "conflict");
        node.state = "ok".into();
        assert!(node.serves(9));
    }

    #[test]
    fn reports_parse_and_match_labels() {
        let node = NodeReport::parse(
            "n1",
            true,
            br#"{"revision":7,"state":"stale","reason":"x","labels":{"dc":"fra"}}"#,
        );
        assert_eq!(node.revision, Some(7));
        assert_eq!(node.reason.as_deref(), Some("x"));
        assert!(node.matches(&parse_selector("dc=fra").unwrap()));
        assert!(!node.matches(&parse_selector("dc=iad").unwrap()));
        let garbage = NodeReport::parse("n2", true, b"{");
        assert_eq!(garbage.state, "unreadable");
        assert!(parse_selector("dc").is_err());
        assert_eq!(seen_prefix("/dw/nodes/"), "/dw/nodes-seen/");
    }
}
