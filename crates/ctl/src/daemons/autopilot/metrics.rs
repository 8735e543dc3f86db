//! The autopilot's `/metrics` (`--metrics ADDR`), served by `dw_http_guard` as the fleet
//! exporter's: decisions by kind, holds by reason, overload-seconds per origin (the
//! evaluation interval added for each evaluation an origin was measured over target),
//! whether this instance leads, whether its rate source was usable, whether the fleet is
//! over target, and when it last evaluated. Series per origin are capped at
//! [`MAX_ORIGIN_SERIES`].

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::daemons::metrics_port::{self, CONTENT_TYPE};
use crate::error::Error;

/// The most origins given an overload-seconds series.
pub const MAX_ORIGIN_SERIES: usize = 10_000;

type Labels = Vec<(String, String)>;

/// The series, shared by the loop (which updates them) and the server (which renders).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    /// `dwctl_autopilot_decisions_total{kind}`.
    pub decisions: Family<Labels, Counter>,
    /// `dwctl_autopilot_holds_total{reason}`.
    pub holds: Family<Labels, Counter>,
    /// `dwctl_autopilot_overload_seconds_total{origin}`.
    pub overload_seconds: Family<Labels, Counter<f64, AtomicU64>>,
    /// `dwctl_autopilot_origins_over_target`.
    pub over_target: Gauge,
    /// `dwctl_autopilot_leader` (1 while this instance leads; a dry run never leads).
    pub leader: Gauge,
    /// `dwctl_autopilot_source_usable` (0: fail static).
    pub source_usable: Gauge,
    /// `dwctl_autopilot_fleet_over_target` (1: a relief found no receiver within target).
    pub fleet_over_target: Gauge,
    /// `dwctl_autopilot_last_evaluation_timestamp_seconds`.
    pub last_evaluation: Gauge<f64, AtomicU64>,
    /// `dwctl_autopilot_dry_run`.
    pub dry_run: Gauge<i64, AtomicI64>,
    /// `dwctl_autopilot_origin_load{origin}`: measured load at the last evaluation.
    pub origin_load: Family<Labels, Gauge<f64, AtomicU64>>,
    /// `dwctl_autopilot_origin_target{origin}`: headroom × capacity.
    pub origin_target: Family<Labels, Gauge<f64, AtomicU64>>,
    /// `dwctl_autopilot_origin_capacity{origin}`.
    pub origin_capacity: Family<Labels, Gauge<f64, AtomicU64>>,
    origins_seen: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
}

impl Metrics {
    /// Every series registered, at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::default();
        let decisions = Family::<Labels, Counter>::default();
        let holds = Family::<Labels, Counter>::default();
        let overload_seconds = Family::<Labels, Counter<f64, AtomicU64>>::default();
        let over_target = Gauge::default();
        let leader = Gauge::default();
        let source_usable = Gauge::default();
        let fleet_over_target = Gauge::default();
        let last_evaluation = Gauge::<f64, AtomicU64>::default();
        let dry_run = Gauge::<i64, AtomicI64>::default();
        let origin_load = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let origin_target = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        let origin_capacity = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "dwctl_autopilot_origin_load",
            "Each origin's measured load at the last evaluation, answers per second",
            origin_load.clone(),
        );
        registry.register(
            "dwctl_autopilot_origin_target",
            "Each origin's target (headroom x capacity), answers per second",
            origin_target.clone(),
        );
        registry.register(
            "dwctl_autopilot_origin_capacity",
            "Each origin's capacity, answers per second",
            origin_capacity.clone(),
        );
        registry.register(
            "dwctl_autopilot_decisions",
            "Actions decided, by kind (relieve, relieve_at_ceiling, give_back_step, give_back_all)",
            decisions.clone(),
        );
        registry.register(
            "dwctl_autopilot_holds",
            "Origins held in an evaluation, by reason",
            holds.clone(),
        );
        registry.register(
            "dwctl_autopilot_overload_seconds",
            "Seconds each origin was measured above its target",
            overload_seconds.clone(),
        );
        registry.register(
            "dwctl_autopilot_origins_over_target",
            "Origins measured above target at the last evaluation",
            over_target.clone(),
        );
        registry.register(
            "dwctl_autopilot_leader",
            "1 while this instance holds the leader key",
            leader.clone(),
        );
        registry.register(
            "dwctl_autopilot_source_usable",
            "1 when the last evaluation's rate source was usable (0: fail static)",
            source_usable.clone(),
        );
        registry.register(
            "dwctl_autopilot_fleet_over_target",
            "1 when the last relief found no receiver within its target",
            fleet_over_target.clone(),
        );
        registry.register(
            "dwctl_autopilot_last_evaluation_timestamp_seconds",
            "When this instance last evaluated (Unix seconds)",
            last_evaluation.clone(),
        );
        registry.register(
            "dwctl_autopilot_dry_run",
            "1 when this instance runs with --dry-run",
            dry_run.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            decisions,
            holds,
            overload_seconds,
            over_target,
            leader,
            source_usable,
            fleet_over_target,
            last_evaluation,
            dry_run,
            origin_load,
            origin_target,
            origin_capacity,
            origins_seen: Arc::default(),
        }
    }

    /// Whether `origin` may have series (the first [`MAX_ORIGIN_SERIES`] origins seen).
    fn admitted(&self, origin: &str) -> bool {
        let Ok(mut seen) = self.origins_seen.lock() else {
            return false;
        };
        if !seen.contains(origin) {
            if seen.len() >= MAX_ORIGIN_SERIES {
                return false;
            }
            seen.insert(origin.to_owned());
        }
        true
    }

    /// Adds `seconds` to `origin`'s overload-seconds (within [`MAX_ORIGIN_SERIES`]).
    pub fn overloaded(&self, origin: &str, seconds: f64) {
        if self.admitted(origin) {
            self.overload_seconds
                .get_or_create(&Metrics::label("origin", origin))
                .inc_by(seconds);
        }
    }

    /// `origin`'s measured load, target and capacity (within [`MAX_ORIGIN_SERIES`]).
    pub fn measured(&self, origin: &str, load: f64, target: f64, capacity: f64) {
        if self.admitted(origin) {
            let labels = Metrics::label("origin", origin);
            self.origin_load.get_or_create(&labels).set(load);
            self.origin_target.get_or_create(&labels).set(target);
            self.origin_capacity.get_or_create(&labels).set(capacity);
        }
    }

    /// One label's series of a family.
    pub fn label(name: &str, value: &str) -> Labels {
        vec![(name.to_owned(), value.to_owned())]
    }

    fn render(&self) -> String {
        let mut text = String::new();
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

/// Listens on `addr` and serves `/metrics` until the task is dropped; the address bound.
pub async fn serve(addr: SocketAddr, metrics: Metrics) -> Result<SocketAddr, Error> {
    let (bound, _task) = metrics_port::listen(addr, "--metrics", move |request| {
        let metrics = metrics.clone();
        async move {
            match answer(&metrics, request) {
                Ok(response) => response,
                Err(never) => match never {},
            }
        }
    })
    .await?;
    Ok(bound)
}

fn answer(
    metrics: &Metrics,
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
        (&Method::GET, "/metrics") => response(StatusCode::OK, CONTENT_TYPE, metrics.render()),
        (&Method::GET, _) => response(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: the autopilot's metrics are at /metrics\n".into(),
        ),
        _ => response(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET\n".into(),
        ),
    })
}
