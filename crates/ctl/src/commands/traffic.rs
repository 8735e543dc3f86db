//! `traffic [--window 5m] [--origin ID] [--geo G] [--by-node]`: where the answers go, per
//! origin, from the counters every node serves (`dw_router_answers_total`, read through
//! Prometheus' HTTP API, [`crate::prometheus`]), beside what etcd says of each origin
//! (its regions and weights, registered, drained, staged). One place to answer "why
//! does this origin get no traffic?".
//!
//! [`run`] reads through `ops::traffic` (Prometheus first: its failures exit 1 before etcd
//! is dialled; then etcd at one revision); the report is a pure function of both readings
//! (`crate::plan::traffic_report`), and [`describe`] words it, every value from Prometheus
//! or etcd escaped.

use serde_json::json;

use crate::cli::TrafficArgs;
use crate::context::Context;
use crate::error::Error;
use crate::ops::answer_counters::{ANSWERS, OVERFLOW};
use crate::ops::prometheus::Prometheus;
use crate::ops::traffic::{TrafficQuery, read};
use crate::output::{Outcome, Shown};
use crate::plan::autopilot::status::{AutopilotView, header_line, origin_line};
use crate::plan::capacity::{DEFAULT_HEADROOM, number_json, percent};
use crate::plan::traffic_report::{Ranked, TrafficReport, report};

/// The most regions the text output names per origin (JSON names them all).
pub const SHOWN_REGIONS: usize = 8;

/// Runs `dwctl traffic`.
pub async fn run(context: &Context, args: TrafficArgs) -> Result<Outcome, Error> {
    let prometheus = Prometheus::new(&args.prometheus.options()?)?;
    let (readings, state, listing) = read(context, &prometheus, &query_of(&args)).await?;
    let report = report(&readings, &state, &listing, &args.origins);
    let autopilot = crate::ops::autopilot_status::read(context).await;
    let source = Source {
        prometheus: prometheus.url().to_string(),
        window: args.window.to_string(),
        geo: args.geo.clone(),
    };
    let text = describe(&report, &source, &autopilot);
    let mut json = serde_json::to_value(&report)
        .map_err(|error| Error::Failed(format!("cannot encode the report: {error}")))?;
    json["prometheus"] = json!(source.prometheus);
    json["window"] = json!(source.window);
    json["geo"] = json!(source.geo);
    json["autopilot"] = json!(autopilot);
    Ok(Outcome { text, json })
}

/// What the flags ask Prometheus.
fn query_of(args: &TrafficArgs) -> TrafficQuery {
    TrafficQuery {
        geo: args.geo.clone(),
        window: args.window,
        top: args.top,
        by_node: args.by_node,
    }
}

/// Where the report's answers come from, for its first line.
pub struct Source {
    /// Prometheus' URL.
    pub prometheus: String,
    /// The rate window (`5m`).
    pub window: String,
    /// `--geo`, when given.
    pub geo: Option<String>,
}

fn rate_text(rate: f64) -> String {
    if rate >= 100.0 {
        format!("{rate:.0}/s")
    } else if rate >= 1.0 {
        format!("{rate:.1}/s")
    } else {
        format!("{rate:.3}/s")
    }
}

fn list_text(rows: &Ranked) -> String {
    rows.rows
        .iter()
        .map(|(name, rate)| format!("{} {}", Shown(name), rate_text(*rate)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report as text, with what the autopilot holds (a line for the fleet, one under each
/// origin it holds anything on), every value from Prometheus or etcd escaped.
pub fn describe(report: &TrafficReport, source: &Source, autopilot: &AutopilotView) -> String {
    let mut out = String::new();
    let window = &source.window;
    let geo = match &source.geo {
        Some(geo) => format!(" to geo {}", Shown(geo)),
        None => String::new(),
    };
    match report.per_second {
        Some(total) => out.push_str(&format!(
            "{} answers{geo} over the last {window} (Prometheus {}, etcd revision {})\n",
            rate_text(total),
            Shown(&source.prometheus),
            report.revision
        )),
        None => out.push_str(&format!(
            "no {ANSWERS}{geo} in Prometheus over the last {window} ({}): it does not scrape \
             the dw-agents' /metrics, or no node counts\n",
            Shown(&source.prometheus)
        )),
    }
    out.push_str(
        "(answers of resolve(), not requests: pages served from LSCache are not counted)\n",
    );
    if let Some(overflow) = report.overflow_per_second.filter(|o| *o > 0.0) {
        out.push_str(&format!(
            "{} answers past the nodes' label bounds ({OVERFLOW}): not in the origins below\n",
            rate_text(overflow)
        ));
    }
    if let Some(why) = &report.capacities_unreadable {
        out.push_str(&format!("capacities not shown: {}\n", Shown(why)));
    }
    for name in &report.unreadable_regions {
        out.push_str(&format!(
            "region {} does not parse: not counted for any origin\n",
            Shown(name)
        ));
    }
    out.push_str(&header_line(autopilot));
    out.push('\n');
    if report.origins.is_empty() {
        out.push_str("no origins in Prometheus or etcd\n");
    }
    // The headroom as the JSON holds it (a number that is not finite: the default).
    let headroom = number_json(report.capacity_headroom)
        .as_f64()
        .unwrap_or(DEFAULT_HEADROOM);
    for origin in &report.origins {
        let etcd = &origin.etcd;
        let share = origin
            .share
            .map_or("-".to_string(), |share| format!("{:.1}%", share * 100.0));
        let regions: Vec<String> = etcd
            .regions
            .iter()
            .map(|(name, weight)| format!("{} {}", Shown(name), weight))
            .collect();
        let placed = match regions.len() {
            0 => "in no region".to_string(),
            n if n > SHOWN_REGIONS => format!(
                "regions: {}, and {} more (--output json lists them)",
                regions[..SHOWN_REGIONS].join(", "),
                n - SHOWN_REGIONS
            ),
            _ => format!("regions: {}", regions.join(", ")),
        };
        out.push_str(&format!(
            "\n{}  {}  {share}  {}, registered: {}\n",
            Shown(&origin.origin),
            rate_text(origin.per_second),
            placed,
            etcd.registered,
        ));
        match &origin.capacity {
            Some(capacity) => out.push_str(&format!(
                "  capacity {}/s, {}% used (the guard refuses above {}%){}\n",
                number_json(capacity.answers_per_s),
                percent(capacity.used.filter(|used| used.is_finite()).unwrap_or(0.0)),
                percent(headroom),
                if capacity.over_guard {
                    ": ABOVE THE GUARD"
                } else {
                    ""
                },
            )),
            None => out.push_str("  capacity not set (`dwctl origin capacity`)\n"),
        }
        if let Some(line) = origin_line(autopilot, &origin.origin) {
            out.push_str(&format!("  {line}\n"));
        }
        for (what, rows) in [
            ("geos", &origin.geos),
            ("keys", &origin.keys),
            ("steps", &origin.steps),
            ("nodes", &origin.nodes),
        ] {
            let list = list_text(rows);
            if !list.is_empty() {
                out.push_str(&format!("  {what}: {list}\n"));
            }
        }
        if !etcd.weight_zero.is_empty() {
            out.push_str(&format!(
                "  weight 0 in: {}\n",
                etcd.weight_zero
                    .iter()
                    .map(|name| Shown(name).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if let Some(drain) = etcd.drained.as_ref().filter(|drain| drain.parts.len() > 1) {
            out.push_str(&format!("  {}:\n", Shown(&drain.state)));
            for part in &drain.parts {
                out.push_str(&format!("    {}\n", Shown(part)));
            }
        } else if let Some(drain) = &etcd.drained {
            out.push_str(&format!(
                "  {} by {} at {} ({}): {}\n",
                Shown(&drain.state),
                Shown(&drain.by),
                Shown(&drain.at),
                Shown(&drain.source),
                Shown(&drain.reason),
            ));
        }
        if let Some(reason) = &etcd.malformed_drain {
            out.push_str(&format!(
                "  its drain record does not parse ({}): `dwctl drain --repair`\n",
                Shown(reason)
            ));
        }
        for stage in &etcd.stages {
            out.push_str(&format!(
                "  in stage {} (cohort {}): {}\n",
                Shown(&stage.stage),
                Shown(&stage.cohort),
                stage
                    .keys
                    .iter()
                    .map(|key| Shown(key).to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        for why in origin.why.iter().flatten() {
            // Built from values already shown.
            out.push_str(&format!("  why no answers: {why}\n"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
