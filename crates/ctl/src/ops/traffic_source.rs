//! Where a plan's load prediction gets its traffic: a file (`--traffic FILE`) or
//! Prometheus (`--prometheus URL` / `DWCTL_PROMETHEUS_URL`, over `--window`), per node,
//! each node's rates checked first ([`judge`]). [`read_traffic_classified`] says what the
//! reading gave ([`TrafficReading`]): traffic to predict with, no source, a source that
//! did not answer, or a source that answered with data the predictor cannot use (which
//! must never wave a change through: issue 40). A file that was given and does not parse
//! is an error (exit 4): the operator asked for that prediction.

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

/// What reading the traffic gave. Each case but `Usable` holds why there is no traffic.
#[derive(Debug, Clone, PartialEq)]
pub enum TrafficReading {
    /// Traffic to predict with (its nodes left out and notes in it), and its source.
    Usable(Traffic, String),
    /// No source configured (no `--traffic`, no Prometheus URL): nothing to judge with.
    NotConfigured(String),
    /// A configured Prometheus that cannot be asked (its options) or did not answer.
    Unreachable(String),
    /// A configured source that answered with data the predictor cannot use: no node's
    /// rates plausible, no answer counters in the window, an overflow rate that is not a
    /// number. A change must then be refused, never waved through.
    Unusable(String),
}

impl TrafficReading {
    /// The traffic and its source, or why there is none (the older shape).
    pub fn into_result(self) -> Result<(Traffic, String), String> {
        match self {
            TrafficReading::Usable(traffic, source) => Ok((traffic, source)),
            TrafficReading::NotConfigured(why)
            | TrafficReading::Unreachable(why)
            | TrafficReading::Unusable(why) => Err(why),
        }
    }
}

/// The traffic to predict with and where it came from, or why there is none
/// ([`read_traffic_classified`] in the older shape).
pub async fn read_traffic(
    args: &TrafficSourceArgs,
) -> Result<Result<(Traffic, String), String>, Error> {
    Ok(read_traffic_classified(args).await?.into_result())
}

/// Reads the traffic `args` name, and says what it gave.
pub async fn read_traffic_classified(args: &TrafficSourceArgs) -> Result<TrafficReading, Error> {
    if let Some(path) = &args.traffic_file {
        let shown = path.display().to_string();
        let bytes = read_bounded(path).map_err(|error| Error::Io {
            path: shown.clone(),
            source: error,
        })?;
        let traffic = Traffic::parse(&bytes)
            .map_err(|error| Error::invalid("traffic", format!("{shown}: {error}")))?;
        return Ok(TrafficReading::Usable(
            traffic,
            format!("traffic file {shown}"),
        ));
    }
    let options = match args.prometheus.options() {
        Ok(options) => options,
        Err(Error::Usage(_)) => {
            return Ok(TrafficReading::NotConfigured(
                "no traffic source: give --traffic FILE or --prometheus URL \
                 (DWCTL_PROMETHEUS_URL)"
                    .into(),
            ));
        }
        Err(error) => {
            return Ok(TrafficReading::Unreachable(format!(
                "Prometheus cannot be asked: {error}"
            )));
        }
    };
    let prometheus = match Prometheus::new(&options) {
        Ok(prometheus) => prometheus,
        Err(error) => {
            return Ok(TrafficReading::Unreachable(format!(
                "Prometheus cannot be asked: {error}"
            )));
        }
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
            Err(error) => return Ok(TrafficReading::Unreachable(unreachable(error))),
        }
    }
    let [rows, overflow, peaks, at_start] = <[Vec<Sample>; 4]>::try_from(answers)
        .map_err(|_| Error::Failed("the traffic queries miscounted".into()))?;
    if rows.is_empty() {
        return Ok(TrafficReading::Unusable(format!(
            "{source} has no {ANSWERS}: it does not scrape the dw-agents' /metrics, or no \
             node counts"
        )));
    }
    Ok(
        match judge(
            &source,
            &rows,
            &overflow,
            &peaks,
            &at_start,
            &limits,
            args.window.to_string(),
        ) {
            Ok((traffic, source)) => TrafficReading::Usable(traffic, source),
            Err(why) => TrafficReading::Unusable(why),
        },
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(labels: &[(&str, &str)], value: f64) -> Sample {
        Sample {
            labels: labels
                .iter()
                .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
                .collect(),
            value,
        }
    }

    fn row(node: &str, rate: f64) -> Sample {
        sample(
            &[
                ("node", node),
                ("geo", "DE"),
                ("sticky", "true"),
                ("step", "country"),
            ],
            rate,
        )
    }

    fn judged(
        rows: &[Sample],
        overflow: f64,
        at_start: &[&str],
    ) -> Result<(Traffic, String), String> {
        let at_start: Vec<Sample> = at_start
            .iter()
            .map(|node| sample(&[("node", node)], 1.0))
            .collect();
        judge(
            "Prometheus p over 5m",
            rows,
            &[sample(&[], overflow)],
            &[],
            &at_start,
            &Limits::default(),
            "5m".into(),
        )
    }

    #[test]
    fn an_overflow_rate_that_is_not_a_number_makes_the_traffic_unusable() {
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let why = judged(&[row("n1", 5.0)], bad, &["n1"]).unwrap_err();
            assert!(
                why.contains("cannot be used: the overflow rate is"),
                "{why}"
            );
        }
        assert!(judged(&[row("n1", 5.0)], 0.0, &["n1"]).is_ok());
    }

    #[test]
    fn nodes_are_kept_left_out_and_noted() {
        let (traffic, source) =
            judged(&[row("n1", 5.0), row("n2", 1e9)], 0.0, &["n1", "n2"]).unwrap();
        assert_eq!(source, "Prometheus p over 5m");
        assert_eq!(traffic.left_out()[0].node, "n2");
        assert_eq!(traffic.node_totals(), vec![("n1".to_owned(), 5.0)]);
        assert!(traffic.notes().is_empty());
        let (traffic, _) = judged(&[row("n1", 5.0), row("n2", 5.0)], 0.0, &["n1"]).unwrap();
        assert_eq!(traffic.notes().len(), 1);
        assert!(
            traffic.notes()[0].contains("the counters of \"n2\""),
            "{:?}",
            traffic.notes()
        );
        let why = judged(&[row("n1", f64::NAN)], 0.0, &["n1"]).unwrap_err();
        assert!(
            why.contains("every node is left out: \"n1\": a rate of NaN"),
            "{why}"
        );
    }

    #[test]
    fn a_reading_keeps_its_kind() {
        let unusable = TrafficReading::Unusable("why".into());
        assert_eq!(unusable.into_result().unwrap_err(), "why");
        assert!(queries(300)[0].starts_with("sum by (node, geo, sticky, step)"));
        assert!(queries(300)[3].ends_with("offset 300s)"));
    }
}
