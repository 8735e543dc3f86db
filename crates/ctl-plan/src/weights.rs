//! Renormalising weights to an exact total with the largest-remainder method.
//!
//! `round(w * 100 / total)` does not always sum to 100 (three equal weights give 33+33+33),
//! and a weight map that sums to 99 or 101 surprises every reader that treats weights as
//! percentages. Largest remainder always lands on the exact total.

/// Scales `weights` (in the given order) so that they sum to exactly `target`.
///
/// Each entry first gets the floor of its exact share; the units still missing go one each
/// to the entries with the largest remainders, ties broken by position (earlier first), so
/// the result depends on nothing but the input. An entry of weight 0 stays 0. Returns
/// `None` when the weights sum to 0 (there is nothing to scale).
pub fn renormalise(weights: &[(String, u32)], target: u32) -> Option<Vec<(String, u32)>> {
    let total: u64 = weights.iter().map(|(_, weight)| u64::from(*weight)).sum();
    if total == 0 {
        return None;
    }
    let target = u64::from(target);
    let mut scaled: Vec<(String, u64, u64)> = weights
        .iter()
        .map(|(name, weight)| {
            let exact = u64::from(*weight) * target;
            (name.clone(), exact / total, exact % total)
        })
        .collect();
    let assigned: u64 = scaled.iter().map(|(_, floor, _)| floor).sum();
    let mut missing = target - assigned;
    let mut by_remainder: Vec<usize> = (0..scaled.len()).collect();
    // A stable sort keeps the input order among equal remainders.
    by_remainder.sort_by(|a, b| scaled[*b].2.cmp(&scaled[*a].2));
    for index in by_remainder {
        if missing == 0 {
            break;
        }
        scaled[index].1 += 1;
        missing -= 1;
    }
    Some(
        scaled
            .into_iter()
            .map(|(name, weight, _)| (name, weight as u32))
            .collect(),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Owned (name, weight) pairs from literals.
    pub(crate) fn named(weights: &[(&str, u32)]) -> Vec<(String, u32)> {
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
}
