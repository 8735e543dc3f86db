//! `dwctl status --serve ADDR`: the fleet's view (what `dwctl status` prints) as Prometheus
//! metrics, scrapeable from one place.
//!
//! A node cannot know when etcd committed a change, so end-to-end lag is a fleet figure:
//! this exporter reads the routing head revision and every node report (paged, as
//! `status` does) every `--interval`, and serves the last complete reading at `/metrics`
//! in the OpenMetrics text format (the `prometheus-client` crate's encoder, which escapes
//! label values; node ids come from etcd). A failed reading keeps the previous series,
//! sets `dw_fleet_up` to 0 and counts `dw_fleet_read_errors_total`, so an alert sees the
//! exporter's own trouble apart from the fleet's. It needs only read access
//! (`dw-viewer`, from `dwctl auth`).
//!
//! It also serves each region's configured weights (`dw_routing_weight{region,origin}`,
//! [`crate::daemons::routing_weights`]), for dashboards and alerts that compare weight with traffic,
//! and the overloads that automatic drains (`dwctl health`, `dwctl rebalance`) went ahead
//! with: such a drain always drains, and records the load it predicted for each origin over
//! the capacity guard's limit in its drain record (`predicted`). Each is
//! `dw_fleet_predicted_overload_ratio{origin,drained}`, predicted load over capacity, while
//! the record stays (until `dwctl restore`); the alert `DwOriginPredictedOverload` reads it.
//!
//! Limits: at most [`MAX_NODES`] nodes are exported (the rest are counted in
//! `dw_fleet_nodes_not_exported`), at most [`MAX_OVERLOADS`] overload series (the rest in
//! `dw_fleet_predicted_overloads_not_exported`); the port is served by `dw_http_guard` (as dw-agent's
//! `/metrics`): at most [`metrics_port::MAX_CONNECTIONS`] connections, a new one beyond evicting the
//! oldest still sending its request head, [`metrics_port::HEAD_TIMEOUT`] for the head and
//! [`metrics_port::REQUEST_TIMEOUT`] in all, heads of at most
//! [`metrics_port::MAX_REQUEST_HEAD`] bytes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::json;
use tokio::sync::RwLock;

use crate::context::Context;
use crate::daemons::metrics_port::{self, CONTENT_TYPE};
use crate::daemons::routing_weights::{AnswerShares, RegionWeights, read_weights};
use crate::error::Error;
use crate::ops::fleet::{
    NodeReport, lag_revisions, lag_seconds, now_ms, read_drain_records, read_fleet,
};
use crate::output::{Outcome, Shown};
use crate::plan::drain_record::DrainRecord;
use crate::shutdown::Shutdown;

/// The most nodes one reading exports (series per node: about six).
pub const MAX_NODES: usize = 20_000;
/// The most predicted-overload series one reading exports (one per drained origin and
/// overloaded origin).
pub const MAX_OVERLOADS: usize = 10_000;

/// What a node is, as one label: the `STATE` column of `dwctl status` without its reason.
fn node_state(node: &NodeReport) -> String {
    node.shown_state().to_owned()
}

type NodeLabels = Vec<(String, String)>;

/// One reading of etcd.
#[derive(Debug, Default)]
struct Reading {
    /// The routing prefix's head revision.
    target: i64,
    /// The (selected) node reports.
    nodes: Vec<NodeReport>,
    /// Every region's weights.
    weights: Vec<RegionWeights>,
    /// How many regions did not parse.
    unreadable: usize,
    /// Where the routing core sends answers.
    shares: AnswerShares,
    /// The overloads automatic drains recorded, in drain-record order.
    overloads: Vec<RecordedOverload>,
}

/// One overload an automatic drain went ahead with: draining `drained` was predicted to
/// bring `origin` to `predicted` requests per second against its `capacity`.
#[derive(Debug, Clone, PartialEq)]
struct RecordedOverload {
    drained: String,
    origin: String,
    predicted: f64,
    capacity: f64,
}

/// The overloads `drained`'s record says its drain predicted: none when the drain made no
/// prediction (`"made": false`, a manual drain, an older record) and none for an entry
/// without a positive capacity or a finite load (the record is etcd's data: a bad entry is
/// left out, never exported as infinity).
fn recorded_overloads(drained: &str, record: &DrainRecord) -> Vec<RecordedOverload> {
    let Some(predicted) = &record.predicted else {
        return Vec::new();
    };
    if predicted.get("made") != Some(&serde_json::Value::Bool(true)) {
        return Vec::new();
    }
    let Some(overloads) = predicted.get("overloads").and_then(|o| o.as_array()) else {
        return Vec::new();
    };
    overloads
        .iter()
        .filter_map(|overload| {
            let origin = overload.get("origin")?.as_str()?;
            let load = overload.get("predicted")?.as_f64()?;
            let capacity = overload.get("capacity")?.as_f64()?;
            (capacity > 0.0 && load.is_finite() && load >= 0.0).then(|| RecordedOverload {
                drained: drained.to_owned(),
                origin: origin.to_owned(),
                predicted: load,
                capacity,
            })
        })
        .collect()
}

/// The predicted-overload series: one per recorded overload, at most [`MAX_OVERLOADS`].
fn register_overloads(registry: &mut Registry, overloads: &[RecordedOverload]) {
    let ratio = Family::<NodeLabels, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "dw_fleet_predicted_overload_ratio",
        "An automatic drain's predicted load of an origin over its capacity, while the drain record stays (origin: the overloaded one, drained: the drained one)",
        ratio.clone(),
    );
    for overload in overloads.iter().take(MAX_OVERLOADS) {
        ratio
            .get_or_create(&vec![
                ("origin".to_owned(), overload.origin.clone()),
                ("drained".to_owned(), overload.drained.clone()),
            ])
            .set(overload.predicted / overload.capacity);
    }
    let left_out = Gauge::<i64, AtomicI64>::default();
    left_out.set(i64::try_from(overloads.len().saturating_sub(MAX_OVERLOADS)).unwrap_or(i64::MAX));
    registry.register(
        "dw_fleet_predicted_overloads_not_exported",
        "Predicted-overload series left out (over the exporter's limit)",
        left_out,
    );
}

/// One complete reading of the fleet, rendered.
fn render(reading: &Reading, now: u64, errors: u64, up: bool) -> String {
    let (target, nodes) = (reading.target, &reading.nodes[..]);
    let mut registry = Registry::default();
    crate::daemons::routing_weights::register(&mut registry, &reading.weights, reading.unreadable);
    crate::daemons::routing_weights::register_answer_shares(&mut registry, &reading.shares);
    register_overloads(&mut registry, &reading.overloads);
    let head = Gauge::<i64, AtomicI64>::default();
    head.set(target);
    registry.register(
        "dw_fleet_routing_revision",
        "The routing prefix's head revision (what every live node should serve)",
        head,
    );
    let counts = Family::<Vec<(String, String)>, Gauge>::default();
    registry.register(
        "dw_fleet_nodes",
        "Nodes by what the fleet view says of them: live, current (serve the head revision), lagging (live, not current), gone",
        counts.clone(),
    );
    let live = nodes.iter().filter(|node| node.live).count();
    let current = nodes.iter().filter(|node| node.serves(target)).count();
    for (status, count) in [
        ("live", live),
        ("current", current),
        ("lagging", live.saturating_sub(current)),
        ("gone", nodes.len() - live),
    ] {
        counts
            .get_or_create(&vec![("status".to_owned(), status.to_owned())])
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
    let revision = Family::<NodeLabels, Gauge>::default();
    let state = Family::<NodeLabels, Gauge>::default();
    let lag = Family::<NodeLabels, Gauge>::default();
    let lag_s = Family::<NodeLabels, Gauge<f64, AtomicU64>>::default();
    let report_age = Family::<NodeLabels, Gauge<f64, AtomicU64>>::default();
    registry.register(
        "dw_fleet_node_revision",
        "The revision a node reports it serves (absent when its report's revision is invalid)",
        revision.clone(),
    );
    registry.register(
        "dw_fleet_node_state",
        "1 for a node's state: ok, stale, conflict, missing, untrusted, gone, ...",
        state.clone(),
    );
    registry.register(
        "dw_fleet_node_lag_revisions",
        "How many revisions a node is behind the head",
        lag.clone(),
    );
    registry.register(
        "dw_fleet_node_lag_seconds",
        "Seconds a node has been behind: since the first node published a later revision",
        lag_s.clone(),
    );
    registry.register(
        "dw_fleet_node_report_age_seconds",
        "Seconds since a node last wrote its report",
        report_age.clone(),
    );
    for node in nodes.iter().take(MAX_NODES) {
        let labels = vec![("node".to_owned(), node.id.clone())];
        if let Some(at) = node.revision {
            revision.get_or_create(&labels).set(at);
        }
        let mut with_state = labels.clone();
        with_state.push(("state".to_owned(), node_state(node)));
        state.get_or_create(&with_state).set(1);
        if let Some(behind) = lag_revisions(node, target) {
            lag.get_or_create(&labels).set(behind);
        }
        if let Some(seconds) = lag_seconds(node, nodes, target, now) {
            lag_s.get_or_create(&labels).set(seconds);
        }
        if let Some(at) = node.reported_at_ms {
            report_age
                .get_or_create(&labels)
                .set(now.saturating_sub(at) as f64 / 1000.0);
        }
    }
    let not_exported = Gauge::<i64, AtomicI64>::default();
    not_exported.set(i64::try_from(nodes.len().saturating_sub(MAX_NODES)).unwrap_or(i64::MAX));
    registry.register(
        "dw_fleet_nodes_not_exported",
        "Nodes left out of the per-node series (over the exporter's limit)",
        not_exported,
    );
    meta(&mut registry, errors, up);
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = encode(&mut text, &registry);
    text
}

/// The exporter's own series: whether the last reading succeeded, and failures so far.
fn meta(registry: &mut Registry, errors: u64, up: bool) {
    let up_gauge = Gauge::<i64, AtomicI64>::default();
    up_gauge.set(i64::from(up));
    registry.register(
        "dw_fleet_up",
        "1 when the exporter's last reading of etcd succeeded, 0 when it failed (the other series are then the last good reading's)",
        up_gauge,
    );
    let error_counter = Counter::<u64, AtomicU64>::default();
    error_counter.inc_by(errors);
    registry.register(
        "dw_fleet_read_errors",
        "Readings of etcd that failed",
        error_counter,
    );
}

/// A reading of etcd: the head revision and the (selected) node reports.
async fn read(context: &Context, selector: &BTreeMap<String, String>) -> Result<Reading, Error> {
    let mut client = context.etcd.connect().await?;
    let (target, nodes) = read_fleet(&mut client, &context.layout, selector).await?;
    let (weights, unreadable, shares) = read_weights(&mut client, &context.layout).await?;
    // A malformed record is `dwctl status`'s to name (it blocks its origin's commands).
    let overloads = read_drain_records(&mut client, &context.layout)
        .await?
        .iter()
        .filter_map(|(drained, record)| Some(recorded_overloads(drained, record.as_ref().ok()?)))
        .flatten()
        .collect();
    Ok(Reading {
        target,
        nodes,
        weights,
        unreadable,
        shares,
        overloads,
    })
}

/// The state the HTTP side serves from.
struct Exported {
    text: RwLock<String>,
}

async fn answer(
    exported: Arc<Exported>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let response = |status: StatusCode, kind: &str, body: String| {
        Response::builder()
            .status(status)
            .header("content-type", kind)
            .body(Full::new(Bytes::from(body)))
            .unwrap_or_default()
    };
    Ok(match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => response(
            StatusCode::OK,
            CONTENT_TYPE,
            exported.text.read().await.clone(),
        ),
        (&Method::GET, _) => response(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: the fleet's metrics are at /metrics\n".into(),
        ),
        _ => response(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        ),
    })
}

/// `dwctl status --serve ADDR`: reads the fleet every `interval` and serves `/metrics`
/// until SIGTERM/SIGINT.
pub async fn serve(
    context: &Context,
    selector: &BTreeMap<String, String>,
    addr: &str,
    interval: Duration,
    mut shutdown: Shutdown,
) -> Result<Outcome, Error> {
    let addr: SocketAddr = addr.parse().map_err(|_| {
        Error::Usage(format!(
            "--serve `{}`: expected an address such as 127.0.0.1:9466",
            Shown(addr)
        ))
    })?;
    let reporter = context.reporter();
    let exported = Arc::new(Exported {
        text: RwLock::new(render(&Reading::default(), now_ms(), 0, false)),
    });
    // The connection handling is dw_http_guard's, shared with dw-agent's /metrics
    // (daemons::metrics_port).
    let (bound, server) = {
        let exported = exported.clone();
        metrics_port::listen(addr, "--serve", move |request| {
            let exported = exported.clone();
            async move {
                match answer(exported, request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                }
            }
        })
        .await?
    };
    reporter.event(
        "listening",
        &format!("fleet metrics at http://{bound}/metrics, read every {interval:?}"),
        json!({"addr": bound.to_string(), "interval_seconds": interval.as_secs_f64()}),
    );
    let mut errors = 0u64;
    let mut last_good = Reading::default();
    let mut failing = false;
    loop {
        let reading = tokio::time::timeout(
            interval.max(Duration::from_secs(5)),
            read(context, selector),
        )
        .await;
        let failure = match reading {
            Ok(Ok(good)) => {
                last_good = good;
                None
            }
            Ok(Err(error)) => Some(error.to_string()),
            Err(_) => Some(format!(
                "no answer within {:?}",
                interval.max(Duration::from_secs(5))
            )),
        };
        let up = failure.is_none();
        match failure {
            None if failing => {
                reporter.event("recovered", "etcd read again", json!({}));
                failing = false;
            }
            None => {}
            Some(error) => {
                errors += 1;
                // Said once per failing spell, a read error or a read that timed out alike.
                if !failing {
                    reporter.event(
                        "read-failed",
                        &format!(
                            "cannot read the fleet ({}); serving the last good reading",
                            Shown(&error)
                        ),
                        json!({"error": error}),
                    );
                    failing = true;
                }
            }
        }
        *exported.text.write().await = render(&last_good, now_ms(), errors, up);
        if !shutdown.sleep(interval).await {
            break;
        }
    }
    server.abort();
    Ok(Outcome {
        text: "fleet exporter stopped".into(),
        json: json!({"stopped": true, "read_errors": errors}),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn node(id: &str, live: bool, revision: Option<i64>, state: &str) -> NodeReport {
        NodeReport {
            id: id.into(),
            live,
            revision,
            state: state.into(),
            reason: None,
            labels: BTreeMap::new(),
            published_at_ms: Some(1_000),
            reported_at_ms: Some(2_000),
            report: dw_node_report::NodeReport::default(),
            raw: Value::Null,
            untrusted: None,
        }
    }

    #[test]
    fn renders_the_fleet_and_escapes_label_values() {
        let nodes = [
            node("edge-1", true, Some(10), "ok"),
            node("edge-2", true, Some(8), "ok"),
            node("evil\"}\nx 1", true, Some(10), "ok"),
            node("edge-3", false, Some(7), "ok"),
        ];
        let text = render(
            &Reading {
                target: 10,
                nodes: nodes.to_vec(),
                ..Reading::default()
            },
            5_000,
            2,
            true,
        );
        assert!(text.contains("dw_fleet_routing_revision 10\n"), "{text}");
        assert!(
            text.contains("dw_fleet_nodes{status=\"live\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_fleet_nodes{status=\"current\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_fleet_nodes{status=\"lagging\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_fleet_nodes{status=\"gone\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_fleet_node_lag_revisions{node=\"edge-2\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("dw_fleet_node_state{node=\"edge-3\",state=\"gone\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("dw_fleet_read_errors_total 2\n"), "{text}");
        assert!(text.contains("dw_fleet_up 1\n"), "{text}");
        // The planted id stays inside its label value: no line of its own.
        assert!(!text.lines().any(|line| line.starts_with("x 1")), "{text}");
        assert!(text.contains("node=\"evil\\\"}\\nx 1\""), "{text}");
        assert!(text.ends_with("# EOF\n"));
    }

    #[test]
    fn exports_at_most_max_nodes() {
        let nodes: Vec<NodeReport> = (0..MAX_NODES + 3)
            .map(|i| node(&format!("n{i}"), true, Some(1), "ok"))
            .collect();
        let text = render(
            &Reading {
                target: 1,
                nodes,
                ..Reading::default()
            },
            5_000,
            0,
            true,
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("dw_fleet_node_revision{"))
                .count(),
            MAX_NODES
        );
        assert!(
            text.contains("dw_fleet_nodes_not_exported 3\n"),
            "{}",
            &text[text.len() - 400..]
        );
        assert!(text.contains("dw_fleet_nodes{status=\"live\"} 20003\n"));
    }

    fn record_with(predicted: serde_json::Value) -> DrainRecord {
        let raw = serde_json::json!({
            "schema": 2, "origin": "fra-a", "reason": "probe failed", "source": "health",
            "by": "health@edge", "at": "2026-12-04T00:00:00Z",
            "regions": {}, "predicted": predicted,
        });
        DrainRecord::parse("fra-a", raw.to_string().as_bytes()).expect("a drain record")
    }

    #[test]
    fn exports_the_overloads_an_automatic_drain_recorded() {
        let record = record_with(serde_json::json!({
            "made": true, "source": "prometheus", "headroom": 0.8,
            "overloads": [
                {"origin": "fra-b", "predicted": 1200.0, "before": 700.0, "capacity": 1000.0, "limit": 800.0},
                {"origin": "ams\"-a", "predicted": 900.0, "before": 100.0, "capacity": 1000.0, "limit": 800.0},
                {"origin": "zero", "predicted": 5.0, "capacity": 0.0},
                {"origin": "no-load", "capacity": 10.0},
            ],
        }));
        let overloads = recorded_overloads("fra-a", &record);
        assert_eq!(overloads.len(), 2, "{overloads:?}");
        let text = render(
            &Reading {
                overloads,
                ..Reading::default()
            },
            0,
            0,
            true,
        );
        assert!(
            text.contains(
                "dw_fleet_predicted_overload_ratio{origin=\"fra-b\",drained=\"fra-a\"} 1.2\n"
            ),
            "{text}"
        );
        // Label values from etcd are escaped by the encoder.
        assert!(text.contains("origin=\"ams\\\"-a\""), "{text}");
        assert!(
            text.contains("dw_fleet_predicted_overloads_not_exported 0\n"),
            "{text}"
        );
    }

    #[test]
    fn a_drain_without_a_made_prediction_exports_nothing() {
        for predicted in [
            serde_json::json!({"made": false, "why": "no traffic source"}),
            serde_json::json!({"made": "yes", "overloads": [{"origin": "x", "predicted": 2.0, "capacity": 1.0}]}),
            serde_json::json!({"made": true}),
        ] {
            assert!(recorded_overloads("fra-a", &record_with(predicted)).is_empty());
        }
    }

    #[test]
    fn exports_at_most_max_overloads() {
        let overload = RecordedOverload {
            drained: "d".into(),
            origin: "o".into(),
            predicted: 2.0,
            capacity: 1.0,
        };
        let overloads: Vec<RecordedOverload> = (0..MAX_OVERLOADS + 2)
            .map(|i| RecordedOverload {
                origin: format!("o{i}"),
                ..overload.clone()
            })
            .collect();
        let text = render(
            &Reading {
                overloads,
                ..Reading::default()
            },
            0,
            0,
            true,
        );
        let series = text
            .lines()
            .filter(|l| l.starts_with("dw_fleet_predicted_overload_ratio{"))
            .count();
        assert_eq!(series, MAX_OVERLOADS);
        assert!(
            text.contains("dw_fleet_predicted_overloads_not_exported 2\n"),
            "{text}"
        );
    }
}
