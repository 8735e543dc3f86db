//! Where a plan's load prediction gets its traffic: a file (`--traffic FILE`) or
//! Prometheus (`--prometheus URL` / `DWCTL_PROMETHEUS_URL`, over `--window`). A missing
//! source or an unreachable Prometheus is not an error: the change goes ahead as without
//! capacities, and says why no prediction was made. A file that was given and does not
//! parse is an error (exit 4): the operator asked for that prediction.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

use dw_capacity::{AnswerRow, Limits, MAX_TRAFFIC_BYTES, NodeReading, Traffic, check_plausibility};

use crate::cli::TrafficSourceArgs;
use crate::error::Error;
use crate::ops::prometheus::{Prometheus, Sample};

/// The answer counter every node serves.
const ANSWERS: &str = "dw_router_answers_total";
/// Answers past the nodes' label bounds.
const OVERFLOW: &str = "dw_router_answers_overflow_total";

/// The traffic to predict with and where it came from, or why there is none.
pub async fn read_traffic(
    args: &TrafficSourceArgs,
) -> Result<Result<(Traffic, String), String>, Error> {
    if let Some(path) = &args.traffic_file {
        let shown = path.display().to_string();
        let bytes = read_bounded(path).map_err(|error| Error::Io {
            path: shown.clone(),
            source: error,
        })?;
        let traffic = Traffic::parse(&bytes)
            .map_err(|error| Error::invalid("traffic", format!("{shown}: {error}")))?;
        return Ok(Ok((traffic, format!("traffic file {shown}"))));
    }
    let options = match args.prometheus.options() {
        Ok(options) => options,
        Err(Error::Usage(_)) => {
            return Ok(Err(
                "no traffic source: give --traffic FILE or --prometheus URL \
                 (DWCTL_PROMETHEUS_URL)"
                    .into(),
            ));
        }
        Err(error) => return Ok(Err(format!("Prometheus cannot be asked: {error}"))),
    };
    let prometheus = match Prometheus::new(&options) {
        Ok(prometheus) => prometheus,
        Err(error) => return Ok(Err(format!("Prometheus cannot be asked: {error}"))),
    };
    let limits = Limits {
        node_ceiling: args.node_ceiling,
        ..Limits::default()
    };
    let source = format!("Prometheus {} over {}", prometheus.url(), args.window);
    let unreachable = |error: Error| format!("{source} did not answer: {error}");
    let mut answers = Vec::new();
    for promql in queries(args.window.0) {
        match prometheus.query(&promql).await {
            Ok(samples) => answers.push(samples),
            Err(error) => return Ok(Err(unreachable(error))),
        }
    }
    let [rows, overflow, peaks, at_start] = <[Vec<Sample>; 4]>::try_from(answers)
        .map_err(|_| Error::Failed("the traffic queries miscounted".into()))?;
    if rows.is_empty() {
        return Ok(Err(format!(
            "{source} has no {ANSWERS}: it does not scrape the dw-agents' /metrics, or no \
             node counts"
        )));
    }
    Ok(judge(
        &source,
        &rows,
        &overflow,
        &peaks,
        &at_start,
        &limits,
        args.window.to_string(),
    ))
}

/// The PromQL a prediction reads over a window of `seconds`, in the order [`judge`] takes
/// the answers: each node's rows, the overflow, each node's busiest minute (a counter that
/// jumped shows there even when the window's average hides it), and the nodes that had
/// counters already when the window began (the others' rates read low).
pub fn queries(seconds: u64) -> [String; 4] {
    let window = format!("{seconds}s");
    [
        format!("sum by (node, geo, sticky, step) (rate({ANSWERS}[{window}]))"),
        format!("sum(rate({OVERFLOW}[{window}]))"),
        format!(
            "max by (node) (max_over_time((sum by (node) (rate({ANSWERS}[1m])))[{window}:30s]))"
        ),
        format!("count by (node) ({ANSWERS} offset {window})"),
    ]
}

/// The traffic of the answers to [`queries`]: every node checked
/// ([`dw_capacity::check_plausibility`]), the implausible ones left out and named, a note
/// for nodes whose counters began within the window. `Err`: nothing usable, and why (a
/// source that answered with data the predictor cannot use).
pub fn judge(
    source: &str,
    rows: &[Sample],
    overflow: &[Sample],
    peaks: &[Sample],
    at_start: &[Sample],
    limits: &Limits,
    window: String,
) -> Result<(Traffic, String), String> {
    let unusable = |why: String| format!("{source} answered traffic that cannot be used: {why}");
    let overflow = overflow.first().map_or(0.0, |sample| sample.value);
    if !(overflow.is_finite() && overflow >= 0.0) {
        return Err(unusable(format!(
            "the overflow rate is {overflow}, not a finite number >= 0"
        )));
    }
    let mut nodes: BTreeMap<String, NodeReading> = BTreeMap::new();
    for sample in rows {
        let node = sample.label("node").to_owned();
        nodes.entry(node.clone()).or_default().rows.push(AnswerRow {
            geo: sample.label("geo").to_owned(),
            sticky: sample.label("sticky") == "true",
            node: Some(node),
            fail_open: sample.label("step") == "fail_open",
            rate: sample.value,
        });
    }
    for sample in peaks {
        if let Some(reading) = nodes.get_mut(sample.label("node")) {
            reading.peak = Some(sample.value);
        }
    }
    let checked = check_plausibility(nodes, limits).map_err(|error| unusable(error.to_string()))?;
    let left: Vec<String> = checked.left_out.iter().map(ToString::to_string).collect();
    if !checked.usable() {
        return Err(unusable(format!(
            "no node's rates are plausible, every node is left out: {}",
            left.join("; ")
        )));
    }
    let started: BTreeSet<&str> = at_start.iter().map(|sample| sample.label("node")).collect();
    let filling: Vec<&String> = checked
        .kept_nodes
        .iter()
        .filter(|node| !started.contains(node.as_str()))
        .collect();
    let mut notes = Vec::new();
    if !filling.is_empty() {
        let whom = if filling.len() == checked.kept_nodes.len() {
            "every node's".to_string()
        } else {
            format!(
                "the counters of {}",
                filling
                    .iter()
                    .map(|node| format!("{:?}", dw_routing::quoted(node)))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        notes.push(format!(
            "the {window} window is still filling: Prometheus has {whom} counters only for \
             part of it (a new node, new counters or a Prometheus that just started), so \
             the rates read low until one whole window has passed"
        ));
    }
    match Traffic::from_rows(checked.kept, overflow) {
        Ok(traffic) => Ok((
            traffic.with_caveats(checked.left_out, notes),
            source.to_owned(),
        )),
        Err(error) => Err(unusable(error.to_string())),
    }
}

/// The file's bytes, at most [`MAX_TRAFFIC_BYTES`] (more is refused); only a regular
/// file is read (a FIFO or a device is refused before it is read, as `apply` does).
fn read_bounded(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    // Checked before opening too: opening a FIFO for reading would wait for a writer.
    if !std::fs::metadata(path)?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    file.take(MAX_TRAFFIC_BYTES as u64 + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() > MAX_TRAFFIC_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_TRAFFIC_BYTES} bytes, the largest traffic file read"
        )));
    }
    Ok(bytes)
}
