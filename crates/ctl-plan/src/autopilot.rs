//! The autopilot's control law (issue 42, docs/autopilot.md), pure: measured load in,
//! one decision out per evaluation.
//!
//! An origin's **target** is `headroom × capacity`, its **capacity** the hard limit. Each
//! evaluation ([`law::decide`]) is given the answer rates of a short window, the table the
//! fleet runs, the capacities and what the autopilot remembers ([`law::Memory`]), and
//! decides for each origin:
//!
//! - **hold** (with a [`law::HoldReason`]): the source is unusable (fail static: nothing
//!   moves, nothing is counted), another source holds a record on the origin, it has no
//!   capacity, it acted less than `min_interval` ago, the fleet's per-minute cap on moved
//!   load is spent, or nothing fits;
//! - **relieve**: measured above target for `over_for` evaluations in a row, or above
//!   **capacity** once (an emergency: no streak, no `min_interval`). The plan
//!   ([`relief::plan_relief`]) is the smallest shed bringing the origin's predicted load to
//!   `target × (1 − band)`, ahead of a rising load by its trend ([`trend::lead`]), taken in
//!   least-harm order ([`harm`]), going only to origins that stay at or below their
//!   targets, with a spill within the shard where needed;
//! - **everyone over target**: when no relief fits the receivers' targets, the law moves
//!   only what lowers the highest utilisation: a relief whose receivers stay at or below
//!   `ceiling × capacity` (the stated, audited ceiling between target and capacity, never
//!   above 1) and below the relieved origin's utilisation after it. Load that would only
//!   carry an overload elsewhere is never moved. The decision says so
//!   ([`law::Decision::fleet_over_target`]: `DwFleetOverTarget`);
//! - **give back**: an origin holding the autopilot's own record whose measured load stayed
//!   below `low_watermark × target` for `restore_after` gets part of its shed back: the
//!   whole of it when the prediction keeps it at or below `target × (1 − band)`, else a
//!   `give_back_step` of what remains when that keeps it at or below target
//!   ([`give_back::step_back`]), else it holds. No give back while the load rises.
//!
//! One action per evaluation (the most utilised origin's first), so that no two plans are
//! made on a table the other changes. The caller turns an action into one guarded,
//! fenced transaction with source [`SOURCE_AUTOPILOT`] and the action's
//! [`law::Action::reason`].

pub mod give_back;
pub mod harm;
pub mod law;
pub mod relief;
pub mod status;
pub mod trend;
pub mod write;

use crate::Error;

/// The drain records' and sheds' source of the autopilot's actions.
pub use crate::drain_record::SOURCE_AUTOPILOT;

/// The law's settings, each with its default (docs/autopilot.md says why each).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// A relief aims at `target × (1 − band)`: default 0.05.
    pub band: f64,
    /// Evaluations in a row above target before a relief: default 2.
    pub over_for: u32,
    /// The give-back watermark, a fraction of target: default 0.7.
    pub low_watermark: f64,
    /// Seconds below the watermark before a give back: default 600.
    pub restore_after: u64,
    /// Seconds between two actions on one origin: default 30.
    pub min_interval: u64,
    /// The most load moved in any 60 s, a fraction of the fleet's answers: default 0.1.
    pub max_moved_per_minute: f64,
    /// What a receiver may reach when every origin is over target, a fraction of its
    /// capacity: default 0.9 (between the headroom and 1).
    pub ceiling: f64,
    /// The part of the remaining shed one give back returns: default 0.25.
    pub give_back_step: f64,
    /// Seconds ahead a relief of a rising load aims ([`trend::lead`]): the window's lag,
    /// `min_interval` and the propagation; 0 turns the trend off. Default 40.
    pub trend_horizon: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            band: 0.05,
            over_for: 2,
            low_watermark: 0.7,
            restore_after: 600,
            min_interval: 30,
            max_moved_per_minute: 0.1,
            ceiling: 0.9,
            give_back_step: 0.25,
            trend_horizon: 40,
        }
    }
}

/// The most evaluations `over_for` may ask.
pub const MAX_OVER_FOR: u32 = 1000;
/// The longest `restore_after` and `min_interval`, seconds (a day).
pub const MAX_SECONDS: u64 = 86_400;
/// The longest `trend_horizon`, seconds.
pub const MAX_TREND_HORIZON: u64 = 600;

impl Settings {
    /// Checks every setting against its bound; `headroom` is the guard's (the ceiling must
    /// be at or above it).
    pub fn check(&self, headroom: f64) -> Result<(), Error> {
        let within = |name: &str, value: f64, low: f64, high: f64| -> Result<(), Error> {
            if value.is_finite() && value > low && value <= high {
                Ok(())
            } else {
                Err(Error::Usage(format!(
                    "{name} {value}: above {low} and at most {high}"
                )))
            }
        };
        within("--band", self.band, 0.0, 0.5)?;
        within("--low-watermark", self.low_watermark, 0.0, 1.0 - self.band)?;
        within(
            "--max-moved-per-minute",
            self.max_moved_per_minute,
            0.0,
            1.0,
        )?;
        within("--give-back-step", self.give_back_step, 0.0, 1.0)?;
        if !(self.ceiling.is_finite() && self.ceiling >= headroom && self.ceiling <= 1.0) {
            return Err(Error::Usage(format!(
                "--ceiling {}: at least the headroom {headroom} and at most 1",
                self.ceiling
            )));
        }
        if self.over_for == 0 || self.over_for > MAX_OVER_FOR {
            return Err(Error::Usage(format!(
                "--for {}: 1 to {MAX_OVER_FOR} evaluations",
                self.over_for
            )));
        }
        for (name, value) in [
            ("--restore-after", self.restore_after),
            ("--min-interval", self.min_interval),
        ] {
            if value > MAX_SECONDS {
                return Err(Error::Usage(format!(
                    "{name} {value}s: at most {MAX_SECONDS}s"
                )));
            }
        }
        if self.trend_horizon > MAX_TREND_HORIZON {
            return Err(Error::Usage(format!(
                "--trend-horizon {}s: 0 (off) to {MAX_TREND_HORIZON}s",
                self.trend_horizon
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_pass_and_each_bound_is_checked_at_its_edge() {
        let settings = Settings::default();
        settings.check(0.8).unwrap();
        assert!(
            Settings {
                ceiling: 0.79,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        Settings {
            ceiling: 0.8,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        Settings {
            ceiling: 1.0,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        assert!(
            Settings {
                ceiling: 1.01,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        Settings {
            band: 0.5,
            low_watermark: 0.5,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        assert!(
            Settings {
                band: 0.0,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        assert!(
            Settings {
                band: f64::NAN,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        assert!(
            Settings {
                low_watermark: 0.96,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        Settings {
            low_watermark: 0.95,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        assert!(
            Settings {
                over_for: 0,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        Settings {
            over_for: MAX_OVER_FOR,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        assert!(
            Settings {
                over_for: MAX_OVER_FOR + 1,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        Settings {
            restore_after: MAX_SECONDS,
            ..settings.clone()
        }
        .check(0.8)
        .unwrap();
        assert!(
            Settings {
                min_interval: MAX_SECONDS + 1,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        assert!(
            Settings {
                give_back_step: 0.0,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        assert!(
            Settings {
                max_moved_per_minute: 1.5,
                ..settings.clone()
            }
            .check(0.8)
            .is_err()
        );
        for horizon in [0, MAX_TREND_HORIZON] {
            Settings {
                trend_horizon: horizon,
                ..settings.clone()
            }
            .check(0.8)
            .unwrap();
        }
        assert!(
            Settings {
                trend_horizon: MAX_TREND_HORIZON + 1,
                ..settings
            }
            .check(0.8)
            .is_err()
        );
    }
}

#[cfg(test)]
mod law_tests;
