//! `traffic`'s reads: the answer counters' rates from Prometheus (the queries it sends,
//! each rate checked usable), then the routing state and the origins' listing from etcd,
//! for the report (`crate::plan::traffic_report`).

use crate::context::Context;
use crate::error::Error;
use crate::ops::answer_counters::{answers_rate, overflow_rate, usable_rate};
use crate::ops::commit::{State, read_state};
use crate::ops::origin::{OriginListing, list_origins};
use crate::ops::prometheus::{Prometheus, promql_string};
use crate::ops::traffic_source::Window;
use crate::plan::traffic_report::Readings;

/// What `traffic` asks Prometheus (its flags, as plain values).
#[derive(Debug, Clone)]
pub struct TrafficQuery {
    /// Only the answers to this geo (`--geo`).
    pub geo: Option<String>,
    /// The rate window.
    pub window: Window,
    /// How many geos, keys and nodes per origin (`--top`).
    pub top: u16,
    /// Also the top nodes per origin (`--by-node`).
    pub by_node: bool,
}

/// `traffic`'s readings: Prometheus' first (its failures come before etcd is dialled),
/// then etcd's.
pub async fn read(
    context: &Context,
    prometheus: &Prometheus,
    query: &TrafficQuery,
) -> Result<(Readings, State, OriginListing), Error> {
    let readings = read_prometheus(prometheus, query).await?;
    let (state, listing) = read_etcd(context).await?;
    Ok((readings, state, listing))
}

/// The PromQL `dwctl traffic` sends, in [`Readings`] order (`nodes` only with
/// `--by-node`).
pub fn queries(query: &TrafficQuery) -> Vec<(&'static str, String)> {
    let selector = match &query.geo {
        Some(geo) => format!("{{geo={}}}", promql_string(geo)),
        None => String::new(),
    };
    let rate = answers_rate(&selector, query.window.0);
    let top = query.top;
    let mut queries = vec![
        ("total", format!("sum({rate})")),
        ("overflow", overflow_rate(query.window.0)),
        ("origins", format!("sum by (origin) ({rate})")),
        (
            "geos",
            format!("topk by (origin) ({top}, sum by (origin, geo) ({rate}))"),
        ),
        (
            "keys",
            format!("topk by (origin) ({top}, sum by (origin, key) ({rate}))"),
        ),
        ("steps", format!("sum by (origin, step) ({rate})")),
        ("regions", format!("sum by (key) ({rate})")),
    ];
    if query.by_node {
        queries.push((
            "nodes",
            format!("topk by (origin) ({top}, sum by (origin, node) ({rate}))"),
        ));
    }
    queries
}

async fn read_prometheus(prometheus: &Prometheus, query: &TrafficQuery) -> Result<Readings, Error> {
    let mut readings = Readings::default();
    for (name, promql) in queries(query) {
        let samples = prometheus.query(&promql).await?;
        // A rate that cannot be believed (NaN, infinite, negative) is refused, never shown
        // as 0: every value in [`Readings`] is usable.
        if let Some(sample) = samples
            .iter()
            .find(|sample| usable_rate(sample.value).is_none())
        {
            return Err(Error::Failed(format!(
                "Prometheus {} answered a rate that cannot be used ({}) for {promql} {:?}",
                prometheus.url(),
                sample.value,
                sample.labels
            )));
        }
        let slot = match name {
            "total" => &mut readings.total,
            "overflow" => &mut readings.overflow,
            "origins" => &mut readings.origins,
            "geos" => &mut readings.geos,
            "keys" => &mut readings.keys,
            "steps" => &mut readings.steps,
            "regions" => &mut readings.regions,
            _ => &mut readings.nodes,
        };
        *slot = samples;
    }
    Ok(readings)
}

/// The routing state and the origins as etcd knows them.
pub async fn read_etcd(context: &Context) -> Result<(State, OriginListing), Error> {
    let mut client = context.etcd.connect().await?;
    let state = read_state(&mut client, &context.layout).await?;
    let listing = list_origins(&mut client, &context.layout).await?;
    Ok((state, listing))
}
