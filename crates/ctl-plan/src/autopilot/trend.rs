//! A load's trend: how fast an origin's load rises, from the last few readings.
//!
//! The window's rates lag a rising load (by about half the window), and a relief's effect
//! lasts until the next action can take effect (`min_interval`, the propagation, the
//! window again). So a relief of a rising load aims at the load expected that far ahead:
//! `measured + slope × horizon` ([`lead`]), for a rising load only, and never more than
//! [`TREND_MAX_FRACTION`] of the target ahead. A give back is refused while the load rises
//! (see [`super::law`]).
//!
//! The slope is taken against the table the fleet runs **now**: each earlier reading's
//! answer rates (by geo, which no table change moves) are predicted again under the
//! current table ([`dw_capacity::predict`]), so a relief, a give back or a drain by
//! anyone is never read as the load rising or falling. It is the least-squares slope over
//! the readings of the last [`TREND_SPAN`] seconds and now, when there are at least
//! [`TREND_MIN_READINGS`] of them, and a rise counts only while it goes on: the slope of
//! the last [`RECENT_SPAN`] seconds must be at least half of it (a step seen through the
//! window looks like a ramp as long as the window, then stops rising).

use std::collections::{BTreeMap, VecDeque};

use dw_capacity::{Load, Traffic, predict};
use dw_routing::Table;

/// Seconds of earlier readings a slope is taken over.
pub const TREND_SPAN: u64 = 8;
/// Seconds of the latest readings whose slope must be at least half the whole span's for
/// a rise to count (a step seen through the window rises for one window, then stops).
pub const RECENT_SPAN: u64 = 4;
/// The fewest readings (now included) a slope is taken from.
pub const TREND_MIN_READINGS: usize = 3;
/// The most a trend adds to a relief's aim, a fraction of the origin's target.
pub const TREND_MAX_FRACTION: f64 = 0.25;

/// The earlier readings the autopilot keeps: when, and the window's answer rates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Readings {
    kept: VecDeque<(u64, Traffic)>,
}

impl Readings {
    /// Keeps `traffic` as the reading at `now`, and forgets readings older than
    /// [`TREND_SPAN`] (a reading at the same second replaces the one kept).
    pub fn observe(&mut self, now: u64, traffic: &Traffic) {
        self.kept
            .retain(|(at, _)| *at < now && at + TREND_SPAN >= now);
        self.kept.push_back((now, traffic.clone()));
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    /// Each origin's load-per-second slope at `now` under `table`: the kept readings of
    /// the last [`TREND_SPAN`] seconds predicted under it, and `loads` (now's). An origin
    /// without [`TREND_MIN_READINGS`] points has none.
    pub fn slopes(&self, table: &Table, now: u64, loads: &Load) -> BTreeMap<String, f64> {
        let earlier: Vec<(f64, Load)> = self
            .kept
            .iter()
            .filter(|(at, _)| *at < now && at + TREND_SPAN >= now)
            .map(|(at, traffic)| (*at as f64, predict(table, traffic)))
            .collect();
        loads
            .origins
            .iter()
            .filter_map(|(origin, load)| {
                let mut points: Vec<(f64, f64)> = earlier
                    .iter()
                    .map(|(at, then)| (*at, then.of(origin)))
                    .collect();
                points.push((now as f64, *load));
                let whole = slope(&points)?;
                // A rise that stopped (a step seen through the window: a ramp as long as
                // the window, then flat) is no trend: the latest readings' slope must be
                // at least half the whole span's.
                let recent: Vec<(f64, f64)> = points
                    .iter()
                    .copied()
                    .filter(|(at, _)| *at + RECENT_SPAN as f64 >= now as f64)
                    .collect();
                let latest = slope(&recent).unwrap_or(whole);
                let slope = if whole > 0.0 && latest < 0.5 * whole {
                    latest.min(0.0)
                } else {
                    whole
                };
                Some((origin.clone(), slope))
            })
            .collect()
    }
}

/// The least-squares slope of `points` (seconds, load); `None` with fewer than
/// [`TREND_MIN_READINGS`] points or when they all share one time.
pub fn slope(points: &[(f64, f64)]) -> Option<f64> {
    if points.len() < TREND_MIN_READINGS {
        return None;
    }
    let n = points.len() as f64;
    let mean_t = points.iter().map(|(t, _)| t).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let var: f64 = points.iter().map(|(t, _)| (t - mean_t).powi(2)).sum();
    if var <= 0.0 {
        return None;
    }
    let cov: f64 = points
        .iter()
        .map(|(t, y)| (t - mean_t) * (y - mean_y))
        .sum();
    let slope = cov / var;
    slope.is_finite().then_some(slope)
}

/// What a rising load adds to a relief's aim: `slope × horizon` for a positive slope,
/// at most [`TREND_MAX_FRACTION`] × `target`; 0 for a flat or falling load.
pub fn lead(slope: Option<f64>, horizon: u64, target: f64) -> f64 {
    match slope {
        Some(slope) if slope > 0.0 => (slope * horizon as f64).min(TREND_MAX_FRACTION * target),
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_flat_falling_and_too_few() {
        let line = [(0.0, 10.0), (2.0, 12.0), (4.0, 14.0), (6.0, 16.0)];
        assert!((slope(&line).unwrap() - 1.0).abs() < 1e-12);
        let flat = [(0.0, 5.0), (2.0, 5.0), (4.0, 5.0)];
        assert_eq!(slope(&flat), Some(0.0));
        let falling = [(0.0, 9.0), (2.0, 7.0), (4.0, 5.0)];
        assert!((slope(&falling).unwrap() + 1.0).abs() < 1e-12);
        assert_eq!(slope(&line[..2]), None, "two points are not enough");
        assert_eq!(slope(&[(3.0, 1.0), (3.0, 2.0), (3.0, 3.0)]), None);
    }

    fn traffic(rate: f64) -> Traffic {
        Traffic::parse(format!(r#"{{"geos":{{"DE":{{"sticky":{rate}}}}}}}"#).as_bytes()).unwrap()
    }

    fn table() -> Table {
        Table::parse(
            br#"{"format":1,"revision":1,"prefix":"/dw/routing/","kvs":{"/dw/routing/region/DE":"{\"shard\":\"eu\",\"origins\":[\"a\",\"b\"],\"weight\":{\"a\":1,\"b\":1}}","/dw/routing/policy/global":"{\"pick\":\"rendezvous\"}"}}"#,
        )
        .unwrap()
    }

    /// The slope of `a` at the last of `rates` (one reading every 2 s).
    fn slope_after(rates: &[f64]) -> Option<f64> {
        let table = table();
        let mut readings = Readings::default();
        let last = 2 * (rates.len() as u64 - 1);
        for (index, rate) in rates[..rates.len() - 1].iter().enumerate() {
            readings.observe(2 * index as u64, &traffic(*rate));
        }
        let now = predict(&table, &traffic(rates[rates.len() - 1]));
        readings.slopes(&table, last, &now).get("a").copied()
    }

    #[test]
    fn a_ramp_is_a_trend_and_a_step_seen_through_the_window_is_not() {
        // DE's answers rising 1/s, half of them a's: a's slope is 0.5/s.
        let ramp = slope_after(&[100.0, 102.0, 104.0, 106.0, 108.0]).unwrap();
        assert!((ramp - 0.5).abs() < 1e-9, "{ramp}");
        // A step through a window: it rose, then stopped; no trend (not a negative one).
        assert_eq!(slope_after(&[100.0, 140.0, 180.0, 200.0, 200.0]), Some(0.0));
        // Falling stays falling.
        assert!(slope_after(&[108.0, 106.0, 104.0]).unwrap() < 0.0);
        // Two readings are too few.
        assert_eq!(slope_after(&[100.0, 102.0]), None);
        // Only the last TREND_SPAN seconds count: older readings are forgotten.
        let mut readings = Readings::default();
        for at in [0, 2, 4, 20] {
            readings.observe(at, &traffic(1.0));
        }
        assert_eq!(readings.len(), 1);
    }

    #[test]
    fn the_lead_is_for_a_rising_load_only_and_bounded() {
        // Slope 0 and negative: nothing ahead.
        assert_eq!(lead(Some(0.0), 40, 100.0), 0.0);
        assert_eq!(lead(Some(-3.0), 40, 100.0), 0.0);
        assert_eq!(lead(None, 40, 100.0), 0.0);
        // Rising: slope × horizon, up to the bound (25 % of target), exactly at it.
        assert_eq!(lead(Some(0.5), 40, 100.0), 20.0);
        assert_eq!(lead(Some(0.625), 40, 100.0), 25.0);
        assert_eq!(lead(Some(0.7), 40, 100.0), 25.0);
        assert_eq!(lead(Some(100.0), 40, 100.0), TREND_MAX_FRACTION * 100.0);
        // A horizon of 0 turns it off.
        assert_eq!(lead(Some(0.5), 0, 100.0), 0.0);
    }
}
