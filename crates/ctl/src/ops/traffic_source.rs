//! Where a plan's load prediction gets its traffic ([`TrafficSource`], plain values the
//! command line is converted to): a file (`--traffic FILE`) or Prometheus (`--prometheus
//! URL` / `DWCTL_PROMETHEUS_URL`, over `--window`). What was read is a [`TrafficRead`]: a
//! missing source or an unreachable Prometheus is not an error (the guard says why no
//! prediction was made); a Prometheus that answered with traffic that cannot be used (no
//! answers in the window, a rate the model refuses) is [`TrafficRead::Unusable`], which the
//! guard refuses where capacities are set. A file that was given and does not parse is an
//! error (exit 4): the operator asked for that prediction.

use std::path::PathBuf;

use dw_capacity::{AnswerRow, MAX_TRAFFIC_BYTES, Traffic};

use crate::error::Error;
use crate::input::{Refused, read_regular_file};
use crate::ops::answer_counters::{ANSWERS, OVERFLOW, overflow_rate, prediction_rows, usable_rate};
use crate::ops::prometheus::{Prometheus, PrometheusSettings};
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

/// A Prometheus to read the answer counters from, and the window of their rates.
#[derive(Debug, Clone)]
pub struct PrometheusSource {
    /// How to reach it (its secrets read at each prediction).
    pub settings: PrometheusSettings,
    /// The window the rates are taken over.
    pub window: Window,
}

/// What a prediction says without a source.
pub const NO_SOURCE: &str =
    "no traffic source: give --traffic FILE or --prometheus URL (DWCTL_PROMETHEUS_URL)";

/// The traffic to predict with and where it came from, or why there is none.
pub async fn read_traffic(source: &TrafficSource) -> Result<TrafficRead, Error> {
    let PrometheusSource { settings, window } = match source {
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
    let rows = prediction_rows(window.0);
    let overflow = overflow_rate(window.0);
    let source = format!("Prometheus {} over {window}", prometheus.url());
    let unreachable =
        |error: Error| TrafficRead::Unanswered(format!("{source} did not answer: {error}"));
    let samples = match prometheus.query(&rows).await {
        Ok(samples) => samples,
        Err(error) => return Ok(unreachable(error)),
    };
    let overflow = match prometheus.query(&overflow).await {
        Ok(samples) => samples.first().map_or(0.0, |sample| sample.value),
        Err(error) => return Ok(unreachable(error)),
    };
    // A rate that cannot be believed (NaN, infinite, negative) makes the traffic unusable:
    // it is said, never read as 0.
    let cannot_be_used = |what: String, value: f64| {
        format!("{source} answered traffic that cannot be used: a rate of {value} {what}")
    };
    let Some(overflow) = usable_rate(overflow) else {
        return Ok(TrafficRead::Unusable(cannot_be_used(
            format!("for {OVERFLOW}"),
            overflow,
        )));
    };
    let mut rows: Vec<AnswerRow> = Vec::with_capacity(samples.len());
    for sample in &samples {
        let Some(rate) = usable_rate(sample.value) else {
            return Ok(TrafficRead::Unusable(cannot_be_used(
                format!(
                    "for geo {:?} (sticky {:?}, step {:?})",
                    sample.label("geo"),
                    sample.label("sticky"),
                    sample.label("step")
                ),
                sample.value,
            )));
        };
        rows.push(AnswerRow {
            geo: sample.label("geo").to_owned(),
            sticky: sample.label("sticky") == "true",
            node: None,
            fail_open: sample.label("step") == "fail_open",
            rate,
        });
    }
    if rows.is_empty() {
        return Ok(TrafficRead::Unusable(format!(
            "{source} has no {ANSWERS}: it does not scrape the dw-agents' /metrics, or no \
             node counts"
        )));
    }
    match Traffic::from_rows(rows, overflow) {
        Ok(traffic) => Ok(TrafficRead::Usable {
            traffic,
            source,
            left_out: Vec::new(),
        }),
        Err(error) => Ok(TrafficRead::Unusable(format!(
            "{source} answered traffic that cannot be used: {error}"
        ))),
    }
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
}
