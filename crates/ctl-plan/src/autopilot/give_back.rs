//! Giving back: part of the autopilot's own shed undone, as region values between what the
//! regions hold now and what they held before the first shed.
//!
//! For a region, both values' weights are read as shares of their totals; the step's value
//! gives each origin `now + fraction × (before − now)` of the region (an origin a spill
//! added has share 0 before, so it fades out with the shed), written over
//! [`dw_capacity::SHED_TOTAL`] by [`dw_capacity::renormalise`]. Fraction 1 is the value
//! from before itself (its own origins, order and weights): the whole restore.

use std::collections::BTreeMap;

use dw_capacity::{RegionEdit, SHED_TOTAL, renormalise};

/// The resolution shares are computed at before they are renormalised.
const SHARE_UNITS: f64 = 1_000_000.0;

/// The value of a region `fraction` of the way from `now` back to `before`. `None` when
/// the result would leave no weight (both values empty) or when the shards differ (the
/// region was changed by someone else: not the autopilot's to give back).
pub fn step_back(now: &RegionEdit, before: &RegionEdit, fraction: f64) -> Option<RegionEdit> {
    if now.shard != before.shard {
        return None;
    }
    if fraction >= 1.0 {
        return Some(before.clone());
    }
    let fraction = fraction.max(0.0);
    let shares = |edit: &RegionEdit| -> BTreeMap<String, f64> {
        let total: u64 = edit
            .weight
            .iter()
            .map(|(_, weight)| u64::from(*weight))
            .sum();
        edit.weight
            .iter()
            .map(|(name, weight)| {
                let share = if total == 0 {
                    0.0
                } else {
                    f64::from(*weight) / total as f64
                };
                (name.clone(), share)
            })
            .collect()
    };
    let (now_shares, before_shares) = (shares(now), shares(before));
    // Before's origins in its order, then the ones only `now` lists (a spill's).
    let mut origins: Vec<String> = before.origins.clone();
    origins.extend(
        now.origins
            .iter()
            .filter(|name| !before.origins.contains(name))
            .cloned(),
    );
    let weights: Vec<(String, u32)> = origins
        .iter()
        .map(|name| {
            let from = now_shares.get(name).copied().unwrap_or(0.0);
            let to = before_shares.get(name).copied().unwrap_or(0.0);
            let share = from + fraction * (to - from);
            (name.clone(), (share * SHARE_UNITS).round().max(0.0) as u32)
        })
        .collect();
    let weight = renormalise(&weights, SHED_TOTAL)?;
    Some(RegionEdit {
        geo: now.geo.clone(),
        shard: now.shard.clone(),
        origins,
        weight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edit(origins: &[(&str, u32)]) -> RegionEdit {
        RegionEdit {
            geo: "DE".into(),
            shard: "eu".into(),
            origins: origins.iter().map(|(name, _)| (*name).to_owned()).collect(),
            weight: origins
                .iter()
                .map(|(name, weight)| ((*name).to_owned(), *weight))
                .collect(),
        }
    }

    #[test]
    fn a_quarter_back_moves_a_quarter_of_each_share() {
        let before = edit(&[("a", 50), ("b", 50)]);
        let now = edit(&[("a", 200), ("b", 800)]);
        let step = step_back(&now, &before, 0.25).unwrap();
        assert_eq!(step.weight, [("a".to_owned(), 275), ("b".to_owned(), 725)]);
        assert_eq!(step_back(&now, &before, 1.0).unwrap(), before);
        assert_eq!(step_back(&now, &before, 0.0).unwrap().weight, now.weight);
    }

    #[test]
    fn a_spilled_origin_fades_with_the_shed() {
        let before = edit(&[("a", 1), ("b", 1)]);
        let now = edit(&[("a", 100), ("b", 500), ("c", 400)]);
        let step = step_back(&now, &before, 0.5).unwrap();
        assert_eq!(step.origins, ["a", "b", "c"]);
        assert_eq!(step.weight_of("c"), 200);
        assert_eq!(step.weight_of("a"), 300);
        assert_eq!(step.weight_of("b"), 500);
        assert!(step.region().is_ok());
    }

    #[test]
    fn another_shard_is_not_given_back() {
        let before = edit(&[("a", 1)]);
        let mut now = edit(&[("a", 1)]);
        now.shard = "us".into();
        assert!(step_back(&now, &before, 0.5).is_none());
    }
}
