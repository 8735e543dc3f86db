//! Where a plan's load prediction gets its traffic: a file (`--traffic FILE`) or
//! Prometheus (`--prometheus URL` / `DWCTL_PROMETHEUS_URL`, over `--window`). A missing
//! source or an unreachable Prometheus is not an error: the change goes ahead as without
//! capacities, and says why no prediction was made. A file that was given and does not
//! parse is an error (exit 4): the operator asked for that prediction.

use dw_capacity::{AnswerRow, MAX_TRAFFIC_BYTES, Traffic};

use crate::cli::TrafficSourceArgs;
use crate::error::Error;
use crate::input::{Refused, read_regular_file};
use crate::ops::answer_counters::{ANSWERS, OVERFLOW, overflow_rate, prediction_rows, usable_rate};
use crate::ops::prometheus::Prometheus;

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
    let rows = prediction_rows(args.window.0);
    let overflow = overflow_rate(args.window.0);
    let source = format!("Prometheus {} over {}", prometheus.url(), args.window);
    let unreachable = |error: Error| format!("{source} did not answer: {error}");
    let samples = match prometheus.query(&rows).await {
        Ok(samples) => samples,
        Err(error) => return Ok(Err(unreachable(error))),
    };
    let overflow = match prometheus.query(&overflow).await {
        Ok(samples) => samples.first().map_or(0.0, |sample| sample.value),
        Err(error) => return Ok(Err(unreachable(error))),
    };
    // A rate that cannot be believed (NaN, infinite, negative) makes the traffic unusable:
    // it is said, never read as 0.
    let cannot_be_used = |what: String, value: f64| {
        format!("{source} answered traffic that cannot be used: a rate of {value} {what}")
    };
    let Some(overflow) = usable_rate(overflow) else {
        return Ok(Err(cannot_be_used(format!("for {OVERFLOW}"), overflow)));
    };
    let mut rows: Vec<AnswerRow> = Vec::with_capacity(samples.len());
    for sample in &samples {
        let Some(rate) = usable_rate(sample.value) else {
            return Ok(Err(cannot_be_used(
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
        return Ok(Err(format!(
            "{source} has no {ANSWERS}: it does not scrape the dw-agents' /metrics, or no \
             node counts"
        )));
    }
    match Traffic::from_rows(rows, overflow) {
        Ok(traffic) => Ok(Ok((traffic, source))),
        Err(error) => Ok(Err(format!(
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
