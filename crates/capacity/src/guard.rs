//! The guard: no origin above `headroom` times its capacity, and, when a plan does not
//! fit, the largest part of it that would.

use std::collections::BTreeMap;

use crate::error::{Error, shown};
use crate::predict::Load;

/// The default headroom: an origin may take up to 80 % of its capacity.
pub const DEFAULT_HEADROOM: f64 = 0.8;

/// An origin the prediction puts above its guard.
#[derive(Debug, Clone, PartialEq)]
pub struct Overload {
    /// The origin.
    pub origin: String,
    /// Its predicted load, answers per second.
    pub predicted: f64,
    /// Its capacity, answers per second.
    pub capacity: f64,
    /// `headroom * capacity`: the most the guard lets it take.
    pub limit: f64,
}

/// What the guard found for a load.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GuardReport {
    /// Every origin whose predicted load is above its limit, by name.
    pub overloads: Vec<Overload>,
    /// Origins with predicted load but no capacity: the guard cannot judge them.
    pub without_capacity: Vec<String>,
}

impl GuardReport {
    /// No overload.
    pub fn passes(&self) -> bool {
        self.overloads.is_empty()
    }

    /// The overloads a plan causes or worsens: those whose load rises from `before`. An
    /// origin already above its limit that the plan leaves alone or relieves is not one.
    pub fn rising<'r>(&'r self, before: &'r Load) -> impl Iterator<Item = &'r Overload> + 'r {
        self.overloads
            .iter()
            .filter(move |overload| overload.predicted > before.of(&overload.origin) + 1e-9)
    }
}

/// Checks `headroom` and the capacities: `headroom` in `(0, 1]`, capacities finite and
/// non-negative.
pub fn check_guard_inputs(capacities: &BTreeMap<String, f64>, headroom: f64) -> Result<(), Error> {
    if !(headroom > 0.0 && headroom <= 1.0) {
        return Err(Error::invalid(
            "headroom",
            format!("{headroom} is not in (0, 1]"),
        ));
    }
    for (origin, capacity) in capacities {
        if !capacity.is_finite() || *capacity < 0.0 {
            return Err(Error::invalid(
                "capacity",
                format!(
                    "{} has capacity {capacity}: a finite number >= 0",
                    shown(origin)
                ),
            ));
        }
    }
    Ok(())
}

/// Every origin of `after` above `headroom` times its capacity. Origins without a
/// capacity are listed apart (when they carry load), never refused.
pub fn guard(
    after: &Load,
    capacities: &BTreeMap<String, f64>,
    headroom: f64,
) -> Result<GuardReport, Error> {
    check_guard_inputs(capacities, headroom)?;
    let mut report = GuardReport::default();
    for (origin, predicted) in &after.origins {
        match capacities.get(origin) {
            Some(capacity) => {
                let limit = capacity * headroom;
                if *predicted > limit {
                    report.overloads.push(Overload {
                        origin: origin.clone(),
                        predicted: *predicted,
                        capacity: *capacity,
                        limit,
                    });
                }
            }
            None if *predicted > 0.0 => report.without_capacity.push(origin.clone()),
            None => {}
        }
    }
    Ok(report)
}

/// The largest part of a drain or shed plan that would fit (see [`largest_fitting_shed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FittingShed {
    /// The largest `f` in `[0, 1]` such that moving `f` of every origin's change keeps
    /// every origin whose load rises under its limit; 1 when the whole plan fits.
    pub fraction_of_plan: f64,
    /// That part as the `PERCENT` of a shed: `100 * f * (before - after) / before` of the
    /// shed origin's load.
    pub percent: f64,
    /// The origin whose limit binds first; `None` when the whole plan fits.
    pub limited_by: Option<String>,
}

/// The largest shed that would fit, for a plan taking load off `origin`: each origin's
/// load is taken as linear in the part of the plan carried out, `before + f * (after -
/// before)`, which is what shedding `f` of the plan's share does to sticky traffic (its
/// shares move in proportion); plain geos move whole, so the real shed at that percent is
/// then found by the search ([`crate::shed`]) and checked again. Origins without a
/// capacity do not bind; an origin already above its limit whose load rises makes it 0.
pub fn largest_fitting_shed(
    before: &Load,
    after: &Load,
    origin: &str,
    capacities: &BTreeMap<String, f64>,
    headroom: f64,
) -> Result<FittingShed, Error> {
    check_guard_inputs(capacities, headroom)?;
    let mut fraction = 1.0f64;
    let mut limited_by = None;
    for (name, &load_after) in &after.origins {
        let load_before = before.of(name);
        let rise = load_after - load_before;
        let Some(capacity) = capacities.get(name) else {
            continue;
        };
        if rise <= 1e-9 {
            continue;
        }
        let room = (capacity * headroom - load_before).max(0.0);
        let fits = (room / rise).min(1.0);
        if fits < fraction {
            fraction = fits;
            limited_by = Some(name.clone());
        }
    }
    let shed_before = before.of(origin);
    let percent = if shed_before > 0.0 {
        100.0 * fraction * (shed_before - after.of(origin)).max(0.0) / shed_before
    } else {
        0.0
    };
    Ok(FittingShed {
        fraction_of_plan: fraction,
        percent,
        limited_by: if fraction < 1.0 { limited_by } else { None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(origins: &[(&str, f64)]) -> Load {
        Load {
            origins: origins.iter().map(|(o, l)| (o.to_string(), *l)).collect(),
            ..Load::default()
        }
    }

    fn capacities(list: &[(&str, f64)]) -> BTreeMap<String, f64> {
        list.iter().map(|(o, c)| (o.to_string(), *c)).collect()
    }

    #[test]
    fn names_origins_above_their_limit() {
        let after = load(&[("a", 0.0), ("b", 81.0), ("c", 80.0), ("d", 5.0)]);
        let report = guard(
            &after,
            &capacities(&[("a", 100.0), ("b", 100.0), ("c", 100.0)]),
            0.8,
        )
        .unwrap();
        assert_eq!(
            report.overloads,
            [Overload {
                origin: "b".into(),
                predicted: 81.0,
                capacity: 100.0,
                limit: 80.0
            }]
        );
        assert_eq!(report.without_capacity, ["d"]);
        assert!(!report.passes());
        let before = load(&[("b", 90.0)]);
        assert_eq!(report.rising(&before).count(), 0, "b was relieved");
        assert_eq!(report.rising(&load(&[("b", 10.0)])).count(), 1);
        for headroom in [0.0, -0.1, 1.01, f64::NAN] {
            assert!(
                guard(&after, &BTreeMap::new(), headroom).is_err(),
                "{headroom}"
            );
        }
        assert!(guard(&after, &capacities(&[("a", f64::INFINITY)]), 0.8).is_err());
        assert!(guard(&after, &capacities(&[("a", -1.0)]), 0.8).is_err());
        assert!(guard(&after, &BTreeMap::new(), 1.0).unwrap().passes());
    }

    #[test]
    fn the_largest_fitting_shed_is_where_the_first_limit_binds() {
        // Draining a (100/s) puts 60 on b and 40 on c; b may take 80 - 50 = 30 more, c 100.
        let before = load(&[("a", 100.0), ("b", 50.0), ("c", 10.0)]);
        let after = load(&[("a", 0.0), ("b", 110.0), ("c", 50.0)]);
        let caps = capacities(&[("b", 100.0), ("c", 1000.0)]);
        let fit = largest_fitting_shed(&before, &after, "a", &caps, 0.8).unwrap();
        assert!((fit.fraction_of_plan - 0.5).abs() < 1e-12);
        assert!((fit.percent - 50.0).abs() < 1e-9);
        assert_eq!(fit.limited_by.as_deref(), Some("b"));
        let roomy = capacities(&[("b", 1000.0)]);
        let fit = largest_fitting_shed(&before, &after, "a", &roomy, 0.8).unwrap();
        assert_eq!(
            (fit.fraction_of_plan, fit.percent, fit.limited_by),
            (1.0, 100.0, None)
        );
        // b already above its limit: nothing fits.
        let full = capacities(&[("b", 50.0)]);
        let fit = largest_fitting_shed(&before, &after, "a", &full, 0.8).unwrap();
        assert_eq!(fit.fraction_of_plan, 0.0);
        assert_eq!(fit.percent, 0.0);
    }
}
