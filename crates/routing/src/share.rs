//! Each origin's exact share of a region's sticky keys: the fraction of uniformly random
//! hash keys that [`crate::legacy_pick`] or [`crate::rendezvous_pick`] sends to each listed
//! origin. Capacity planning (`dw-capacity`) splits a geo's sticky traffic by it.
//!
//! - Legacy: the point is `crc32(key . joined) % S` with `S` the sum of *every* weight entry,
//!   listed or not. Taking crc32 as uniform over its 2^32 values, origin `i` owns the
//!   points of its interval `[a_i, a_i + w_i)` (`a_i` the sum of the listed weights before
//!   it), and each point `p < S` is hit by `floor(2^32 / S)` values, plus one more when
//!   `p < 2^32 mod S`. The points past the listed weights (unlisted entries) run off the
//!   walk and answer the first origin. So the share is an exact count out of 2^32, computed
//!   in integers ([`legacy_point_counts`]); it is *not* `w_i / sum(listed w)`.
//! - Rendezvous: `w_i / -ln(u_i)` with `u_i` uniform is a race of exponential variables,
//!   which origin `i` wins with probability `w_i / sum(w)` over the listed origins of
//!   positive weight (exact for continuous `u`; the pick's `u` has 2^52 steps).
//!
//! A weight-0 origin's share is 0 under both picks (legacy: an empty interval, unless it is
//! the first origin and unlisted entries run off the walk to it).

use crate::{PickMode, Region};

/// How many values crc32 can take: the legacy pick's shares are counts out of this.
pub const LEGACY_POINTS: u64 = 1 << 32;

/// For each listed origin (in list order), how many of the [`LEGACY_POINTS`] crc32 values
/// the legacy pick sends to it; they sum to exactly [`LEGACY_POINTS`].
///
/// ```
/// use dw_routing::{LEGACY_POINTS, Region, legacy_point_counts};
///
/// // `old` is not listed but counts in the modulus: its points answer the first origin.
/// let region = Region::parse(br#"{"shard":"s","origins":["a","b"],"weight":{"a":1,"b":1,"old":2}}"#)?;
/// assert_eq!(legacy_point_counts(&region), [3 * LEGACY_POINTS / 4, LEGACY_POINTS / 4]);
/// # Ok::<(), dw_routing::Error>(())
/// ```
pub fn legacy_point_counts(region: &Region) -> Vec<u64> {
    legacy_counts_over(region.listed_weights(), region.weight_sum(), LEGACY_POINTS)
}

/// The legacy counts for a hash of `points` equally likely values (2^32 for crc32), the
/// modulus `sum` and the listed weights: exposed to the tests with a small `points`, so
/// that they can be checked against enumerating every value.
pub(crate) fn legacy_counts_over(listed: &[u32], sum: u64, points: u64) -> Vec<u64> {
    let sum = u128::from(sum.max(1));
    let points = u128::from(points);
    let (per_point, extra_below) = (points / sum, points % sum);
    // How many values land on the points [start, end) of [0, sum).
    let values = |start: u128, end: u128| -> u128 {
        let with_extra = end.min(extra_below).saturating_sub(start.min(extra_below));
        (end - start) * per_point + with_extra
    };
    let mut counts = Vec::with_capacity(listed.len());
    let mut start = 0u128;
    for &weight in listed {
        let end = (start + u128::from(weight)).min(sum);
        counts.push(values(start, end));
        start = end;
    }
    if let Some(first) = counts.first_mut() {
        *first += values(start, sum);
    }
    // Each count is at most `points` (a u64 value): the conversion cannot fail.
    counts
        .into_iter()
        .map(|count| u64::try_from(count).unwrap_or(u64::MAX))
        .collect()
}

/// Each listed origin's share (in list order) of uniformly random sticky keys under
/// `mode`: [`legacy_point_counts`] over 2^32, or `w / sum(positive listed w)` for
/// rendezvous. The shares sum to 1 (within rounding).
///
/// ```
/// use dw_routing::{PickMode, Region, pick_shares};
///
/// let region = Region::parse(br#"{"shard":"s","origins":["a","b","c"],"weight":{"a":1,"b":0,"c":3}}"#)?;
/// assert_eq!(pick_shares(&region, PickMode::Rendezvous), [0.25, 0.0, 0.75]);
/// let legacy = pick_shares(&region, PickMode::Legacy);
/// assert!((legacy[0] - 0.25).abs() < 1e-9 && legacy[1] == 0.0);
/// # Ok::<(), dw_routing::Error>(())
/// ```
pub fn pick_shares(region: &Region, mode: PickMode) -> Vec<f64> {
    match mode {
        PickMode::Legacy => legacy_point_counts(region)
            .into_iter()
            .map(|count| count as f64 / LEGACY_POINTS as f64)
            .collect(),
        PickMode::Rendezvous => {
            let listed = region.listed_weights();
            let total: u64 = listed.iter().map(|&weight| u64::from(weight)).sum();
            let total = total.max(1) as f64;
            listed
                .iter()
                .map(|&weight| f64::from(weight) / total)
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{legacy_pick, rendezvous_pick};

    fn region(json: &str) -> Region {
        Region::parse(json.as_bytes()).unwrap()
    }

    /// The walk of `legacy_index` applied to a point, written again from PHP's loop.
    fn walk(listed: &[u32], point: u64) -> usize {
        let mut point = point as i64;
        for (index, &weight) in listed.iter().enumerate() {
            point -= i64::from(weight);
            if point < 0 {
                return index;
            }
        }
        0
    }

    /// Every value of a `points`-valued hash, taken mod `sum` and walked.
    fn enumerate(listed: &[u32], sum: u64, points: u64) -> Vec<u64> {
        let mut counts = vec![0u64; listed.len()];
        for value in 0..points {
            counts[walk(listed, value % sum.max(1))] += 1;
        }
        counts
    }

    /// Small deterministic pseudo-random numbers (xorshift), so the test needs no crate.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, bound: u64) -> u64 {
            self.next() % bound
        }
    }

    #[test]
    fn legacy_counts_equal_enumerating_every_hash_value() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut cases = 0;
        for _ in 0..400 {
            let listed: Vec<u32> = (0..1 + rng.below(5))
                .map(|_| rng.below(12) as u32)
                .collect();
            let unlisted = if rng.below(3) == 0 { rng.below(9) } else { 0 };
            let sum = listed.iter().map(|&w| u64::from(w)).sum::<u64>() + unlisted;
            if sum == 0 {
                continue;
            }
            // A hash of `points` values, fewer, as many as or more than the points of the
            // modulus, including sums that do not divide it.
            let points = 1 + rng.below(4 * sum + 40);
            let expected = enumerate(&listed, sum, points);
            assert_eq!(
                legacy_counts_over(&listed, sum, points),
                expected,
                "listed {listed:?}, sum {sum}, points {points}"
            );
            assert_eq!(expected.iter().sum::<u64>(), points);
            cases += 1;
        }
        assert!(cases > 300);
    }

    #[test]
    fn legacy_counts_over_2_pow_32_by_whole_periods() {
        // 2^32 values mod S: each point is hit once per whole period of S values, and the
        // last, partial period hits the points below 2^32 mod S once more. Counted here
        // period by period for every point, independently of the interval arithmetic.
        for (json, sum) in [
            (
                r#"{"shard":"s","origins":["a","b"],"weight":{"a":50,"b":30}}"#,
                80,
            ),
            (
                r#"{"shard":"s","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#,
                3,
            ),
            (
                r#"{"shard":"s","origins":["x","y"],"weight":{"x":10,"y":7,"old":1000}}"#,
                1017,
            ),
            (
                r#"{"shard":"s","origins":["x","y","z"],"weight":{"x":0,"y":999983,"z":13}}"#,
                999_996,
            ),
        ] {
            let region = region(json);
            let listed = region.listed_weights();
            let mut expected = vec![0u64; listed.len()];
            let (periods, partial) = (LEGACY_POINTS / sum, LEGACY_POINTS % sum);
            for point in 0..sum {
                let hits = periods + u64::from(point < partial);
                expected[walk(listed, point)] += hits;
            }
            assert_eq!(legacy_point_counts(&region), expected, "{json}");
            assert_eq!(expected.iter().sum::<u64>(), LEGACY_POINTS);
        }
    }

    #[test]
    fn a_modulus_beyond_2_pow_32_leaves_the_high_points_unhit() {
        // 5,000 entries of 1,000,000: S = 5e9 > 2^32, so the points >= 2^32 are never hit
        // and each point below is hit once.
        let mut listed = vec![1_000_000u32; 5_000];
        listed[0] = 1;
        let sum: u64 = listed.iter().map(|&w| u64::from(w)).sum();
        assert!(sum > LEGACY_POINTS);
        let counts = legacy_counts_over(&listed, sum, LEGACY_POINTS);
        assert_eq!(counts.iter().sum::<u64>(), LEGACY_POINTS);
        assert_eq!(counts[0], 1);
        assert_eq!(counts[1], 1_000_000);
        let last_hit = (LEGACY_POINTS - 1 - 1) / 1_000_000 + 1; // origin holding point 2^32-1
        assert!(counts[last_hit as usize] > 0 && counts[last_hit as usize + 1] == 0);
    }

    #[test]
    fn zero_weight_and_unlisted_origins() {
        let zero = region(r#"{"shard":"s","origins":["a","b"],"weight":{"a":0,"b":5}}"#);
        assert_eq!(legacy_point_counts(&zero), [0, LEGACY_POINTS]);
        assert_eq!(pick_shares(&zero, PickMode::Rendezvous), [0.0, 1.0]);
        // A weight-0 first origin still takes the run-off of unlisted entries.
        let runoff = region(r#"{"shard":"s","origins":["a","b"],"weight":{"a":0,"b":1,"gone":3}}"#);
        assert_eq!(
            legacy_point_counts(&runoff),
            [3 * LEGACY_POINTS / 4, LEGACY_POINTS / 4]
        );
        assert_eq!(pick_shares(&runoff, PickMode::Rendezvous), [0.0, 1.0]);
        // A listed origin the weight object does not name has weight 0.
        let unnamed = region(r#"{"shard":"s","origins":["a","b","c"],"weight":{"a":1,"c":1}}"#);
        assert_eq!(
            legacy_point_counts(&unnamed),
            [LEGACY_POINTS / 2, 0, LEGACY_POINTS / 2]
        );
    }

    /// `n` picks of distinct keys; each origin's count must be within 5 standard
    /// deviations of `n * share` (binomial; a false failure has odds below 1 in 10^6 per
    /// origin), plus 1 for rounding.
    fn assert_close_to_shares(region: &Region, mode: PickMode, seed: u64) {
        let shares = pick_shares(region, mode);
        let n = 200_000u32;
        let mut counts = vec![0u32; shares.len()];
        let mut rng = Rng(seed);
        for _ in 0..n {
            let key = format!("visitor-{:016x}", rng.next());
            let origin = match mode {
                PickMode::Legacy => legacy_pick(region, key.as_bytes()),
                PickMode::Rendezvous => rendezvous_pick(region, key.as_bytes()),
            };
            let index = region.origins().iter().position(|o| o == origin).unwrap();
            counts[index] += 1;
        }
        for (index, (&count, &share)) in counts.iter().zip(&shares).enumerate() {
            let expected = f64::from(n) * share;
            let sigma = (f64::from(n) * share * (1.0 - share)).sqrt();
            assert!(
                (f64::from(count) - expected).abs() <= 5.0 * sigma + 1.0,
                "{mode:?} origin {index}: {count} picks, expected {expected:.0} ± {:.0}",
                5.0 * sigma
            );
            if share == 0.0 {
                assert_eq!(count, 0, "a share of 0 is never picked");
            }
        }
    }

    #[test]
    fn real_keys_follow_the_legacy_shares() {
        for (seed, json) in [
            (
                1,
                r#"{"shard":"s","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#,
            ),
            // Unlisted weight: the run-off makes `a` take 0.9, not its listed 0.5.
            (
                2,
                r#"{"shard":"s","origins":["a","b"],"weight":{"a":1,"b":1,"gone":8}}"#,
            ),
            (
                3,
                r#"{"shard":"s","origins":["a","b","c"],"weight":{"a":7,"b":0,"c":2}}"#,
            ),
        ] {
            let region = region(json);
            assert_close_to_shares(&region, PickMode::Legacy, seed);
        }
        let runoff = region(r#"{"shard":"s","origins":["a","b"],"weight":{"a":1,"b":1,"gone":8}}"#);
        assert!((pick_shares(&runoff, PickMode::Legacy)[0] - 0.9).abs() < 1e-9);
    }

    #[test]
    fn real_keys_follow_the_rendezvous_shares() {
        for (seed, json) in [
            (
                4,
                r#"{"shard":"s","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#,
            ),
            (
                5,
                r#"{"shard":"s","origins":["a","b","c"],"weight":{"a":1,"b":0,"c":3,"gone":9}}"#,
            ),
            (
                6,
                r#"{"shard":"s","origins":["o1","o2","o3","o4","o5"],"weight":{"o1":100,"o2":200,"o3":300,"o4":400,"o5":500}}"#,
            ),
        ] {
            let region = region(json);
            assert_close_to_shares(&region, PickMode::Rendezvous, seed);
        }
    }
}
