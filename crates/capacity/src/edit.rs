//! A region's new value as a plan proposes it ([`RegionEdit`]), and the weight arithmetic
//! the plans share (renormalising to an exact total, as `dwctl drain` does).

use dw_routing::Region;

use crate::error::{Error, shown};

/// What the weights of a region sum to after a drain (as `dwctl drain` renormalises).
pub const DRAIN_TOTAL: u32 = 100;

/// What the weights of a region sum to after a shed: finer than a drain's 100, so that a
/// shed can move an origin's share in steps of 0.1 %.
pub const SHED_TOTAL: u32 = 1000;

/// A region's routing fields as a plan would write them. The caller keeps the value's
/// other fields; unlisted weight entries are dropped (as a drain drops them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegionEdit {
    /// The region's geo, relative to `region/` (`DE`, `US-CA`, `continent/EU`).
    pub geo: String,
    /// The shard, unchanged.
    pub shard: String,
    /// The listed origins, in order.
    pub origins: Vec<String>,
    /// The whole weight object, in the order of `origins`.
    pub weight: Vec<(String, u32)>,
}

impl RegionEdit {
    /// The region value as JSON (`{"shard":..,"origins":[..],"weight":{..}}`).
    pub fn to_json(&self) -> String {
        let weight: serde_json::Map<String, serde_json::Value> = self
            .weight
            .iter()
            .map(|(name, weight)| (name.clone(), serde_json::Value::from(*weight)))
            .collect();
        serde_json::json!({"shard": self.shard, "origins": self.origins, "weight": weight})
            .to_string()
    }

    /// The region this value is, validated as the nodes validate it.
    pub fn region(&self) -> Result<Region, Error> {
        Region::parse(self.to_json().as_bytes()).map_err(|error| {
            Error::invalid(
                "region",
                format!(
                    "the planned value of {} is invalid: {error}",
                    shown(&self.geo)
                ),
            )
        })
    }

    /// The weight of `origin` in this value (0 when it has none).
    pub fn weight_of(&self, origin: &str) -> u32 {
        self.weight
            .iter()
            .find(|(name, _)| name == origin)
            .map_or(0, |(_, weight)| *weight)
    }

    /// The value a region has today, as an edit (listed origins, their weights).
    pub fn of_region(geo: &str, region: &Region) -> RegionEdit {
        RegionEdit {
            geo: geo.to_owned(),
            shard: region.shard().to_owned(),
            origins: region.origins().to_vec(),
            weight: region
                .origins()
                .iter()
                .map(|origin| (origin.clone(), region.weight(origin)))
                .collect(),
        }
    }
}

/// Scales `weights` (in the given order) so that they sum to exactly `target`: the one
/// renormalisation of the workspace (dwctl's drains and sheds, dw-ctl-plan's planners and
/// this crate's predicted edits all call it, so a drain predicted here is what `dwctl
/// drain` writes).
///
/// `round(w * 100 / total)` does not always sum to 100 (three equal weights give 33+33+33),
/// and a weight map that sums to 99 or 101 surprises every reader that treats weights as
/// percentages; the largest-remainder method always lands on the exact total. Each entry
/// first gets the floor of its exact share; the units still missing go one each to the
/// entries with the largest remainders, ties broken by position (earlier first), so the
/// result depends on nothing but the input. An entry of weight 0 stays 0. Returns `None`
/// when the weights sum to 0 (there is nothing to scale). No overflow: each product is at
/// most `u32::MAX * u32::MAX`, held in a `u64`.
pub fn renormalise(weights: &[(String, u32)], target: u32) -> Option<Vec<(String, u32)>> {
    let total: u64 = weights.iter().map(|(_, weight)| u64::from(*weight)).sum();
    if total == 0 {
        return None;
    }
    let target = u64::from(target);
    let mut scaled: Vec<(u64, u64)> = weights
        .iter()
        .map(|(_, weight)| {
            let exact = u64::from(*weight) * target;
            (exact / total, exact % total)
        })
        .collect();
    let assigned: u64 = scaled.iter().map(|(floor, _)| floor).sum();
    let mut missing = target - assigned;
    let mut by_remainder: Vec<usize> = (0..scaled.len()).collect();
    // A stable sort keeps the input order among equal remainders.
    by_remainder.sort_by(|a, b| scaled[*b].1.cmp(&scaled[*a].1));
    for index in by_remainder {
        if missing == 0 {
            break;
        }
        scaled[index].0 += 1;
        missing -= 1;
    }
    Some(
        weights
            .iter()
            .zip(scaled)
            .map(|((name, _), (weight, _))| (name.clone(), weight as u32))
            .collect(),
    )
}

/// The region without `origin`, the others renormalised to [`DRAIN_TOTAL`] (what `dwctl
/// drain` writes); `None` when no other listed origin has weight.
pub fn drained(geo: &str, region: &Region, origin: &str) -> Option<RegionEdit> {
    let remaining: Vec<(String, u32)> = region
        .origins()
        .iter()
        .filter(|name| *name != origin)
        .map(|name| (name.clone(), region.weight(name)))
        .collect();
    let weight = renormalise(&remaining, DRAIN_TOTAL)
        .filter(|weights| weights.iter().any(|(_, weight)| *weight > 0))?;
    Some(RegionEdit {
        geo: geo.to_owned(),
        shard: region.shard().to_owned(),
        origins: remaining.into_iter().map(|(name, _)| name).collect(),
        weight,
    })
}

/// The region with `origin` at `share` of [`SHED_TOTAL`] (1 to `SHED_TOTAL - 1`), the other
/// listed origins scaled to the rest; `None` when no other listed origin has weight.
pub(crate) fn with_share(
    geo: &str,
    region: &Region,
    origin: &str,
    share: u32,
) -> Option<RegionEdit> {
    let others: Vec<(String, u32)> = region
        .origins()
        .iter()
        .filter(|name| *name != origin)
        .map(|name| (name.clone(), region.weight(name)))
        .collect();
    let scaled = renormalise(&others, SHED_TOTAL.checked_sub(share)?)?;
    let weight = region
        .origins()
        .iter()
        .map(|name| {
            if name == origin {
                (name.clone(), share)
            } else {
                let weight = scaled
                    .iter()
                    .find(|(other, _)| other == name)
                    .map_or(0, |(_, weight)| *weight);
                (name.clone(), weight)
            }
        })
        .collect();
    Some(RegionEdit {
        geo: geo.to_owned(),
        shard: region.shard().to_owned(),
        origins: region.origins().to_vec(),
        weight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(weights: &[(&str, u32)]) -> Vec<(String, u32)> {
        weights
            .iter()
            .map(|(name, weight)| (name.to_string(), *weight))
            .collect()
    }

    #[test]
    fn three_equal_weights_sum_to_100_with_the_first_getting_the_extra_unit() {
        let result = renormalise(&named(&[("a", 1), ("b", 1), ("c", 1)]), 100).unwrap();
        assert_eq!(result, named(&[("a", 34), ("b", 33), ("c", 33)]));
    }

    #[test]
    fn largest_remainder_wins_over_position() {
        // Exact shares 14.28.., 28.57.., 57.14..: remainders .28, .57, .14.
        let result = renormalise(&named(&[("a", 1), ("b", 2), ("c", 4)]), 100).unwrap();
        assert_eq!(result, named(&[("a", 14), ("b", 29), ("c", 57)]));
    }

    #[test]
    fn zero_weights_stay_zero_and_all_zero_is_none() {
        let result = renormalise(&named(&[("a", 0), ("b", 3)]), 100).unwrap();
        assert_eq!(result, named(&[("a", 0), ("b", 100)]));
        assert_eq!(renormalise(&named(&[("a", 0)]), 100), None);
        assert_eq!(renormalise(&[], 100), None);
    }

    #[test]
    fn always_sums_to_the_target() {
        let mut seed = 0x9e37_79b9_u32;
        for case in 0..2000 {
            let count = 1 + case % 7;
            let weights: Vec<(String, u32)> = (0..count)
                .map(|index| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    (format!("o{index}"), seed % 1_000_001)
                })
                .collect();
            let target = [100, 70, 1, 0][case % 4];
            if let Some(result) = renormalise(&weights, target) {
                let sum: u32 = result.iter().map(|(_, weight)| weight).sum();
                assert_eq!(sum, target, "{weights:?}");
            }
        }
    }

    #[test]
    fn the_largest_weights_and_target_neither_overflow_nor_miss_the_total() {
        // The edge of the arithmetic: u32::MAX * u32::MAX fits a u64, and the sum of the
        // weights (up to 2 * u32::MAX here) too.
        let result = renormalise(&named(&[("a", u32::MAX), ("b", u32::MAX)]), u32::MAX).unwrap();
        assert_eq!(
            result,
            named(&[("a", u32::MAX / 2 + 1), ("b", u32::MAX / 2)])
        );
        let result = renormalise(&named(&[("a", u32::MAX), ("b", 1)]), 100).unwrap();
        assert_eq!(result, named(&[("a", 100), ("b", 0)]));
    }

    #[test]
    fn drained_and_with_share_values() {
        let region = Region::parse(
            br#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":30,"c":20,"old":9}}"#,
        )
        .unwrap();
        let value = drained("DE", &region, "a").unwrap();
        assert_eq!(value.origins, ["b", "c"]);
        assert_eq!(value.weight, named(&[("b", 60), ("c", 40)]));
        assert!(value.region().is_ok());
        let shed = with_share("DE", &region, "a", 250).unwrap();
        assert_eq!(shed.weight, named(&[("a", 250), ("b", 450), ("c", 300)]));
        assert_eq!(shed.weight_of("a"), 250);
        let alone =
            Region::parse(br#"{"shard":"s","origins":["a","b"],"weight":{"a":1,"b":0}}"#).unwrap();
        assert!(drained("X", &alone, "a").is_none());
        assert!(with_share("X", &alone, "a", 10).is_none());
        let json = RegionEdit::of_region("DE", &region).to_json();
        assert_eq!(
            json,
            r#"{"shard":"eu-1","origins":["a","b","c"],"weight":{"a":50,"b":30,"c":20}}"#
        );
    }
}
