//! The geo index of a table: which region answers for a geo, found without hashing for a
//! country code (the common case) and with one integer or byte-slice hash otherwise.

use rustc_hash::FxHashMap;

/// "No region" in [`GeoIndex::by_country_code`].
const NO_REGION: u32 = u32::MAX;

/// `A-Z` as 0-25 and `0-9` as 26-35; anything else [`NOT_CODE`].
static CODE_OF_BYTE: [u8; 256] = {
    let mut codes = [NOT_CODE; 256];
    let mut letter = 0;
    while letter < 26 {
        codes[b'A' as usize + letter] = letter as u8;
        letter += 1;
    }
    let mut digit = 0;
    while digit < 10 {
        codes[b'0' as usize + digit] = 26 + digit as u8;
        digit += 1;
    }
    codes
};
const NOT_CODE: u8 = u8::MAX;

/// A two-character `A-Z0-9` country (what `CF-IPCountry` sends: ISO 3166 codes, `XX`,
/// `T1`), as a dense index below [`CountryCode::COUNT`]. A table looks these up by direct
/// index, and a caller can key its own per-country memo the same way: with no sticky
/// key, [`crate::Table::resolve`] is a function of the table and the country alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CountryCode(u16);

impl CountryCode {
    /// How many country codes there are (36 × 36).
    pub const COUNT: usize = 36 * 36;

    /// The code of `country`, if it is two characters of `A-Z0-9`.
    #[inline(always)]
    pub fn of(country: &[u8]) -> Option<CountryCode> {
        let [first, second] = *country else {
            return None;
        };
        let (first, second) = (CODE_OF_BYTE[first as usize], CODE_OF_BYTE[second as usize]);
        (first != NOT_CODE && second != NOT_CODE)
            .then_some(CountryCode(u16::from(first) * 36 + u16::from(second)))
    }

    /// Its index, below [`CountryCode::COUNT`].
    #[inline(always)]
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The code at `index`, below [`CountryCode::COUNT`] (larger ones wrap).
    pub(crate) fn from_index(index: usize) -> CountryCode {
        CountryCode((index % CountryCode::COUNT) as u16)
    }
}

/// The slot of a two-character `A-Z0-9` geo in [`GeoIndex::by_country_code`].
#[inline(always)]
fn country_code_slot(geo: &[u8]) -> Option<usize> {
    CountryCode::of(geo).map(CountryCode::index)
}

/// Up to 7 bytes and their length in one integer (bytes in the low 7, the length in the
/// top one); distinct inputs give distinct keys. Two overlapping loads, no byte loop and no
/// memcpy: the overlapped bytes are the same in both, so or-ing them is exact.
#[inline]
fn pack_short_geo(geo: &[u8]) -> Option<u64> {
    let len = geo.len();
    let bytes = match *geo {
        [] => 0,
        [first] => u64::from(first),
        [first, second, ..] if len <= 3 => {
            let head = u64::from(u16::from_le_bytes([first, second]));
            let tail = u64::from(u16::from_le_bytes([geo[len - 2], geo[len - 1]]));
            head | tail << (8 * (len - 2))
        }
        [a, b, c, d, ..] if len <= 7 => {
            let head = u64::from(u32::from_le_bytes([a, b, c, d]));
            let tail = u64::from(u32::from_le_bytes([
                geo[len - 4],
                geo[len - 3],
                geo[len - 2],
                geo[len - 1],
            ]));
            head | tail << (8 * (len - 4))
        }
        _ => return None,
    };
    Some(bytes | (len as u64) << 56)
}

/// Region indexes by geo, in three tables by the geo's shape.
#[derive(Debug, Clone)]
pub(crate) struct GeoIndex {
    /// Geos of more than 7 bytes. FxHash: the keys come from configuration, and a
    /// visitor's country only probes, so a fast unkeyed hash is safe.
    by_long_geo: FxHashMap<Box<[u8]>, u32>,
    /// The same for other geos of at most 7 bytes, keyed by the packed bytes: one integer
    /// hash and compare instead of a slice hash and a memcmp, and no allocation for the
    /// key when a table is built.
    by_short_geo: FxHashMap<u64, u32>,
    /// Geos of two characters from `A-Z0-9` (every `CF-IPCountry` value: ISO codes, `XX`,
    /// `T1`): the region index at `code(first) * 36 + code(second)`, [`NO_REGION`] if none.
    /// No hashing at all for the common case.
    by_country_code: Box<[u32]>,
    /// The longest geo: a longer country cannot match, so it is not even hashed.
    longest_geo: usize,
}

impl GeoIndex {
    /// An index of no geos.
    pub(crate) fn new() -> GeoIndex {
        GeoIndex {
            by_long_geo: FxHashMap::default(),
            by_short_geo: FxHashMap::default(),
            by_country_code: vec![NO_REGION; CountryCode::COUNT].into_boxed_slice(),
            longest_geo: 0,
        }
    }

    /// An empty index with room for as many short geos as `other` holds: a reload rarely
    /// changes the number of regions.
    pub(crate) fn sized_like(other: &GeoIndex) -> GeoIndex {
        let mut index = GeoIndex::new();
        index.by_short_geo.reserve(other.by_short_geo.len());
        index
    }

    /// Records `region` as `geo`'s, replacing any region recorded for it before.
    pub(crate) fn insert(&mut self, geo: &[u8], region: u32) {
        if let Some(slot) = country_code_slot(geo) {
            self.by_country_code[slot] = region;
        } else if let Some(packed) = pack_short_geo(geo) {
            self.by_short_geo.insert(packed, region);
        } else {
            self.by_long_geo.insert(geo.into(), region);
        }
        self.longest_geo = self.longest_geo.max(geo.len());
    }

    /// The region of `geo`, if any. A country code, the common case, is looked up inline;
    /// other geos out of line, so `resolve()` stays small.
    #[inline(always)]
    pub(crate) fn get(&self, geo: &[u8]) -> Option<u32> {
        match country_code_slot(geo) {
            Some(slot) => Some(self.by_country_code[slot]).filter(|&index| index != NO_REGION),
            None => self.get_other(geo),
        }
    }

    /// The region of the country code at `index` ([`CountryCode::index`]), if any.
    pub(crate) fn get_code(&self, index: usize) -> Option<u32> {
        self.by_country_code
            .get(index)
            .copied()
            .filter(|&region| region != NO_REGION)
    }

    #[inline(never)]
    fn get_other(&self, geo: &[u8]) -> Option<u32> {
        if let Some(packed) = pack_short_geo(geo) {
            self.by_short_geo.get(&packed).copied()
        } else if geo.len() <= self.longest_geo {
            self.by_long_geo.get(geo).copied()
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn country_codes_are_dense_and_only_two_characters_of_a_to_z_and_0_to_9() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let mut seen = vec![false; CountryCode::COUNT];
        for &first in alphabet {
            for &second in alphabet {
                let code = CountryCode::of(&[first, second]).expect("a country code");
                assert!(!seen[code.index()], "{} twice", code.index());
                seen[code.index()] = true;
            }
        }
        assert!(seen.iter().all(|&s| s));
        for other in [
            &b""[..],
            b"D",
            b"DEU",
            b"de",
            b"D-",
            b"\0E",
            b"D\xc3",
            b" D",
        ] {
            assert_eq!(CountryCode::of(other), None, "{other:?}");
        }
    }

    #[test]
    fn packing_is_the_bytes_then_the_length() {
        // The plain definition the overlapping loads must agree with.
        let reference = |geo: &[u8]| {
            let mut bytes = [0u8; 8];
            bytes[..geo.len()].copy_from_slice(geo);
            bytes[7] = geo.len() as u8;
            u64::from_le_bytes(bytes)
        };
        for len in 0..=7u8 {
            for seed in 0..200u32 {
                let geo: Vec<u8> = (0..len)
                    .map(|i| (seed.wrapping_mul(2_654_435_761) >> (i * 3)) as u8)
                    .collect();
                assert_eq!(pack_short_geo(&geo), Some(reference(&geo)), "{geo:?}");
            }
        }
        assert_eq!(pack_short_geo(b"ABCDEFGH"), None);
        // Trailing NULs do not collide with a shorter geo.
        assert_ne!(pack_short_geo(b"DE"), pack_short_geo(b"DE\0"));
    }
}
