//! A shed's part of a drain record (schema 3), and the arguments that ask for one.
//!
//! `dwctl shed ORIGIN PERCENT` lowers an origin's share instead of taking it out, and
//! keeps what it changed in the origin's drain record (one record family: a region
//! entry's `before` is the value before the first shed or drain, `after` what dwctl last
//! wrote). What tells a shed region from a drained one is its `after`: a shed region's
//! still lists the origin. The record's `shed` field ([`ShedInfo`]) says how much was shed
//! and in which steps; a record with one is written as schema 3
//! ([`SHED_RECORD_SCHEMA`]), so that a dwctl that knows only schema 2, whose reconcile rule
//! would take every shed region out of the record (they list the origin), reads it as
//! malformed and leaves it alone instead. A record without shed regions is schema 2 as
//! before.
//!
//! Parsing here is of bytes and text only: `PERCENT` ([`parse_percent`]) and health's
//! `--on-fail` ([`OnFail`]).

use serde::{Deserialize, Serialize};

/// The schema of a record with a shed in it (and the newest this dwctl reads).
pub const SHED_RECORD_SCHEMA: u32 = 3;

/// The most shed steps a record keeps (older steps are folded into `percent` and
/// dropped, oldest first).
pub const MAX_SHED_STEPS: usize = 32;

/// How much of an origin's load its sheds took, and each shed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShedInfo {
    /// The share of the origin's load asked off over every step, in percent:
    /// `100 × (1 − Π (1 − pᵢ/100))` (30 then 30 is 51).
    pub percent: f64,
    /// Each shed, oldest first (at most [`MAX_SHED_STEPS`]).
    pub steps: Vec<ShedStep>,
}

/// One `shed` command (or one health shed).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShedStep {
    /// The percent asked, of the origin's load from the selected regions then.
    pub percent: f64,
    /// The percent the plan achieved by its prediction; `None` when it was made by weight
    /// (no traffic to search with).
    pub achieved: Option<f64>,
    /// The regions asked (`--region`); empty: every region listing the origin.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regions: Vec<String>,
    /// Why.
    pub reason: String,
    /// `cli` or `health`.
    pub source: String,
    /// Who.
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
}

impl ShedInfo {
    /// `self` with one more step: the combined percent of both.
    pub fn then(mut self, step: ShedStep) -> ShedInfo {
        self.percent = combined_percent(self.percent, step.percent);
        self.steps.push(step);
        if self.steps.len() > MAX_SHED_STEPS {
            self.steps.remove(0);
        }
        self
    }
}

/// The percent of a load two sheds take one after the other: the second sheds from
/// what the first left.
pub fn combined_percent(first: f64, second: f64) -> f64 {
    100.0 * (1.0 - (1.0 - first / 100.0) * (1.0 - second / 100.0))
}

/// `PERCENT` as `shed` takes it: a number above 0 and at most 100, an optional `%` after
/// it (`40`, `12.5`, `40%`).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let number = text.trim().strip_suffix('%').unwrap_or(text.trim());
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a number: give a percent above 0, at most 100"))?;
    if !value.is_finite() || value <= 0.0 || value > 100.0 {
        return Err(format!(
            "{text:?}: the percent must be above 0 and at most 100 (100 is a drain)"
        ));
    }
    Ok(value)
}

/// What `dwctl health` does to an origin that fails its probes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OnFail {
    /// Take it out of every region (the default).
    Drain,
    /// Shed this percent of its load (`shed:50`); `shed:100` is a drain.
    Shed(f64),
}

/// `--on-fail`: `drain` or `shed:PERCENT`.
pub fn parse_on_fail(text: &str) -> Result<OnFail, String> {
    if text == "drain" {
        return Ok(OnFail::Drain);
    }
    match text.strip_prefix("shed:") {
        Some(percent) => {
            let percent = parse_percent(percent)?;
            Ok(if percent >= 100.0 {
                OnFail::Drain
            } else {
                OnFail::Shed(percent)
            })
        }
        None => Err(format!(
            "{text:?}: `drain` or `shed:PERCENT` (e.g. shed:50)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(percent: f64) -> ShedStep {
        ShedStep {
            percent,
            achieved: None,
            regions: vec![],
            reason: "r".into(),
            source: "cli".into(),
            by: "b".into(),
            at: "a".into(),
        }
    }

    #[test]
    fn percents_are_above_zero_and_at_most_one_hundred() {
        assert_eq!(parse_percent("40"), Ok(40.0));
        assert_eq!(parse_percent("40%"), Ok(40.0));
        assert_eq!(parse_percent("12.5"), Ok(12.5));
        assert_eq!(parse_percent("100"), Ok(100.0));
        assert_eq!(parse_percent("0.001"), Ok(0.001));
        for bad in [
            "0", "-5", "100.0001", "101", "NaN", "inf", "forty", "", "%", "40%%", "1e999",
        ] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
        assert!(parse_percent("x").unwrap_err().contains("not a number"));
        assert!(parse_percent("0").unwrap_err().contains("above 0"));
    }

    #[test]
    fn on_fail_is_drain_or_a_shed() {
        assert_eq!(parse_on_fail("drain"), Ok(OnFail::Drain));
        assert_eq!(parse_on_fail("shed:50"), Ok(OnFail::Shed(50.0)));
        assert_eq!(parse_on_fail("shed:100"), Ok(OnFail::Drain));
        for bad in [
            "shed", "shed:", "shed:0", "shed:150", "Shed:5", "drain:5", "",
        ] {
            assert!(parse_on_fail(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sheds_compose_from_what_is_left() {
        let info = ShedInfo {
            percent: 30.0,
            steps: vec![step(30.0)],
        }
        .then(step(30.0));
        assert!((info.percent - 51.0).abs() < 1e-9);
        assert_eq!(info.steps.len(), 2);
        let mut many = info;
        for _ in 0..MAX_SHED_STEPS {
            many = many.then(step(1.0));
        }
        assert_eq!(many.steps.len(), MAX_SHED_STEPS);
        assert!(many.percent < 100.0);
    }
}
