//! Which nodes' answer rates a prediction may believe: per-node rates are checked before
//! they predict anything, and a node whose rates cannot be true is left out and named.
//!
//! The answer counters are written by the nodes' PHP workers, so a node's rates are only
//! as true as its PHP users are honest (docs/traffic.md, "Trust"). One node that forges
//! its counters must not decide alone whether a change is refused or waved through, so
//! every node is checked on its own, in this order:
//!
//! 1. **Not a number** ([`Implausible::NotANumber`]): a rate that is NaN, infinite or
//!    below 0 (Prometheus answers such values for broken or reset series; it is never
//!    read as 0).
//! 2. **Above the ceiling** ([`Implausible::AboveCeiling`]): the node's whole rate over
//!    the window (every geo, sticky or not, fail-open and `other` included) is above
//!    [`Limits::node_ceiling`], the most one node's hardware can answer.
//! 3. **A counter that jumped** ([`Implausible::Jumped`]): the node's peak rate over a
//!    short stretch of the window ([`NodeReading::peak`], one minute) is above the
//!    ceiling. A jump of the counter spread over a long window can stay under the ceiling
//!    on average; its minute cannot.
//! 4. **Far above the fleet** ([`Implausible::FarAboveFleet`]), only with at least
//!    [`MIN_NODES_FOR_MEDIAN`] nodes left after 1 to 3: the node answers more than
//!    [`Limits::median_factor`] times the fleet's per-node median **for the same geos**
//!    (for a node answering DE and FR: every node's DE + FR rate, the node's own among
//!    them). Nodes of different sites legitimately differ, so this is the weaker test:
//!    the factor is large, and a median of 0 (most nodes answer none of those geos)
//!    judges nothing.
//!
//! What is left is [`Checked::kept`]; [`Checked::left_out`] names each node left out and
//! why. No node left ([`Checked::usable`] false) means the source answered with data that
//! cannot be used: a change must then be refused, never waved through (issue 40).
//!
//! Pure: rows in, a verdict out; the caller reads Prometheus.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Error;
use crate::left_out::{Implausible, LeftOut};
use crate::traffic::{AnswerRow, MAX_RATE};

/// The default ceiling of one node's answers per second (`--node-ceiling`): far above what
/// one PHP node answers (a busy node answers a few thousand per second), far below what a
/// forged counter shows.
pub const DEFAULT_NODE_CEILING: f64 = 50_000.0;
/// The default factor of the weaker test: a node answering more than this many times the
/// fleet's per-node median for the same geos is left out.
pub const DEFAULT_MEDIAN_FACTOR: f64 = 20.0;
/// The fewest nodes (left after the ceiling checks) the median test needs: with two, one
/// node's median is half its own and the pair's.
pub const MIN_NODES_FOR_MEDIAN: usize = 3;

/// The bounds a node's rates are checked against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limits {
    /// The most answers per second one node can give (its hardware's ceiling).
    pub node_ceiling: f64,
    /// The weaker test's factor over the fleet's per-node median.
    pub median_factor: f64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            node_ceiling: DEFAULT_NODE_CEILING,
            median_factor: DEFAULT_MEDIAN_FACTOR,
        }
    }
}

impl Limits {
    /// Checks the bounds: a ceiling finite, above 0 and at most [`MAX_RATE`]; a factor
    /// finite and at least 1.
    pub fn check(&self) -> Result<(), Error> {
        if !(self.node_ceiling.is_finite()
            && self.node_ceiling > 0.0
            && self.node_ceiling <= MAX_RATE)
        {
            return Err(Error::invalid(
                "node_ceiling",
                format!(
                    "{} answers/s: a number above 0 and at most {MAX_RATE}",
                    self.node_ceiling
                ),
            ));
        }
        if !(self.median_factor.is_finite() && self.median_factor >= 1.0) {
            return Err(Error::invalid(
                "median_factor",
                format!("{}: a finite number of at least 1", self.median_factor),
            ));
        }
        Ok(())
    }
}

/// What one node's source said: its rows over the window and its peak rate.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeReading {
    /// The node's rows (`sum by (node, geo, sticky, step)` over the window); their `node`
    /// is this node.
    pub rows: Vec<AnswerRow>,
    /// The node's highest whole rate over one minute within the window, when the source
    /// could say (`None`: no peak was read, the jump check is not made).
    pub peak: Option<f64>,
}

/// The verdict on a source's nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checked {
    /// The rows of the nodes kept, as they came.
    pub kept: Vec<AnswerRow>,
    /// The nodes kept, by name.
    pub kept_nodes: BTreeSet<String>,
    /// The nodes left out, by name, and why.
    pub left_out: Vec<LeftOut>,
}

impl Checked {
    /// Whether any node is left to predict with.
    pub fn usable(&self) -> bool {
        !self.kept_nodes.is_empty()
    }
}

/// Checks each node's reading (see the module's documentation); `nodes` by node name.
pub fn check(nodes: BTreeMap<String, NodeReading>, limits: &Limits) -> Result<Checked, Error> {
    limits.check()?;
    let mut checked = Checked::default();
    let mut candidates: BTreeMap<String, Vec<AnswerRow>> = BTreeMap::new();
    for (node, reading) in nodes {
        match first_check(&reading, limits) {
            Some(why) => checked.left_out.push(LeftOut { node, why }),
            None => {
                candidates.insert(node, reading.rows);
            }
        }
    }
    if candidates.len() >= MIN_NODES_FOR_MEDIAN {
        let far: Vec<(String, Implausible)> = candidates
            .iter()
            .filter_map(|(node, rows)| {
                far_above_fleet(rows, &candidates, limits.median_factor)
                    .map(|why| (node.clone(), why))
            })
            .collect();
        for (node, why) in far {
            candidates.remove(&node);
            checked.left_out.push(LeftOut { node, why });
        }
    }
    checked.left_out.sort_by(|a, b| a.node.cmp(&b.node));
    for (node, rows) in candidates {
        checked.kept.extend(rows);
        checked.kept_nodes.insert(node);
    }
    Ok(checked)
}

/// Checks 1 to 3 on one node: a non-number, the ceiling, a jump.
fn first_check(reading: &NodeReading, limits: &Limits) -> Option<Implausible> {
    let mut whole = 0.0;
    for row in &reading.rows {
        if !(row.rate.is_finite() && row.rate >= 0.0) {
            return Some(Implausible::NotANumber {
                geo: row.geo.clone(),
                value: row.rate,
            });
        }
        whole += row.rate;
    }
    if let Some(peak) = reading.peak
        && !(peak.is_finite() && peak >= 0.0)
    {
        return Some(Implausible::NotANumber {
            geo: String::new(),
            value: peak,
        });
    }
    if whole > limits.node_ceiling {
        return Some(Implausible::AboveCeiling {
            rate: whole,
            ceiling: limits.node_ceiling,
        });
    }
    match reading.peak {
        Some(peak) if peak > limits.node_ceiling => Some(Implausible::Jumped {
            peak,
            ceiling: limits.node_ceiling,
        }),
        _ => None,
    }
}

/// The node's rate over the geos it answers, against every candidate's rate over the
/// same geos (its own included): left out above `factor` times their median.
fn far_above_fleet(
    rows: &[AnswerRow],
    candidates: &BTreeMap<String, Vec<AnswerRow>>,
    factor: f64,
) -> Option<Implausible> {
    let geos: BTreeSet<&str> = rows
        .iter()
        .filter(|row| row.rate > 0.0)
        .map(|row| row.geo.as_str())
        .collect();
    if geos.is_empty() {
        return None;
    }
    let over = |rows: &[AnswerRow]| -> f64 {
        rows.iter()
            .filter(|row| geos.contains(row.geo.as_str()))
            .map(|row| row.rate)
            .sum()
    };
    let rate = over(rows);
    let mut rates: Vec<f64> = candidates.values().map(|rows| over(rows)).collect();
    rates.sort_by(f64::total_cmp);
    let middle = rates.len() / 2;
    let median = if rates.len() % 2 == 1 {
        rates[middle]
    } else {
        (rates[middle - 1] + rates[middle]) / 2.0
    };
    (median > 0.0 && rate > factor * median).then_some(Implausible::FarAboveFleet {
        rate,
        median,
        factor,
        nodes: rates.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::AnswerKind;

    fn row(node: &str, geo: &str, rate: f64) -> AnswerRow {
        AnswerRow {
            geo: geo.into(),
            kind: AnswerKind::Plain,
            node: Some(node.into()),
            fail_open: false,
            rate,
        }
    }

    fn reading(rows: Vec<AnswerRow>, peak: Option<f64>) -> NodeReading {
        NodeReading { rows, peak }
    }

    fn fleet(readings: &[(&str, NodeReading)]) -> BTreeMap<String, NodeReading> {
        readings
            .iter()
            .map(|(node, reading)| ((*node).to_owned(), reading.clone()))
            .collect()
    }

    fn names(left_out: &[LeftOut]) -> Vec<&str> {
        left_out.iter().map(|left| left.node.as_str()).collect()
    }

    const LIMITS: Limits = Limits {
        node_ceiling: 1000.0,
        median_factor: 10.0,
    };

    #[test]
    fn the_ceiling_at_its_edge() {
        let at = fleet(&[(
            "n1",
            reading(vec![row("n1", "DE", 600.0), row("n1", "FR", 400.0)], None),
        )]);
        let checked = check(at, &LIMITS).unwrap();
        assert!(checked.left_out.is_empty());
        assert!(checked.usable());
        assert_eq!(checked.kept.len(), 2);
        let above = fleet(&[(
            "n1",
            reading(vec![row("n1", "DE", 600.0), row("n1", "FR", 400.5)], None),
        )]);
        let checked = check(above, &LIMITS).unwrap();
        assert!(!checked.usable(), "no node left");
        assert!(checked.kept.is_empty());
        assert_eq!(
            checked.left_out[0].why,
            Implausible::AboveCeiling {
                rate: 1000.5,
                ceiling: 1000.0
            }
        );
        let text = checked.left_out[0].to_string();
        assert!(
            text.contains("\"n1\": 1000.5 answers/s, above the per-node ceiling of 1000"),
            "{text}"
        );
    }

    #[test]
    fn a_jump_is_its_peak_minute_above_the_ceiling() {
        // One jump of 1e18 over a day's window: 1.2e13/s on average, above any ceiling.
        let jumped = |average: f64, peak: f64| {
            fleet(&[
                ("good", reading(vec![row("good", "DE", 100.0)], Some(120.0))),
                ("bad", reading(vec![row("bad", "DE", average)], Some(peak))),
            ])
        };
        let checked = check(jumped(1e18 / 86_400.0, 1e18 / 60.0), &LIMITS).unwrap();
        assert_eq!(names(&checked.left_out), ["bad"]);
        assert!(matches!(
            checked.left_out[0].why,
            Implausible::AboveCeiling { .. }
        ));
        // A smaller jump hides under the ceiling on average; its minute does not.
        let checked = check(jumped(900.0, 1000.5), &LIMITS).unwrap();
        assert_eq!(names(&checked.left_out), ["bad"]);
        assert_eq!(
            checked.left_out[0].why,
            Implausible::Jumped {
                peak: 1000.5,
                ceiling: 1000.0
            }
        );
        assert!(
            checked.left_out[0]
                .to_string()
                .contains("its counter jumped")
        );
        let checked = check(jumped(900.0, 1000.0), &LIMITS).unwrap();
        assert!(
            checked.left_out.is_empty(),
            "the peak at the ceiling is kept"
        );
        assert_eq!(checked.kept_nodes.len(), 2);
    }

    #[test]
    fn nan_infinity_and_negatives_are_never_zero() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.001] {
            let checked = check(
                fleet(&[
                    ("good", reading(vec![row("good", "DE", 5.0)], None)),
                    (
                        "bad",
                        reading(vec![row("bad", "DE", 5.0), row("bad", "FR", bad)], None),
                    ),
                ]),
                &LIMITS,
            )
            .unwrap();
            assert_eq!(names(&checked.left_out), ["bad"], "{bad}");
            assert!(
                checked.left_out[0]
                    .to_string()
                    .contains("not a finite number")
            );
            assert_eq!(checked.kept, vec![row("good", "DE", 5.0)]);
            // A peak that is not a number too.
            let checked = check(
                fleet(&[("bad", reading(vec![row("bad", "DE", 5.0)], Some(bad)))]),
                &LIMITS,
            )
            .unwrap();
            assert!(!checked.usable(), "{bad}");
        }
        // 0 itself is a rate.
        let checked = check(
            fleet(&[("n", reading(vec![row("n", "DE", 0.0)], Some(0.0)))]),
            &LIMITS,
        )
        .unwrap();
        assert!(checked.usable());
    }

    #[test]
    fn far_above_the_median_for_the_same_geos_with_three_nodes() {
        let three = |forged: f64| {
            fleet(&[
                (
                    "a",
                    reading(vec![row("a", "DE", 50.0), row("a", "FR", 10.0)], None),
                ),
                (
                    "b",
                    reading(vec![row("b", "DE", 40.0), row("b", "JP", 900.0)], None),
                ),
                ("c", reading(vec![row("c", "DE", forged)], None)),
            ])
        };
        // c answers DE only: DE rates 50, 40, c. The median is 50 once c is above it.
        let checked = check(three(500.0), &LIMITS).unwrap();
        assert!(
            checked.left_out.is_empty(),
            "10 times the median is not above it"
        );
        let checked = check(three(500.5), &LIMITS).unwrap();
        assert_eq!(names(&checked.left_out), ["c"]);
        assert_eq!(
            checked.left_out[0].why,
            Implausible::FarAboveFleet {
                rate: 500.5,
                median: 50.0,
                factor: 10.0,
                nodes: 3
            }
        );
        // b's JP is not compared with a's total: for b's geos (DE, JP) the rates are
        // 50, 940, 500.5: its 940 is under 10 × 500.5.
        assert!(!names(&checked.left_out).contains(&"b"));
        // Two nodes: the weaker test is not made.
        let mut two = three(500.5);
        two.remove("a");
        assert!(check(two, &LIMITS).unwrap().left_out.is_empty());
        // Nodes of other geos: a median of 0 judges nothing.
        let apart = fleet(&[
            ("a", reading(vec![row("a", "DE", 1.0)], None)),
            ("b", reading(vec![row("b", "FR", 1.0)], None)),
            ("c", reading(vec![row("c", "JP", 900.0)], None)),
        ]);
        assert!(check(apart, &LIMITS).unwrap().left_out.is_empty());
    }

    #[test]
    fn the_median_test_counts_only_nodes_the_ceiling_kept() {
        // Three nodes, one above the ceiling: two remain, too few for the median.
        let checked = check(
            fleet(&[
                ("a", reading(vec![row("a", "DE", 1.0)], None)),
                ("b", reading(vec![row("b", "DE", 900.0)], None)),
                ("c", reading(vec![row("c", "DE", 1e15)], None)),
            ]),
            &LIMITS,
        )
        .unwrap();
        assert_eq!(names(&checked.left_out), ["c"]);
        assert_eq!(checked.kept_nodes.len(), 2);
    }

    #[test]
    fn limits_are_checked() {
        let with = |node_ceiling: f64, median_factor: f64| {
            check(
                BTreeMap::new(),
                &Limits {
                    node_ceiling,
                    median_factor,
                },
            )
        };
        assert!(with(1.0, 1.0).is_ok());
        assert!(with(MAX_RATE, 1.0).is_ok());
        for (ceiling, factor) in [
            (0.0, 10.0),
            (-1.0, 10.0),
            (f64::NAN, 10.0),
            (MAX_RATE * 1.5, 10.0),
            (1.0, 0.99),
            (1.0, f64::INFINITY),
        ] {
            assert!(with(ceiling, factor).is_err(), "{ceiling} {factor}");
        }
        assert!(
            !with(1.0, 1.0).unwrap().usable(),
            "no nodes: nothing usable"
        );
    }
}
