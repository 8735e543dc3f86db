//! A node a prediction left out because its rates cannot be true, and why
//! ([`crate::check_plausibility`] decides; [`crate::Traffic`] carries them so that a
//! prediction made from it can say so).

use std::fmt;

use crate::error::shown;

/// Why a node's rates cannot be true.
#[derive(Debug, Clone, PartialEq)]
pub enum Implausible {
    /// A rate NaN, infinite or below 0.
    NotANumber {
        /// The geo of the row (`""` for the peak).
        geo: String,
        /// The value.
        value: f64,
    },
    /// The node's whole rate is above the ceiling.
    AboveCeiling {
        /// The node's answers per second.
        rate: f64,
        /// The ceiling.
        ceiling: f64,
    },
    /// The node's peak minute is above the ceiling: its counter jumped.
    Jumped {
        /// The peak answers per second.
        peak: f64,
        /// The ceiling.
        ceiling: f64,
    },
    /// The node answers far more than the fleet's per-node median for the same geos.
    FarAboveFleet {
        /// The node's answers per second to its geos.
        rate: f64,
        /// The fleet's per-node median for those geos.
        median: f64,
        /// The factor it is above.
        factor: f64,
        /// How many nodes the median was taken over.
        nodes: usize,
    },
}

impl fmt::Display for Implausible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Implausible::NotANumber { geo, value } if geo.is_empty() => {
                write!(f, "a peak rate of {value} (not a finite number >= 0)")
            }
            Implausible::NotANumber { geo, value } => write!(
                f,
                "a rate of {value} for geo {} (not a finite number >= 0)",
                shown(geo)
            ),
            Implausible::AboveCeiling { rate, ceiling } => write!(
                f,
                "{} answers/s, above the per-node ceiling of {} (--node-ceiling)",
                number(*rate),
                number(*ceiling)
            ),
            Implausible::Jumped { peak, ceiling } => write!(
                f,
                "its counter jumped: {} answers/s over one minute, above the per-node \
                 ceiling of {} (--node-ceiling)",
                number(*peak),
                number(*ceiling)
            ),
            Implausible::FarAboveFleet {
                rate,
                median,
                factor,
                nodes,
            } => write!(
                f,
                "{} answers/s to its geos, more than {} times the per-node median of {} \
                 over {nodes} nodes",
                number(*rate),
                number(*factor),
                number(*median)
            ),
        }
    }
}

/// A node left out of the prediction, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct LeftOut {
    /// The node (its `node` label).
    pub node: String,
    /// Why its rates cannot be true.
    pub why: Implausible,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", shown(&self.node), self.why)
    }
}

/// A rate as a short number (`50000`, `3.3e15`).
fn number(value: f64) -> String {
    if value.abs() >= 1e9 {
        format!("{value:.2e}")
    } else if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}
