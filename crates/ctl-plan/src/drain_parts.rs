//! Each source's part of a drain record, and the composition rule (pure, no I/O).
//!
//! A drain record (`crate::drain_record`) keeps, per region, the *configured* value (the
//! value before any part touched the region) and the value dwctl last wrote. Each source
//! that drained or shed the origin (`cli`, `health`, `rebalance`, `autopilot`) keeps a
//! [`Part`]: what it did in each region as an [`Effect`] on the origin's share, with its
//! own reason, by and at, and its shed steps.
//!
//! **The composition rule** ([`compose`]): a region's value is its configured value with
//! the effects of the parts applied one after the other, in the order the parts were
//! taken (a part that acts again moves to the end: its effect is taken against the others
//! then). An effect on the origin's share `s` (its weight over the region's total):
//!
//! - keeps `s × factor` for the origin. `factor` 0 is a drain: the origin leaves the
//!   region's list; a drain wins over every shed of the same origin (a shed after it finds
//!   nothing to take, one before it is taken away with the rest). `factor` in (0, 1) is a
//!   shed: sheds compose multiplicatively, as `combined_percent` says (30 % then 30 % keeps
//!   49 %), in any order;
//! - gives each spill origin `spill[x]` of what it freed (`s × (1 − factor)`), and the
//!   other origins the rest, in proportion to their weights;
//! - a drain of the last origin with weight deletes the key (`None`); a shed with nowhere
//!   to go moves nothing.
//!
//! The weights are written over 100 ([`dw_capacity::DRAIN_TOTAL`]) when the origin is
//! drained and nothing was shed, else over [`dw_capacity::SHED_TOTAL`], by the largest
//! remainder; a region with drains only is exactly what `dwctl drain` writes on the
//! configured value. Restoring source S writes the configured value with the *other*
//! parts' effects applied ([`compose`] without S); with no other part it is the configured
//! value itself.

use std::collections::BTreeMap;

use dw_capacity::{DRAIN_TOTAL, SHED_TOTAL, renormalise};
use serde::{Deserialize, Serialize};

use crate::shed_record::ShedInfo;
use crate::value::RegionValue;

/// The most parts a record keeps: one per source, and there are four sources.
pub const MAX_PARTS: usize = 8;

/// One source's part of a drain record (schema 4).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Who: `cli`, `rebalance`, `health` or `autopilot`.
    pub source: String,
    /// Why, as the source's last action said.
    pub reason: String,
    /// The operator or automation instance of its last action.
    pub by: String,
    /// When its last action was, RFC 3339 UTC.
    pub at: String,
    /// geo → what this part did there.
    pub regions: BTreeMap<String, Effect>,
    /// The part's shed steps (absent for a drain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shed: Option<ShedInfo>,
    /// An automatic drain's predicted load (see `DrainRecord::predicted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<serde_json::Value>,
}

/// What one part did to the origin's share in one region.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// The share kept, from 0 (drained) to below 1 (shed).
    pub factor: f64,
    /// Spill: origin → its fraction of the share this effect freed (their sum at most 1).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spill: BTreeMap<String, f64>,
}

impl Effect {
    /// A drain: the origin taken out, nothing spilled.
    pub fn drained() -> Effect {
        Effect {
            factor: 0.0,
            spill: BTreeMap::new(),
        }
    }

    /// Whether it drains the origin (factor 0).
    pub fn drains(&self) -> bool {
        self.factor <= 0.0
    }

    /// Whether the numbers are ones [`compose`] reads: a factor in [0, 1), spill fractions
    /// in [0, 1] summing to at most 1, every number finite.
    pub fn is_valid(&self) -> bool {
        let factor = self.factor.is_finite() && (0.0..1.0).contains(&self.factor);
        let fractions = self
            .spill
            .values()
            .all(|fraction| fraction.is_finite() && (0.0..=1.0).contains(fraction));
        let sum: f64 = self.spill.values().sum();
        factor && fractions && sum <= 1.0 + 1e-9
    }
}

/// The effect that takes `before` to `after` for `origin` (`after` `None`: the key was
/// deleted, a drain): the origin's share kept, and the origins `after` lists that
/// `before` does not (a spill) with their share of what was freed.
pub fn effect_between(before: &RegionValue, after: Option<&RegionValue>, origin: &str) -> Effect {
    let Some(after) = after else {
        return Effect::drained();
    };
    if !after.lists(origin) {
        return Effect {
            factor: 0.0,
            spill: spill_between(before, after, origin, share(before, origin)),
        };
    }
    let (was, kept) = (share(before, origin), share(after, origin));
    let factor = if was > 0.0 {
        (kept / was).clamp(0.0, 1.0)
    } else {
        0.0
    };
    // A shed that kept everything (or more) is no shed: the least factor below 1 keeps
    // the origin listed.
    let factor = if factor >= 1.0 { 1.0 - 1e-9 } else { factor };
    let factor = if factor <= 0.0 { 1e-9 } else { factor };
    Effect {
        factor,
        spill: spill_between(before, after, origin, was - kept),
    }
}

fn spill_between(
    before: &RegionValue,
    after: &RegionValue,
    origin: &str,
    freed: f64,
) -> BTreeMap<String, f64> {
    if freed <= 0.0 {
        return BTreeMap::new();
    }
    let mut spill: BTreeMap<String, f64> = after
        .origins
        .iter()
        .filter(|name| *name != origin && !before.lists(name))
        .map(|name| (name.clone(), (share(after, name) / freed).clamp(0.0, 1.0)))
        .filter(|(_, fraction)| *fraction > 0.0)
        .collect();
    let sum: f64 = spill.values().sum();
    if sum > 1.0 {
        spill.values_mut().for_each(|fraction| *fraction /= sum);
    }
    spill
}

/// The share of `origin` in `value`: its weight over the listed origins' total.
pub fn share(value: &RegionValue, origin: &str) -> f64 {
    let total: u64 = value
        .listed_weights()
        .iter()
        .map(|(_, weight)| u64::from(*weight))
        .sum();
    if total == 0 || !value.lists(origin) {
        return 0.0;
    }
    f64::from(value.weight_of(origin)) / total as f64
}

/// The composition rule (see the module): `configured` with `effects` applied in order,
/// for `origin`. `None`: no origin is left with weight (the key is deleted). The shard
/// and unknown fields are `configured`'s.
pub fn compose(configured: &RegionValue, origin: &str, effects: &[&Effect]) -> Option<RegionValue> {
    if effects.is_empty() {
        return Some(configured.clone());
    }
    let mut order: Vec<String> = configured.origins.clone();
    let mut weights: BTreeMap<String, f64> = configured
        .listed_weights()
        .into_iter()
        .map(|(name, weight)| (name, f64::from(weight)))
        .collect();
    // Every origin but the ones an effect adds keeps its configured weight times `scale`:
    // dividing by it at the end gives them back their exact configured weights.
    let mut scale = 1.0;
    let mut shed = false;
    let mut applied = false;
    for effect in effects {
        let own = weights.get(origin).copied().unwrap_or(0.0);
        let total: f64 = weights.values().sum();
        if own <= 0.0 || total <= 0.0 || !order.iter().any(|name| name == origin) {
            continue;
        }
        let factor = effect.factor.clamp(0.0, 1.0);
        let kept = own * factor;
        let freed = own - kept;
        let spill: Vec<(&String, f64)> = effect
            .spill
            .iter()
            .filter(|(name, _)| name.as_str() != origin)
            .map(|(name, fraction)| (name, fraction.clamp(0.0, 1.0)))
            .collect();
        let spilled: f64 = spill
            .iter()
            .map(|(_, fraction)| fraction)
            .sum::<f64>()
            .min(1.0);
        let rest = freed * (1.0 - spilled);
        let others = total - own;
        if others <= 0.0 && rest > 0.0 {
            if factor > 0.0 {
                // A shed with nowhere to go moves nothing.
                continue;
            }
            if spilled <= 0.0 {
                // The last origin with weight drained: the key goes.
                return None;
            }
        }
        applied = true;
        if others > 0.0 {
            let grow = (others + rest) / others;
            scale *= grow;
            for (name, weight) in weights.iter_mut() {
                if name != origin {
                    *weight *= grow;
                }
            }
        }
        for (name, fraction) in spill {
            *weights.entry(name.clone()).or_insert(0.0) += freed * fraction / spilled.max(1.0);
            if !order.contains(name) {
                order.push(name.clone());
            }
        }
        if factor <= 0.0 {
            weights.remove(origin);
            order.retain(|name| name != origin);
        } else {
            weights.insert(origin.to_owned(), kept);
            shed = true;
        }
    }
    if !applied {
        return Some(configured.clone());
    }
    // A shed origin drained after all is a drain's region: over 100.
    if !order.iter().any(|name| name == origin) {
        shed = false;
    }
    let largest = weights.values().fold(0.0f64, |a, b| a.max(*b / scale));
    // As fine as u32 allows, at most 1,000 units per configured unit.
    let units = (f64::from(u32::MAX) / (largest.max(1.0) * 2.0))
        .floor()
        .clamp(1.0, 1000.0);
    let listed: Vec<(String, u32)> = order
        .iter()
        .map(|name| {
            let weight = weights.get(name).copied().unwrap_or(0.0) / scale * units;
            (
                name.clone(),
                weight.round().clamp(0.0, f64::from(u32::MAX)) as u32,
            )
        })
        .collect();
    let total = if shed { SHED_TOTAL } else { DRAIN_TOTAL };
    let weight =
        renormalise(&listed, total).filter(|weights| weights.iter().any(|(_, w)| *w > 0))?;
    Some(RegionValue {
        shard: configured.shard.clone(),
        origins: order,
        weight: weight.into_iter().collect(),
        extra: configured.extra.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::named;

    fn value(text: &str) -> RegionValue {
        RegionValue::from_stored(text.as_bytes()).unwrap()
    }

    fn shed(factor: f64) -> Effect {
        Effect {
            factor,
            spill: BTreeMap::new(),
        }
    }

    const ABC: &str = r#"{"shard":"eu","origins":["a","b","c"],"weight":{"a":40,"b":30,"c":30}}"#;

    #[test]
    fn no_effect_is_the_configured_value_itself() {
        let configured = value(ABC);
        assert_eq!(compose(&configured, "a", &[]), Some(configured));
    }

    #[test]
    fn a_drain_is_what_drain_writes_and_wins_over_any_shed() {
        let configured = value(ABC);
        let drained = compose(&configured, "a", &[&Effect::drained()]).unwrap();
        assert_eq!(drained.origins, ["b", "c"]);
        assert_eq!(drained.listed_weights(), named(&[("b", 50), ("c", 50)]));
        // Shed then drain, drain then shed: drained, the same weights.
        for effects in [
            [&shed(0.5), &Effect::drained()],
            [&Effect::drained(), &shed(0.5)],
        ] {
            assert_eq!(compose(&configured, "a", &effects), Some(drained.clone()));
        }
        // The last origin with weight drained: the key goes.
        let alone = value(r#"{"shard":"eu","origins":["a","b"],"weight":{"a":5,"b":0}}"#);
        assert_eq!(compose(&alone, "a", &[&Effect::drained()]), None);
        // ... and a shed of it moves nothing: the configured value.
        assert_eq!(compose(&alone, "a", &[&shed(0.5)]), Some(alone.clone()));
    }

    #[test]
    fn sheds_compose_multiplicatively_in_either_order() {
        let configured = value(ABC);
        let one = compose(&configured, "a", &[&shed(0.7), &shed(0.5)]).unwrap();
        let two = compose(&configured, "a", &[&shed(0.5), &shed(0.7)]).unwrap();
        assert_eq!(one, two);
        // a keeps 40 % × 0.35 = 14 %: 140 of 1,000; b and c share the rest equally.
        assert_eq!(
            one.listed_weights(),
            named(&[("a", 140), ("b", 430), ("c", 430)])
        );
    }

    #[test]
    fn a_spill_gets_its_fraction_of_what_was_freed() {
        let configured = value(ABC);
        let effect = Effect {
            factor: 0.5,
            spill: BTreeMap::from([("d".to_owned(), 0.5)]),
        };
        let value = compose(&configured, "a", &[&effect]).unwrap();
        // a: 200, d: 100, b and c: 350 each.
        assert_eq!(
            value.listed_weights(),
            named(&[("a", 200), ("b", 350), ("c", 350), ("d", 100)])
        );
        // The effect read back from the values is the same effect.
        let back = effect_between(&configured, Some(&value), "a");
        assert!((back.factor - 0.5).abs() < 1e-9, "{back:?}");
        assert!((back.spill["d"] - 0.5).abs() < 1e-9, "{back:?}");
    }

    #[test]
    fn effects_read_from_values_and_their_edges() {
        let configured = value(ABC);
        let drained = value(r#"{"shard":"eu","origins":["b","c"],"weight":{"b":1,"c":1}}"#);
        assert!(effect_between(&configured, Some(&drained), "a").drains());
        assert!(effect_between(&configured, None, "a").drains());
        let same = effect_between(&configured, Some(&configured), "a");
        assert!(same.factor < 1.0 && same.factor > 0.999, "{same:?}");
        assert!(same.is_valid());
        for bad in [
            shed(1.0),
            shed(-0.1),
            shed(f64::NAN),
            Effect {
                factor: 0.5,
                spill: BTreeMap::from([("d".to_owned(), 0.7), ("e".to_owned(), 0.7)]),
            },
        ] {
            assert!(!bad.is_valid(), "{bad:?}");
        }
    }
}
