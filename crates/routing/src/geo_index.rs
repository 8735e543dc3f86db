//! The geo index of a table: which region answers for a geo, found without hashing for a
//! country code (the common case) and for a subdivision `CC-SUB` (its country by direct
//! index, then a search of that country's few subdivisions), and with one integer or
//! byte-slice hash otherwise.

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

/// A subdivision geo `CC-SUB` (`^[A-Z]{2}-[A-Z0-9]{1,3}$`, as
/// [`crate::subdivision_country`] defines it) as its country's code and its subdivision
/// part, packed big-endian so that integer order is byte order (and, every byte being
/// non-zero, distinct parts pack distinctly).
#[inline(always)]
fn subdivision_parts(geo: &[u8]) -> Option<(CountryCode, u32)> {
    let code = |byte: u8| CODE_OF_BYTE[byte as usize];
    let is_code = |byte: u8| code(byte) != NOT_CODE;
    let (first, second, packed) = match *geo {
        [a, b, b'-', x] if is_code(x) => (a, b, u32::from(x) << 24),
        [a, b, b'-', x, y] if is_code(x) && is_code(y) => {
            (a, b, u32::from(x) << 24 | u32::from(y) << 16)
        }
        [a, b, b'-', x, y, z] if is_code(x) && is_code(y) && is_code(z) => (
            a,
            b,
            u32::from(x) << 24 | u32::from(y) << 16 | u32::from(z) << 8,
        ),
        _ => return None,
    };
    // The country is two letters: codes below 26 (a digit is 26-35, anything else 255).
    let (first, second) = (code(first), code(second));
    (first < 26 && second < 26).then(|| {
        (
            CountryCode(u16::from(first) * 36 + u16::from(second)),
            packed,
        )
    })
}

/// What a geo that is not a country code is to the chain ([`GeoIndex::classify_other`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OtherGeo {
    /// It has a region of its own.
    Own(u32),
    /// A subdivision without a region of its own: it continues with its country.
    SubdivisionOf(CountryCode),
    /// Neither: an opaque geo without a region.
    Opaque,
}

/// "No list" in [`GeoIndex::subdivisions_of`].
const NO_LIST: u32 = u32::MAX;

/// Region indexes by geo, in four tables by the geo's shape.
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
    /// Subdivision geos `CC-SUB`: at a country code's index, the position in
    /// `subdivision_lists` of that country's (packed subdivision, region) pairs, sorted by
    /// the packed part once the table is built ([`GeoIndex::finish`]); [`NO_LIST`] if it
    /// has none. Empty while the table has no subdivision at all.
    subdivisions_of: Box<[u32]>,
    subdivision_lists: Vec<Vec<(u32, u32)>>,
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
            subdivisions_of: Box::default(),
            subdivision_lists: Vec::new(),
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
        } else if let Some((code, part)) = subdivision_parts(geo) {
            if self.subdivisions_of.is_empty() {
                self.subdivisions_of = vec![NO_LIST; CountryCode::COUNT].into_boxed_slice();
            }
            let list = &mut self.subdivisions_of[code.index()];
            if *list == NO_LIST {
                // At most one list per country code: fits in u32.
                *list = self.subdivision_lists.len() as u32;
                self.subdivision_lists.push(Vec::new());
            }
            self.subdivision_lists[*list as usize].push((part, region));
        } else if let Some(packed) = pack_short_geo(geo) {
            self.by_short_geo.insert(packed, region);
        } else {
            self.by_long_geo.insert(geo.into(), region);
        }
        self.longest_geo = self.longest_geo.max(geo.len());
    }

    /// Sorts each country's subdivisions for [`GeoIndex::get`], keeping the region
    /// recorded last for a subdivision recorded twice (as [`GeoIndex::insert`] promises).
    /// Called once every geo is in; a table's keys come in order, so the lists usually are
    /// already.
    pub(crate) fn finish(&mut self) {
        for list in &mut self.subdivision_lists {
            if !list.is_sorted_by(|a, b| a.0 < b.0) {
                // Stable: of equal parts, the last recorded stays last.
                list.sort_by_key(|&(part, _)| part);
                let mut kept: Vec<(u32, u32)> = Vec::with_capacity(list.len());
                for pair in list.drain(..) {
                    match kept.last_mut() {
                        Some(last) if last.0 == pair.0 => *last = pair,
                        _ => kept.push(pair),
                    }
                }
                *list = kept;
            }
        }
    }

    /// The region of the subdivision `part` of the country `code`, if it has one.
    #[inline(always)]
    fn subdivision(&self, code: CountryCode, part: u32) -> Option<u32> {
        let list = *self.subdivisions_of.get(code.index())?;
        let pairs = self.subdivision_lists.get(list as usize)?;
        let found = pairs
            .binary_search_by_key(&part, |&(packed, _)| packed)
            .ok()?;
        Some(pairs[found].1)
    }

    /// What `geo` (not a two-character country code) is to the chain: its own region,
    /// else for a subdivision its country, else opaque. Subdivisions need no hash.
    #[inline(never)]
    pub(crate) fn classify_other(&self, geo: &[u8]) -> OtherGeo {
        match subdivision_parts(geo) {
            Some((code, part)) => match self.subdivision(code, part) {
                Some(region) => OtherGeo::Own(region),
                None => OtherGeo::SubdivisionOf(code),
            },
            None => self.classify_hashed(geo),
        }
    }

    /// [`GeoIndex::classify_other`] of a geo that is not a subdivision: out of line, so
    /// that a subdivision's path does not pay for the hash map's registers.
    #[inline(never)]
    fn classify_hashed(&self, geo: &[u8]) -> OtherGeo {
        match self.get_hashed(geo) {
            Some(region) => OtherGeo::Own(region),
            None => OtherGeo::Opaque,
        }
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
        match subdivision_parts(geo) {
            Some((code, part)) => self.subdivision(code, part),
            None => self.get_hashed(geo),
        }
    }

    /// The region of a geo that is neither a country code nor a subdivision.
    #[inline(always)]
    fn get_hashed(&self, geo: &[u8]) -> Option<u32> {
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
    fn subdivisions_are_exactly_the_chains_shape_and_pack_in_byte_order() {
        for geo in [
            "US-CA", "DE-BY", "GB-ENG", "SI-061", "FR-75C", "US-A", "XK-1",
        ] {
            let (code, _) = subdivision_parts(geo.as_bytes()).expect(geo);
            let country = crate::subdivision_country(geo.as_bytes()).expect(geo);
            assert_eq!(Some(code), CountryCode::of(country), "{geo}");
        }
        for geo in [
            "US-",
            "US-CALI",
            "us-CA",
            "U1-CA",
            "T1-AB",
            "US_CA",
            "US-ca",
            "US-C A",
            "US-C\0",
            "USCA",
            "continent/EU",
            "",
            "US-\u{e9}",
        ] {
            assert_eq!(subdivision_parts(geo.as_bytes()), None, "{geo:?}");
            assert_eq!(crate::subdivision_country(geo.as_bytes()), None, "{geo:?}");
        }
        let packed = |geo: &str| subdivision_parts(geo.as_bytes()).unwrap().1;
        let mut parts = ["A", "AB", "ABC", "AC", "B", "Z9", "0", "09", "9ZZ"];
        parts.sort();
        let order: Vec<u32> = parts.iter().map(|p| packed(&format!("US-{p}"))).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{parts:?} {order:?}");
    }

    #[test]
    fn subdivisions_are_found_in_any_insertion_order_and_the_last_wins() {
        let mut index = GeoIndex::new();
        for (region, geo) in ["US-TX", "US-CA", "DE-BY", "US-CA", "US-AL", "USA-1"]
            .iter()
            .enumerate()
        {
            index.insert(geo.as_bytes(), region as u32);
        }
        index.insert(b"US", 9);
        index.finish();
        assert_eq!(index.get(b"US-CA"), Some(3));
        assert_eq!(index.get(b"US-TX"), Some(0));
        assert_eq!(index.get(b"US-AL"), Some(4));
        assert_eq!(index.get(b"DE-BY"), Some(2));
        assert_eq!(index.get(b"USA-1"), Some(5), "not a subdivision: hashed");
        assert_eq!(index.get(b"US-NY"), None);
        assert_eq!(index.get(b"FR-75C"), None);
        let us = CountryCode::of(b"US").unwrap();
        assert_eq!(index.classify_other(b"US-NY"), OtherGeo::SubdivisionOf(us));
        assert_eq!(index.classify_other(b"US-CA"), OtherGeo::Own(3));
        assert_eq!(index.classify_other(b"USA-1"), OtherGeo::Own(5));
        assert_eq!(index.classify_other(b"USA-2"), OtherGeo::Opaque);
        assert_eq!(
            index.classify_other(b"FR-75C"),
            OtherGeo::SubdivisionOf(CountryCode::of(b"FR").unwrap())
        );
        assert_eq!(
            GeoIndex::new().classify_other(b"US-CA"),
            OtherGeo::SubdivisionOf(us)
        );
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
