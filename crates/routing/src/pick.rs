//! The two ways of choosing one origin of a region for a hash key.
//!
//! Both return an index into `region.origins()`; the public functions turn it into the name.
//! Neither allocates.

use xxhash_rust::xxh3::{Xxh3Default, xxh3_64};

use crate::Region;

/// The original router's pick, bit for bit:
///
/// ```php
/// $point = crc32($hashKey . implode('', $origins)) % (array_sum($weights) ?: 1);
/// foreach ($origins as $o) { $point -= $weights[$o] ?? 0; if ($point < 0) return $o; }
/// return $origins[0];
/// ```
///
/// `array_sum` counts every weight entry, listed origins or not, so the walk can run off
/// the end; it then answers the first origin, as the original did.
pub fn legacy_pick<'r>(region: &'r Region, hash_key: &[u8]) -> &'r str {
    &region.origins()[legacy_index(region, hash_key)]
}

/// Weighted rendezvous (highest random weight) hashing: each listed origin `o` with weight
/// `w > 0` scores `w / -ln(u)`, where `u = ((xxh3_64(key . "\0" . o) >> 12) + 0.5) / 2^52`;
/// the highest score wins, the earlier listed origin on an exact tie.
///
/// Removing an origin moves only the keys that were on it, and each origin's share of many
/// keys tends to its share of the weight.
pub fn rendezvous_pick<'r>(region: &'r Region, hash_key: &[u8]) -> &'r str {
    &region.origins()[rendezvous_index(region, hash_key)]
}

#[inline(always)]
pub(crate) fn legacy_index(region: &Region, hash_key: &[u8]) -> usize {
    // crc32($hashKey . implode('', $origins)), the origins' part hashed in advance.
    let crc = region.joined_suffix().checksum_after(hash_key);
    // `?: 1` in PHP; a valid region always has a positive sum, but the guard costs nothing.
    let mut point = u64::from(crc) % region.weight_sum().max(1);
    for (index, &weight) in region.listed_weights().iter().enumerate() {
        // PHP: `$point -= $w; if ($point < 0)`, i.e. the point falls inside this weight.
        if point < u64::from(weight) {
            return index;
        }
        point -= u64::from(weight);
    }
    0
}

/// Keys up to this long (with the separator and the origin) are hashed from a stack buffer
/// in one shot; longer ones go through the streaming hasher, which gives the same digest.
const STACK_INPUT: usize = 128;

/// 2^52, as the divisor that maps a 52-bit integer into (0, 1) exactly.
const TWO_POW_52: f64 = 4_503_599_627_370_496.0;

pub(crate) fn rendezvous_index(region: &Region, hash_key: &[u8]) -> usize {
    let mut buffer = [0u8; STACK_INPUT];
    let prefix_len = hash_key.len() + 1;
    let buffered = prefix_len < STACK_INPUT;
    if buffered {
        buffer[..hash_key.len()].copy_from_slice(hash_key);
        // buffer[hash_key.len()] is already the "\0" separator.
    }

    let weights = region.listed_weights();
    let scores = region
        .origins()
        .iter()
        .zip(weights)
        .enumerate()
        .filter(|&(_, (_, &weight))| weight > 0)
        .map(|(index, (origin, &weight))| {
            let origin = origin.as_bytes();
            let digest = if buffered && prefix_len + origin.len() <= STACK_INPUT {
                buffer[prefix_len..prefix_len + origin.len()].copy_from_slice(origin);
                xxh3_64(&buffer[..prefix_len + origin.len()])
            } else {
                let mut hasher = Xxh3Default::new();
                hasher.update(hash_key);
                hasher.update(b"\0");
                hasher.update(origin);
                hasher.digest()
            };
            (index, rendezvous_score(digest, weight))
        });
    highest_score(scores)
}

/// The index with the greatest score; on an exact tie the first one (strictly greater
/// replaces). 0 when there is none, which a valid region never produces.
fn highest_score(scores: impl Iterator<Item = (usize, f64)>) -> usize {
    let mut best: Option<(usize, f64)> = None;
    for (index, score) in scores {
        if best.is_none_or(|(_, best_score)| score > best_score) {
            best = Some((index, score));
        }
    }
    best.map_or(0, |(index, _)| index)
}

/// `w / -ln(u)` with `u = (h + 0.5) / 2^52`, `h` the digest's top 52 bits. `h + 0.5` and the
/// division are exact in a double, so PHP computing the same expression gets the same bits.
fn rendezvous_score(digest: u64, weight: u32) -> f64 {
    let top = (digest >> 12) as f64;
    let unit = (top + 0.5) / TWO_POW_52;
    f64::from(weight) / -unit.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region(json: &str) -> Region {
        Region::parse(json.as_bytes()).unwrap()
    }

    fn fra() -> Region {
        region(r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":30}}"#)
    }
    fn abc() -> Region {
        region(r#"{"shard":"s","origins":["a","b","c"],"weight":{"a":1,"b":1,"c":1}}"#)
    }
    /// `old-x` is not listed but still counts in the sum (1,000,020).
    fn unlisted() -> Region {
        region(
            r#"{"shard":"us-1","origins":["iad-a","iad-b"],
                "weight":{"iad-a":10,"iad-b":10,"old-x":1000000}}"#,
        )
    }
    fn zero() -> Region {
        region(r#"{"shard":"s","origins":["a","b"],"weight":{"a":0,"b":5}}"#)
    }
    fn five() -> Region {
        region(
            r#"{"shard":"s","origins":["o1","o2","o3","o4","o5"],
                "weight":{"o1":100,"o2":200,"o3":300,"o4":400,"o5":500}}"#,
        )
    }

    /// Expected answers computed with PHP 8.4's crc32() running the original expression
    /// (`crc32($key . implode('', $origins)) % (array_sum($weights) ?: 1)` and the walk).
    #[test]
    fn legacy_pick_matches_php() {
        let long_key = "k".repeat(10_000);
        let cases: [(Region, &[u8], &str); 13] = [
            (fra(), b"DE", "fra-b"),           // crc 2168935897, point 57 of 80
            (fra(), b"GB", "fra-a"),           // crc 3756167850, point 10
            (fra(), b"visitor-1", "fra-a"),    // point 8
            (fra(), b"", "fra-a"),             // point 34
            (fra(), b"\0x\xff", "fra-a"),      // point 22
            (abc(), b"US", "b"),               // point 1 of 3
            (abc(), b"FR", "a"),               // point 0
            (abc(), long_key.as_bytes(), "b"), // point 1
            // Points 153112 and 699679 of 1000020 run off the listed weights: the first
            // origin answers. Without `old-x` in the sum they would pick iad-b.
            (unlisted(), b"US", "iad-a"),
            (unlisted(), b"visitor-42", "iad-a"),
            (zero(), b"JP", "b"), // point 0 of 5: a's weight 0 never takes a point
            (five(), b"session-7", "o3"), // point 576 of 1500
            (five(), b"BR", "o2"), // point 166
        ];
        for (region, key, expected) in &cases {
            assert_eq!(
                legacy_pick(region, key),
                *expected,
                "key {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    /// Expected answers computed with PHP 8.4 running the documented expression:
    /// `hexdec(substr(hash('xxh3', $key . "\0" . $o), 0, 13))`, `$w / -log(($h + 0.5) / 2 ** 52)`.
    #[test]
    fn rendezvous_pick_matches_php() {
        let long_key = "k".repeat(300); // longer than the stack buffer: the streaming path
        let cases: [(Region, &[u8], &str); 8] = [
            (fra(), b"DE", "fra-b"),
            (fra(), b"visitor-1", "fra-b"),
            (abc(), b"US", "b"),
            (abc(), b"", "a"),
            (five(), b"session-7", "o3"),
            (five(), long_key.as_bytes(), "o1"),
            (zero(), b"JP", "b"),
            (five(), b"\0\xff", "o5"),
        ];
        for (region, key, expected) in &cases {
            assert_eq!(
                rendezvous_pick(region, key),
                *expected,
                "key {:?}",
                String::from_utf8_lossy(key)
            );
        }
    }

    #[test]
    fn rendezvous_score_is_bit_for_bit_php() {
        // PHP 8.4: hash('xxh3', "DE\0fra-a") = 040c3382e228a80c, h = 71207205347978,
        // 50 / -log(($h + 0.5) / 2 ** 52) printed with %.17g = 12.056797369825203.
        let digest = 0x040c_3382_e228_a80c;
        assert_eq!(xxh3_64(b"DE\0fra-a"), digest);
        assert_eq!(digest >> 12, 71_207_205_347_978);
        assert_eq!(
            rendezvous_score(digest, 50).to_bits(),
            12.056_797_369_825_203_f64.to_bits()
        );
    }

    #[test]
    fn streaming_and_buffered_hashing_agree() {
        let region = five();
        // Around the buffer's edge, both paths must pick as the one-shot hash would.
        for len in STACK_INPUT - 8..STACK_INPUT + 8 {
            let key = vec![b'k'; len];
            let expected = region
                .origins()
                .iter()
                .enumerate()
                .map(|(index, origin)| {
                    let mut input = key.clone();
                    input.push(0);
                    input.extend_from_slice(origin.as_bytes());
                    (
                        index,
                        rendezvous_score(xxh3_64(&input), region.listed_weights()[index]),
                    )
                })
                .fold(
                    (0, f64::MIN),
                    |best, next| if next.1 > best.1 { next } else { best },
                )
                .0;
            assert_eq!(
                rendezvous_index(&region, &key),
                expected,
                "key length {len}"
            );
        }
    }

    #[test]
    fn the_highest_score_wins_and_the_earlier_origin_keeps_a_tie() {
        assert_eq!(highest_score([(0, 1.0), (1, 2.0), (2, 0.5)].into_iter()), 1);
        assert_eq!(highest_score([(0, 1.0), (1, 1.0)].into_iter()), 0);
        assert_eq!(highest_score([(1, 3.0), (3, 3.0), (4, 2.0)].into_iter()), 1);
        assert_eq!(highest_score(std::iter::empty()), 0);
    }
}
