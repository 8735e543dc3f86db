//! `status`: the fleet's node reports against the routing revision, one line (or JSON
//! object) per node, exit 5 when a live node lags; `--serve` runs the fleet exporter
//! instead (`daemons/exporter.rs`). The reads are `ops::fleet`'s, the judgements of one
//! node `NodeReport`'s (crates/ctl-plan/src/node_report.rs).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cli::StatusArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::fleet::{
    FleetStatus, NodeReport, lag_revisions, lag_seconds, now_ms, parse_selector, read_status,
    revision_text,
};
use crate::output::{Outcome, Shown};
use crate::shutdown::Shutdown;

/// Runs `dwctl status` (`--serve`: the exporter, until `shutdown`).
pub async fn run(
    context: &Context,
    args: StatusArgs,
    shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let selector = parse_selector(&args.labels)?;
    match &args.serve {
        Some(addr) => {
            if !(0.5..=3600.0).contains(&args.interval) {
                return Err(Error::Usage(format!(
                    "--interval {}: must be between 0.5 and 3600 seconds",
                    args.interval
                )));
            }
            let interval = std::time::Duration::from_secs_f64(args.interval);
            crate::daemons::exporter::serve(context, &selector, addr, interval, shutdown).await
        }
        None => status(context, &selector).await,
    }
}

/// The fleet's status: each node `selector` picks, the summary, shed origins and
/// malformed drain records.
async fn status(context: &Context, selector: &BTreeMap<String, String>) -> Result<Outcome, Error> {
    let FleetStatus {
        target,
        nodes,
        malformed,
        shed,
    } = read_status(context, selector).await?;
    let now = now_ms();
    let live = nodes.iter().filter(|node| node.live).count();
    let current = nodes.iter().filter(|node| node.serves(target)).count();
    let summary = format!("{current} of {live} live nodes at revision {target}");
    let mut lines = vec![
        format!("routing revision {target} ({})", context.layout.prefix),
        HEADER.to_owned(),
    ];
    lines.extend(
        nodes
            .iter()
            .map(|node| node_line(node, &nodes, target, now)),
    );
    lines.push(summary.clone());
    for (origin, label) in &shed {
        lines.push(format!(
            "note: {} is {} (`dwctl origin list`; `dwctl restore {}` undoes it)",
            Shown(origin),
            Shown(label),
            Shown(origin)
        ));
    }
    for (origin, error) in &malformed {
        lines.push(format!(
            "warning: the drain record of {} is malformed ({}); repair it with `dwctl drain --repair {}`",
            Shown(origin),
            Shown(error),
            Shown(origin)
        ));
    }
    let outcome = Outcome {
        text: lines.join("\n"),
        json: json!({
            "revision": target,
            "prefix": context.layout.prefix,
            "nodes": nodes.iter().map(|node| node_json(node, &nodes, target, now)).collect::<Vec<_>>(),
            "live": live,
            "current": current,
            "gone": nodes.len() - live,
            "summary": summary,
            "malformed_drain_records": malformed,
            "shed_origins": shed,
        }),
    };
    if current < live {
        return Err(Error::Lagging(Box::new(outcome)));
    }
    Ok(outcome)
}

fn age(now: u64, at: Option<u64>) -> Option<f64> {
    at.map(|at| now.saturating_sub(at) as f64 / 1000.0)
}

fn node_json(node: &NodeReport, nodes: &[NodeReport], target: i64, now: u64) -> Value {
    json!({
        "id": node.id,
        "live": node.live,
        "state": node.shown_state(),
        "reported_state": node.state,
        "reason": node.untrusted.as_ref().or(node.reason.as_ref()),
        "untrusted": node.untrusted,
        "labels": node.labels,
        "revision": node.revision,
        "revision_valid": node.revision.is_some(),
        "reported_revision": node.raw["revision"],
        "lag_revisions": lag_revisions(node, target),
        "lag_seconds": lag_seconds(node, nodes, target, now),
        "report_age_seconds": age(now, node.reported_at_ms),
        "rejected": node.raw["rejected"],
        "version": node.raw["version"],
        "stages": node.raw["stages"].as_array().cloned().unwrap_or_default(),
        "purge_failures": purge_failures(node),
        "ignored_assignments": node.raw["ignored_assignments"].as_array().cloned().unwrap_or_default(),
        "ignored_assignments_total": node.report.ignored_assignments_total,
    })
}

fn node_line(node: &NodeReport, nodes: &[NodeReport], target: i64, now: u64) -> String {
    let state = if let Some(why) = &node.untrusted {
        format!("{} ({})", node.shown_state(), Shown(why))
    } else if node.live {
        match (&node.state[..], &node.reason) {
            ("ok", _) | (_, None) => Shown(&node.state).to_string(),
            (state, Some(reason)) => format!("{} ({})", Shown(state), Shown(reason)),
        }
    } else {
        "gone (lease expired)".into()
    };
    let seconds = |value: Option<f64>| value.map_or("-".into(), |s| format!("{s:.1}s"));
    let state = match node_stages(node) {
        stages if stages.is_empty() => state,
        stages => format!("{state} stage {stages}"),
    };
    let state = match purge_failures(node) {
        0 => state,
        failures => format!("{state} purge_failures={failures}"),
    };
    // Regions whose stored bucket assignment the node's routers ignore (issue 41: their
    // default assignment answers); the list is in the JSON output.
    let state = match node.report.ignored_assignments_total {
        0 => state,
        ignored => format!("{state} ignored_assignments={ignored}"),
    };
    format!(
        "{:<20} {:<20} {:>10} {:>6} {:>8} {:>8}  {}",
        Shown(&node.id).to_string(),
        node.labels_text(),
        revision_text(node),
        lag_revisions(node, target).map_or_else(|| "-".to_owned(), |lag| lag.to_string()),
        seconds(lag_seconds(node, nodes, target, now)),
        seconds(age(now, node.reported_at_ms)),
        state
    )
}

/// Purge requests to the node's page cache that failed since its agent started (reports
/// before the field, or without a purge endpoint: 0).
fn purge_failures(node: &NodeReport) -> u64 {
    node.report.purge_failures
}

/// The stages a node's report says it applies: `id@revision,...` (control characters
/// escaped: the report is written by the node).
fn node_stages(node: &NodeReport) -> String {
    node.report
        .stages
        .iter()
        .map(|stage| {
            let id = crate::output::escape(stage.id.as_deref().unwrap_or("?"));
            format!("{id}@{}", stage.revision)
        })
        .collect::<Vec<_>>()
        .join(",")
}

const HEADER: &str =
    "NODE                 LABELS                 REVISION    LAG    LAG_S   REPORT  STATE";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_assignments_are_shown_only_when_there_are_some() {
        let nodes = |report: &[u8]| vec![NodeReport::parse("n", true, report)];
        let ignoring = nodes(
            br#"{"revision":9,"state":"ok","ignored_assignments_total":3,
                "ignored_assignments":[{"key":"region/DE","error":"buckets: short of N"}]}"#,
        );
        let line = node_line(&ignoring[0], &ignoring, 9, 0);
        assert!(line.ends_with("ok ignored_assignments=3"), "{line}");
        let json = node_json(&ignoring[0], &ignoring, 9, 0);
        assert_eq!(json["ignored_assignments_total"], 3);
        assert_eq!(json["ignored_assignments"][0]["key"], "region/DE");
        let quiet = nodes(br#"{"revision":9,"state":"ok"}"#);
        let line = node_line(&quiet[0], &quiet, 9, 0);
        assert!(!line.contains("ignored_assignments"), "{line}");
        let json = node_json(&quiet[0], &quiet, 9, 0);
        assert_eq!(json["ignored_assignments_total"], 0);
        assert_eq!(json["ignored_assignments"], serde_json::json!([]));
    }

    #[test]
    fn purge_failures_are_shown_only_when_there_are_some() {
        let nodes = |report: &[u8]| vec![NodeReport::parse("n", true, report)];
        let failing = nodes(br#"{"revision":9,"state":"ok","purge_failures":12}"#);
        let line = node_line(&failing[0], &failing, 9, 0);
        assert!(line.ends_with("ok purge_failures=12"), "{line}");
        assert_eq!(node_json(&failing[0], &failing, 9, 0)["purge_failures"], 12);
        // None, an older report without the field, or a value of another type: not shown.
        for report in [
            &br#"{"revision":9,"state":"ok","purge_failures":0}"#[..],
            br#"{"revision":9,"state":"ok"}"#,
            br#"{"revision":9,"state":"ok","purge_failures":"\u001b[2J"}"#,
            br#"{"revision":9,"state":"ok","purge_failures":-1}"#,
        ] {
            let quiet = nodes(report);
            let line = node_line(&quiet[0], &quiet, 9, 0);
            assert!(line.ends_with("  ok"), "{line}");
            assert_eq!(node_json(&quiet[0], &quiet, 9, 0)["purge_failures"], 0);
        }
    }
}
