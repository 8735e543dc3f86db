//! Before and after a plan: each origin's load, and every geo whose traffic moves.

use std::collections::{BTreeMap, BTreeSet};

use crate::predict::Load;

/// Changes smaller than this (answers per second), or than this fraction of the rates
/// compared when they are above 1, are rounding, not moves.
pub const MOVE_EPSILON: f64 = 1e-9;

/// Whether two rates differ by more than rounding.
fn differs(a: f64, b: f64) -> bool {
    (a - b).abs() > MOVE_EPSILON * a.abs().max(b.abs()).max(1.0)
}

/// One origin's load before and after, answers per second.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginChange {
    /// The origin.
    pub origin: String,
    /// Its load before the plan.
    pub before: f64,
    /// Its load after.
    pub after: f64,
}

impl OriginChange {
    /// Whether the load changes by more than rounding ([`MOVE_EPSILON`]).
    pub fn changed(&self) -> bool {
        differs(self.before, self.after)
    }
}

/// Plain traffic of a geo leaving one origin for another (`None`: no route, fail-open).
#[derive(Debug, Clone, PartialEq)]
pub struct Flow {
    /// Where it went before.
    pub from: Option<String>,
    /// Where it goes after.
    pub to: Option<String>,
    /// Answers per second.
    pub rate: f64,
}

/// A geo whose traffic lands differently after the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct GeoMove {
    /// The geo.
    pub geo: String,
    /// Its plain traffic's moves (a geo without a sticky key moves whole).
    pub plain: Vec<Flow>,
    /// Its sticky traffic per origin whose part changes, before and after. These are net
    /// changes of shares: under the legacy pick a changed region rehashes its keys, so
    /// more keys than the net change may move between origins.
    pub sticky: Vec<OriginChange>,
    /// Its bucketed traffic per origin whose part changes, before and after. dwctl moves
    /// buckets by the minimal-move rule, so the net change is what moves: the buckets that
    /// change origin are exactly the origins' decreases (docs/routing.md, "Buckets").
    pub bucket: Vec<OriginChange>,
}

impl GeoMove {
    /// Answers per second of this geo that change origin (plain flows, plus the sticky
    /// and bucketed parts' net gains on the origins that gain).
    pub fn moved_rate(&self) -> f64 {
        let gains = |changes: &[OriginChange]| {
            changes
                .iter()
                .map(|change| (change.after - change.before).max(0.0))
                .sum::<f64>()
        };
        self.plain.iter().map(|flow| flow.rate).sum::<f64>()
            + gains(&self.sticky)
            + gains(&self.bucket)
    }
}

/// Two loads side by side (see [`compare`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Every origin of either load, by name.
    pub origins: Vec<OriginChange>,
    /// Every geo that moves, by geo.
    pub moves: Vec<GeoMove>,
    /// `no_route` before and after.
    pub no_route: (f64, f64),
}

impl Comparison {
    /// The origins whose load changes.
    pub fn changed_origins(&self) -> impl Iterator<Item = &OriginChange> {
        self.origins.iter().filter(|change| change.changed())
    }
}

/// Compares the loads before and after a plan: each origin's, and every geo that moves,
/// including geos moving between origins other than the one a plan drains (a changed
/// origin list or weight rehashes a region's geos under the legacy pick).
pub fn compare(before: &Load, after: &Load) -> Comparison {
    let names: BTreeSet<&String> = before.origins.keys().chain(after.origins.keys()).collect();
    let origins = names
        .into_iter()
        .map(|origin| OriginChange {
            origin: origin.clone(),
            before: before.of(origin),
            after: after.of(origin),
        })
        .collect();
    let geos: BTreeSet<&String> = before.geos.keys().chain(after.geos.keys()).collect();
    let empty = Default::default();
    let mut moves = Vec::new();
    for geo in geos {
        let was = before.geos.get(geo).unwrap_or(&empty);
        let now = after.geos.get(geo).unwrap_or(&empty);
        let plain = flows(
            &was.plain,
            was.no_route_plain(),
            &now.plain,
            now.no_route_plain(),
        );
        let sticky = share_changes(&was.sticky, &now.sticky);
        let bucket = share_changes(&was.bucket, &now.bucket);
        if !plain.is_empty() || !sticky.is_empty() || !bucket.is_empty() {
            moves.push(GeoMove {
                geo: geo.clone(),
                plain,
                sticky,
                bucket,
            });
        }
    }
    Comparison {
        origins,
        moves,
        no_route: (before.no_route, after.no_route),
    }
}

/// The origins whose part of a spread (sticky or bucketed) traffic changes.
fn share_changes(
    before: &BTreeMap<String, f64>,
    after: &BTreeMap<String, f64>,
) -> Vec<OriginChange> {
    let names: BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    names
        .into_iter()
        .map(|origin| OriginChange {
            origin: origin.clone(),
            before: before.get(origin).copied().unwrap_or(0.0),
            after: after.get(origin).copied().unwrap_or(0.0),
        })
        .filter(OriginChange::changed)
        .collect()
}

impl crate::predict::GeoLoad {
    /// The part of `no_route` that is plain traffic: the plain rate no origin got (exact
    /// also when only some nodes' tables fail the geo open).
    fn no_route_plain(&self) -> f64 {
        let rest = self.rate.plain - self.plain.values().sum::<f64>();
        // Sums of per-node parts may differ from the whole by rounding.
        if rest > 1e-9 * self.rate.plain.max(1.0) {
            rest
        } else {
            0.0
        }
    }
}

/// The plain flows from one split to another: what each origin (or no route) loses goes,
/// in name order, to what the others gain.
fn flows(
    before: &BTreeMap<String, f64>,
    no_route_before: f64,
    after: &BTreeMap<String, f64>,
    no_route_after: f64,
) -> Vec<Flow> {
    let mut deltas: BTreeMap<Option<&String>, f64> = BTreeMap::new();
    for (origin, rate) in before {
        *deltas.entry(Some(origin)).or_default() -= rate;
    }
    for (origin, rate) in after {
        *deltas.entry(Some(origin)).or_default() += rate;
    }
    *deltas.entry(None).or_default() += no_route_after - no_route_before;
    let whole = before.values().sum::<f64>() + no_route_before;
    let tiny = MOVE_EPSILON * whole.max(1.0);
    let mut losing: Vec<(Option<&String>, f64)> = deltas
        .iter()
        .filter(|(_, delta)| **delta < -tiny)
        .map(|(origin, delta)| (*origin, -delta))
        .collect();
    let gaining: Vec<(Option<&String>, f64)> = deltas
        .iter()
        .filter(|(_, delta)| **delta > tiny)
        .map(|(origin, delta)| (*origin, *delta))
        .collect();
    let mut result = Vec::new();
    let mut from = 0;
    for (to, mut gain) in gaining {
        while gain > tiny && from < losing.len() {
            let rate = gain.min(losing[from].1);
            result.push(Flow {
                from: losing[from].0.cloned(),
                to: to.cloned(),
                rate,
            });
            gain -= rate;
            losing[from].1 -= rate;
            if losing[from].1 <= tiny {
                from += 1;
            }
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::predict::GeoLoad;
    use crate::traffic::GeoRate;

    /// (origin, rate) pairs of one geo's plain or sticky traffic.
    type Split<'a> = &'a [(&'a str, f64)];

    fn load(geos: &[(&str, Split<'_>, Split<'_>)]) -> Load {
        let mut load = Load::default();
        for (geo, plain, sticky) in geos {
            let mut entry = GeoLoad::default();
            for (origin, rate) in *plain {
                entry.plain.insert(origin.to_string(), *rate);
                entry.rate.plain += rate;
                *load.origins.entry(origin.to_string()).or_default() += rate;
            }
            for (origin, rate) in *sticky {
                entry.sticky.insert(origin.to_string(), *rate);
                entry.rate.sticky += rate;
                *load.origins.entry(origin.to_string()).or_default() += rate;
            }
            load.geos.insert(geo.to_string(), entry);
        }
        load
    }

    #[test]
    fn names_each_moving_geo_and_each_origin() {
        let before = load(&[
            ("DE", &[("a", 10.0)], &[("a", 6.0), ("b", 4.0)]),
            ("AT", &[("b", 3.0)], &[]),
            ("CH", &[("c", 2.0)], &[]),
        ]);
        let after = load(&[
            ("DE", &[("b", 10.0)], &[("b", 10.0)]),
            // AT moves between two origins other than the drained one.
            ("AT", &[("c", 3.0)], &[]),
            ("CH", &[("c", 2.0)], &[]),
        ]);
        let comparison = compare(&before, &after);
        let changes: Vec<(&str, f64, f64)> = comparison
            .origins
            .iter()
            .map(|c| (c.origin.as_str(), c.before, c.after))
            .collect();
        assert_eq!(
            changes,
            [("a", 16.0, 0.0), ("b", 7.0, 20.0), ("c", 2.0, 5.0)]
        );
        assert_eq!(comparison.moves.len(), 2);
        let de = &comparison.moves[1];
        assert_eq!(de.geo, "DE");
        assert_eq!(
            de.plain,
            [Flow {
                from: Some("a".into()),
                to: Some("b".into()),
                rate: 10.0
            }]
        );
        assert_eq!(de.sticky.len(), 2);
        assert_eq!(de.moved_rate(), 16.0);
        assert_eq!(comparison.moves[0].geo, "AT");
        assert_eq!(comparison.changed_origins().count(), 3);
        let _ = GeoRate::default();
    }

    #[test]
    fn a_geo_losing_its_route_flows_to_none() {
        let before = load(&[("FR", &[("a", 2.0)], &[])]);
        let mut after = Load::default();
        after.geos.insert(
            "FR".into(),
            GeoLoad {
                rate: GeoRate {
                    plain: 2.0,
                    sticky: 0.0,
                    bucket: 0.0,
                },
                no_route: 2.0,
                ..GeoLoad::default()
            },
        );
        after.no_route = 2.0;
        let comparison = compare(&before, &after);
        assert_eq!(
            comparison.moves[0].plain,
            [Flow {
                from: Some("a".into()),
                to: None,
                rate: 2.0
            }]
        );
        assert_eq!(comparison.no_route, (0.0, 2.0));
        assert!(compare(&before, &before).moves.is_empty());
    }
}
