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

pub(crate) fn legacy_index(region: &Region, hash_key: &[u8]) -> usize {
    let mut crc = crc32fast::Hasher::new();
    crc.update(hash_key);
    crc.update(region.joined_origins());
    // `?: 1` in PHP; a valid region always has a positive sum, but the guard costs nothing.
    let mut point = u64::from(crc.finalize()) % region.weight_sum().max(1);
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
const STACK_INPUT: usize = 256;

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

    let mut best: Option<(usize, f64)> = None;
    let weights = region.listed_weights();
    for (index, (origin, &weight)) in region.origins().iter().zip(weights).enumerate() {
        if weight == 0 {
            continue;
        }
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
        let score = rendezvous_score(digest, weight);
        // Strictly greater: on an exact tie the earlier listed origin keeps the key.
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
