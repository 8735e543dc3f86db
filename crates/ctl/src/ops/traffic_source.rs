//! Where a plan's load prediction gets its traffic ([`TrafficSource`], plain values the
//! command line is converted to): a file (`--traffic FILE`) or Prometheus (`--prometheus
//! URL` / `DWCTL_PROMETHEUS_URL`, over `--window`), per node, each node's rates checked
//! first ([`judge`]: `dw_capacity::check_plausibility`, `--node-ceiling`). What was read is
//! a [`TrafficRead`]: a missing source or an unreachable Prometheus is not an error (the
//! guard says why no prediction was made); a Prometheus that answered with traffic that
//! cannot be used (no answers in the window, an overflow rate that is not a number, no
//! node's rates plausible) is [`TrafficRead::Unusable`], which the guard refuses where
//! capacities are set (never waved through: issue 40). The nodes left out as implausible
//! are named in [`TrafficRead::Usable`]'s `left_out`. A file that was given and does not
//! parse is an error (exit 4): the operator asked for that prediction.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use dw_capacity::{
    AnswerKind, AnswerRow, Implausible, Limits, MAX_TRAFFIC_BYTES, NodeReading, Traffic,
    check_plausibility,
};

use crate::error::Error;
use crate::input::{Refused, read_regular_file};
use crate::ops::answer_counters::{
    ANSWERS, OVERFLOW, counting_at_window_start, node_peak_minutes, overflow_rate, prediction_rows,
    usable_rate,
};
use crate::ops::prometheus::{Prometheus, PrometheusSettings, Sample};
use crate::plan::guard::TrafficRead;

/// Where a load prediction reads its traffic.
#[derive(Debug, Clone)]
pub enum TrafficSource {
    /// Neither a traffic file nor a Prometheus URL was given.
    NotGiven,
    /// A traffic file (`--traffic FILE`).
    File(PathBuf),
    /// A Prometheus, over a window.
    Prometheus(PrometheusSource),
}

/// A Prometheus to read the answer counters from, the window of their rates, and the
/// most answers per second one node can give.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    /// How to reach it (its secrets read at each prediction).
    pub settings: PrometheusSettings,
    /// The window the rates are taken over.
    pub window: Window,
    /// `--node-ceiling`: a node above it (over the window, or over its busiest minute) is
    /// left out of the prediction and named.
    pub node_ceiling: f64,
}

/// What a prediction says without a source.
pub const NO_SOURCE: &str =
    "no traffic source: give --traffic FILE or --prometheus URL (DWCTL_PROMETHEUS_URL)";

/// The traffic to predict with and where it came from, or why there is none.
pub async fn read_traffic(source: &TrafficSource) -> Result<TrafficRead, Error> {
    let PrometheusSource {
        settings,
        window,
        node_ceiling,
    } = match source {
        TrafficSource::NotGiven => return Ok(TrafficRead::NotGiven(NO_SOURCE.into())),
        TrafficSource::File(path) => {
            let shown = path.display().to_string();
            let bytes = read_bounded(path).map_err(|error| Error::Io {
                path: shown.clone(),
                source: error,
            })?;
            let traffic = Traffic::parse(&bytes)
                .map_err(|error| Error::invalid("traffic", format!("{shown}: {error}")))?;
            return Ok(TrafficRead::Usable {
                traffic,
                source: format!("traffic file {shown}"),
                left_out: Vec::new(),
            });
        }
        TrafficSource::Prometheus(prometheus) => prometheus,
    };
    let options = match settings.options() {
        Ok(options) => options,
        Err(Error::Usage(_)) => return Ok(TrafficRead::NotGiven(NO_SOURCE.into())),
        Err(error) => {
            return Ok(TrafficRead::Unanswered(format!(
                "Prometheus cannot be asked: {error}"
            )));
        }
    };
    let prometheus = match Prometheus::new(&options) {
        Ok(prometheus) => prometheus,
        Err(error) => {
            return Ok(TrafficRead::Unanswered(format!(
                "Prometheus cannot be asked: {error}"
            )));
        }
    };
    let limits = Limits {
        node_ceiling: *node_ceiling,
        ..Limits::default()
    };
    let source = format!("Prometheus {} over {window}", prometheus.url());
    let mut answers = Vec::new();
    for promql in queries(window.0) {
        match prometheus.query(&promql).await {
            Ok(samples) => answers.push(samples),
            Err(error) => {
                return Ok(TrafficRead::Unanswered(format!(
                    "{source} did not answer: {error}"
                )));
            }
        }
    }
    let [rows, overflow, peaks, at_start] = <[Vec<Sample>; 4]>::try_from(answers)
        .map_err(|_| Error::Failed("the traffic queries miscounted".into()))?;
    Ok(judge(
        &source,
        Answers {
            rows: &rows,
            overflow: &overflow,
            peaks: &peaks,
            at_start: &at_start,
        },
        &limits,
        *window,
    ))
}

/// The PromQL a prediction reads over a window of `seconds`, in the order [`judge`] takes
/// the answers ([`Answers`]), all written by `ops::answer_counters`.
pub fn queries(seconds: u64) -> [String; 4] {
    [
        prediction_rows(seconds),
        overflow_rate(seconds),
        node_peak_minutes(seconds),
        counting_at_window_start(seconds),
    ]
}

/// Prometheus' answers to [`queries`].
#[derive(Debug, Clone, Copy)]
pub struct Answers<'a> {
    /// Each node's answers per second by geo, kind and step.
    pub rows: &'a [Sample],
    /// All answers past the nodes' label bounds, per second.
    pub overflow: &'a [Sample],
    /// Each node's busiest minute in the window (a counter that jumped shows there even
    /// when the window's average hides it).
    pub peaks: &'a [Sample],
    /// The nodes that had counters already when the window began (the others' rates read
    /// low).
    pub at_start: &'a [Sample],
}

/// The traffic of `answers`: every node checked ([`dw_capacity::check_plausibility`]), the
/// implausible ones left out and named, a note for nodes whose counters began within the
/// window. Unusable: no answer counters in the window, a rate that is not a number
/// (the overflow's, [`usable_rate`], or any node's), or no node left whose rates are
/// plausible.
pub fn judge(source: &str, answers: Answers<'_>, limits: &Limits, window: Window) -> TrafficRead {
    let Answers {
        rows,
        overflow,
        peaks,
        at_start,
    } = answers;
    let unusable = |why: String| {
        TrafficRead::Unusable(format!(
            "{source} answered traffic that cannot be used: {why}"
        ))
    };
    if rows.is_empty() {
        return TrafficRead::Unusable(format!(
            "{source} has no {ANSWERS}: it does not scrape the dw-agents' /metrics, or no \
             node counts"
        ));
    }
    // A rate that cannot be believed (NaN, infinite, negative) is said, never read as 0.
    let overflow = overflow.first().map_or(0.0, |sample| sample.value);
    let Some(overflow) = usable_rate(overflow) else {
        return unusable(format!("a rate of {overflow} for {OVERFLOW}"));
    };
    let mut nodes: BTreeMap<String, NodeReading> = BTreeMap::new();
    for sample in rows {
        let node = sample.label("node").to_owned();
        nodes.entry(node.clone()).or_default().rows.push(AnswerRow {
            geo: sample.label("geo").to_owned(),
            // A bucketed answer is placed by the assignment's shares (issue 41).
            kind: AnswerKind::from_label(sample.label("kind")),
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
    let checked = match check_plausibility(nodes, limits) {
        Ok(checked) => checked,
        Err(error) => return unusable(error.to_string()),
    };
    // A rate that is not a number (NaN, infinite, below 0: the same rule as `usable_rate`)
    // is data that cannot be used, not a node that answers implausibly much: issue 40's
    // rule refuses the change (where capacities are set), naming the node. Nodes above the
    // ceiling, with a jumped counter or far above the fleet are left out and named.
    if let Some(bad) = checked
        .left_out
        .iter()
        .find(|left| matches!(left.why, Implausible::NotANumber { .. }))
    {
        return unusable(format!("node {bad}"));
    }
    if !checked.usable() {
        let left: Vec<String> = checked.left_out.iter().map(ToString::to_string).collect();
        return unusable(format!(
            "no node's rates are plausible, every node is left out: {}",
            left.join("; ")
        ));
    }
    let notes = filling_notes(&checked.kept_nodes, at_start, window);
    match Traffic::from_rows(checked.kept, overflow) {
        Ok(traffic) => TrafficRead::Usable {
            traffic: traffic.with_notes(notes),
            source: source.to_owned(),
            left_out: checked.left_out,
        },
        Err(error) => unusable(error.to_string()),
    }
}

/// The note for the kept nodes whose counters began within the window (none when every
/// node counted at its start).
fn filling_notes(
    kept_nodes: &BTreeSet<String>,
    at_start: &[Sample],
    window: Window,
) -> Vec<String> {
    let started: BTreeSet<&str> = at_start.iter().map(|sample| sample.label("node")).collect();
    let filling: Vec<&String> = kept_nodes
        .iter()
        .filter(|node| !started.contains(node.as_str()))
        .collect();
    if filling.is_empty() {
        return Vec::new();
    }
    let whom = if filling.len() == kept_nodes.len() {
        "every node's counters".to_string()
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
    vec![format!(
        "the {window} window is still filling: Prometheus has {whom} only for part of \
         it (a new node, new counters or a Prometheus that just started), so the \
         rates read low until one whole window has passed"
    )]
}

/// The file's bytes, at most [`MAX_TRAFFIC_BYTES`] (more is refused); only a regular
/// file is read (a FIFO or a device is refused before it is read, as `apply` does).
fn read_bounded(path: &std::path::Path) -> std::io::Result<Vec<u8>> {
    read_regular_file(path, MAX_TRAFFIC_BYTES as u64).map_err(|refused| match refused {
        Refused::Io(error) => error,
        Refused::NotRegular(_) => std::io::Error::other("not a regular file"),
        Refused::TooLarge => std::io::Error::other(format!(
            "larger than {MAX_TRAFFIC_BYTES} bytes, the largest traffic file read"
        )),
    })
}

/// A rate window, in whole seconds (10 s to one day).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window(pub u64);

/// The shortest and the longest `--window`, in seconds.
pub const WINDOW_SECONDS: std::ops::RangeInclusive<u64> = 10..=86_400;

impl std::fmt::Display for Window {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.0;
        if s.is_multiple_of(3600) {
            write!(f, "{}h", s / 3600)
        } else if s.is_multiple_of(60) {
            write!(f, "{}m", s / 60)
        } else {
            write!(f, "{s}s")
        }
    }
}

/// `--window`: digits and one unit of s, m, h or d (as PromQL writes a range).
pub fn parse_window(text: &str) -> Result<Window, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let per_unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("{text:?}: a duration such as 30s, 5m or 1h")),
    };
    let seconds = number
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(per_unit))
        .ok_or_else(|| format!("{text:?}: a duration such as 30s, 5m or 1h"))?;
    if !WINDOW_SECONDS.contains(&seconds) {
        return Err(format!("{text:?}: between 10s and 1d"));
    }
    Ok(Window(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_promql_durations_within_bounds() {
        assert_eq!(parse_window("5m"), Ok(Window(300)));
        assert_eq!(parse_window("10s"), Ok(Window(10)));
        assert_eq!(parse_window("1d"), Ok(Window(86_400)));
        assert_eq!(parse_window("90s").unwrap().to_string(), "90s");
        assert_eq!(parse_window("120s").unwrap().to_string(), "2m");
        for bad in [
            "9s",
            "86401s",
            "2d",
            "5",
            "m",
            "5 m",
            "1.5m",
            "-5m",
            "99999999999999999999h",
        ] {
            assert!(parse_window(bad).is_err(), "{bad}");
        }
    }

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
                ("kind", "sticky"),
                ("step", "country"),
            ],
            rate,
        )
    }

    fn judged(rows: &[Sample], overflow: f64, at_start: &[&str]) -> TrafficRead {
        let at_start: Vec<Sample> = at_start
            .iter()
            .map(|node| sample(&[("node", node)], 1.0))
            .collect();
        judge(
            "Prometheus p over 5m",
            Answers {
                rows,
                overflow: &[sample(&[], overflow)],
                peaks: &[],
                at_start: &at_start,
            },
            &Limits::default(),
            Window(300),
        )
    }

    fn unusable(read: TrafficRead) -> String {
        match read {
            TrafficRead::Unusable(why) => why,
            other => panic!("not unusable: {other:?}"),
        }
    }

    #[test]
    fn a_bucketed_row_reaches_the_prediction_as_bucketed_traffic() {
        let read = judged(
            &[sample(
                &[
                    ("node", "n1"),
                    ("geo", "DE"),
                    ("kind", "bucket"),
                    ("step", "country"),
                ],
                4.0,
            )],
            0.0,
            &["n1"],
        );
        let (traffic, _) = read.usable().unwrap();
        assert_eq!(traffic.geos()["DE"].bucket, 4.0);
        assert_eq!(traffic.geos()["DE"].plain, 0.0);
    }

    #[test]
    fn an_overflow_rate_that_is_not_a_number_makes_the_traffic_unusable() {
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let why = unusable(judged(&[row("n1", 5.0)], bad, &["n1"]));
            assert!(
                why.contains("cannot be used: a rate of") && why.contains(OVERFLOW),
                "{why}"
            );
        }
        assert!(judged(&[row("n1", 5.0)], 0.0, &["n1"]).usable().is_ok());
    }

    #[test]
    fn no_answer_counters_make_the_traffic_unusable() {
        let why = unusable(judged(&[], 0.0, &[]));
        assert!(why.contains("has no dw_router_answers_total"), "{why}");
    }

    #[test]
    fn nodes_are_kept_left_out_and_noted() {
        let TrafficRead::Usable {
            traffic,
            source,
            left_out,
        } = judged(&[row("n1", 5.0), row("n2", 1e9)], 0.0, &["n1", "n2"])
        else {
            panic!("not usable");
        };
        assert_eq!(source, "Prometheus p over 5m");
        assert_eq!(left_out[0].node, "n2");
        assert_eq!(traffic.node_totals(), vec![("n1".to_owned(), 5.0)]);
        assert!(traffic.notes().is_empty());
        let read = judged(&[row("n1", 5.0), row("n2", 5.0)], 0.0, &["n1"]);
        let (traffic, _) = read.usable().unwrap();
        assert_eq!(traffic.notes().len(), 1);
        assert!(
            traffic.notes()[0].contains("the counters of \"n2\""),
            "{:?}",
            traffic.notes()
        );
        let why = unusable(judged(&[row("n1", 1e9)], 0.0, &["n1"]));
        assert!(
            why.contains("every node is left out: \"n1\": 1.00e9 answers/s"),
            "{why}"
        );
    }

    #[test]
    fn a_node_rate_that_is_not_a_number_makes_the_traffic_unusable_naming_the_node() {
        for bad in [f64::NAN, f64::INFINITY, -1.0] {
            let why = unusable(judged(
                &[row("n1", 5.0), row("n2", bad)],
                0.0,
                &["n1", "n2"],
            ));
            assert!(
                why.contains("cannot be used: node \"n2\": a rate of")
                    && why.contains("not a finite number >= 0"),
                "{why}"
            );
        }
    }

    #[test]
    fn the_queries_are_in_the_order_judge_takes_them() {
        let [rows, overflow, peaks, at_start] = queries(300);
        assert!(rows.starts_with("sum by (node, geo, kind, step)"), "{rows}");
        assert!(overflow.contains(OVERFLOW), "{overflow}");
        assert!(peaks.contains("max_over_time"), "{peaks}");
        assert!(at_start.ends_with("offset 300s)"), "{at_start}");
    }
}
