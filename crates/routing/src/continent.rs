//! Geography: the shapes of a geo (country code, ISO 3166-2 subdivision, anything else),
//! the seven continent buckets, and the built-in country → continent table, generated
//! once from a maintained source into `continent_data.rs` (docs/routing.md, "Country to
//! continent").

use crate::continent_data;
use crate::geo_index::CountryCode;

/// A continent bucket's geo starts with this (`region/continent/EU`): buckets never share
/// the country namespace (`AS` is American Samoa, `continent/AS` Asia).
pub const BUCKET_PREFIX: &str = "continent/";

/// The data the built-in table was generated from, with its version.
pub const CONTINENT_TABLE_SOURCE: &str = continent_data::SOURCE;

/// One of the seven continent codes a bucket is named by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Continent {
    /// Africa.
    AF,
    /// Antarctica.
    AN,
    /// Asia.
    AS,
    /// Europe.
    EU,
    /// North America.
    NA,
    /// Oceania.
    OC,
    /// South America.
    SA,
}

impl Continent {
    /// The seven, in code order; a continent's position is its [`Continent::index`].
    pub const ALL: [Continent; 7] = [
        Continent::AF,
        Continent::AN,
        Continent::AS,
        Continent::EU,
        Continent::NA,
        Continent::OC,
        Continent::SA,
    ];

    /// Its two-letter code.
    pub fn code(self) -> &'static str {
        match self {
            Continent::AF => "AF",
            Continent::AN => "AN",
            Continent::AS => "AS",
            Continent::EU => "EU",
            Continent::NA => "NA",
            Continent::OC => "OC",
            Continent::SA => "SA",
        }
    }

    /// The continent of a code, exactly one of the seven (no case folding).
    pub fn parse(code: &[u8]) -> Option<Continent> {
        Continent::ALL
            .into_iter()
            .find(|continent| continent.code().as_bytes() == code)
    }

    /// Its position in [`Continent::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The geo of its bucket, `continent/<CODE>`.
    pub fn bucket_geo(self) -> String {
        format!("{BUCKET_PREFIX}{}", self.code())
    }
}

/// What a bucket geo (`continent/...`) names: `None` when `geo` is not in the bucket
/// namespace at all, `Some(None)` when it is but names none of the seven codes.
pub fn bucket_of_geo(geo: &[u8]) -> Option<Option<Continent>> {
    let code = geo.strip_prefix(BUCKET_PREFIX.as_bytes())?;
    Some(Continent::parse(code))
}

/// `^[A-Z]{2}$`: a country code the chain continues from to its continent.
#[inline]
pub fn is_country(geo: &[u8]) -> bool {
    matches!(geo, [a, b] if a.is_ascii_uppercase() && b.is_ascii_uppercase())
}

/// The country of an ISO 3166-2 subdivision geo, `^[A-Z]{2}-[A-Z0-9]{1,3}$` (`US-CA`,
/// `DE-BY`, `GB-ENG`): its first two bytes.
#[inline]
pub fn subdivision_country(geo: &[u8]) -> Option<&[u8]> {
    match geo {
        [a, b, b'-', rest @ ..]
            if a.is_ascii_uppercase()
                && b.is_ascii_uppercase()
                && (1..=3).contains(&rest.len())
                && rest
                    .iter()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit()) =>
        {
            Some(&geo[..2])
        }
        _ => None,
    }
}

/// No continent, in [`BUILTIN_BY_CODE`].
const NO_CONTINENT: u8 = u8::MAX;

/// The position in [`Continent::ALL`] of a continent code, at compile time (a code the
/// generator wrote; anything else fails the build).
const fn continent_index(code: [u8; 2]) -> u8 {
    match &code {
        b"AF" => 0,
        b"AN" => 1,
        b"AS" => 2,
        b"EU" => 3,
        b"NA" => 4,
        b"OC" => 5,
        b"SA" => 6,
        _ => panic!("continent_data.rs holds a code that is not a continent"),
    }
}

/// The built-in table by [`CountryCode`] index, built at compile time.
static BUILTIN_BY_CODE: [u8; CountryCode::COUNT] = {
    let mut table = [NO_CONTINENT; CountryCode::COUNT];
    let mut i = 0;
    while i < continent_data::COUNTRIES.len() {
        let ([first, second], continent) = continent_data::COUNTRIES[i];
        let slot = (first - b'A') as usize * 36 + (second - b'A') as usize;
        table[slot] = continent_index(continent);
        i += 1;
    }
    table
};

/// The built-in continent of a country code; `None` for `XX`, `T1` and any code the
/// table does not have.
pub fn builtin_continent(country: &[u8]) -> Option<Continent> {
    builtin_continent_of_code(CountryCode::of(country)?)
}

/// [`builtin_continent`] by code.
pub(crate) fn builtin_continent_of_code(code: CountryCode) -> Option<Continent> {
    Continent::ALL
        .get(usize::from(BUILTIN_BY_CODE[code.index()]))
        .copied()
}

/// Every code of the built-in table with its continent, in code order.
pub fn builtin_table() -> impl Iterator<Item = (&'static str, Continent)> {
    continent_data::COUNTRIES.iter().map(|(code, continent)| {
        // The generator writes `A-Z` codes and continent codes only (checked at build).
        let continent = Continent::ALL[usize::from(continent_index(*continent))];
        (std::str::from_utf8(code).unwrap_or("??"), continent)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for geo in ["US", "AS", "XX", "ZZ"] {
            assert!(is_country(geo.as_bytes()), "{geo}");
        }
        for geo in ["T1", "us", "U", "USA", "", "U\u{e9}"] {
            assert!(!is_country(geo.as_bytes()), "{geo}");
        }
        for (geo, country) in [
            ("US-CA", "US"),
            ("GB-ENG", "GB"),
            ("FR-75", "FR"),
            ("DE-1", "DE"),
        ] {
            assert_eq!(
                subdivision_country(geo.as_bytes()),
                Some(country.as_bytes())
            );
        }
        for geo in [
            "US-", "US-CALI", "us-CA", "US-ca", "US_CA", "T1-AB", "USA-CA", "US-C-",
        ] {
            assert_eq!(subdivision_country(geo.as_bytes()), None, "{geo}");
        }
        assert_eq!(bucket_of_geo(b"continent/EU"), Some(Some(Continent::EU)));
        assert_eq!(bucket_of_geo(b"continent/eu"), Some(None));
        assert_eq!(bucket_of_geo(b"continent/"), Some(None));
        assert_eq!(bucket_of_geo(b"EU"), None);
    }

    #[test]
    fn codes_round_trip() {
        for (index, continent) in Continent::ALL.into_iter().enumerate() {
            assert_eq!(continent.index(), index);
            assert_eq!(
                Continent::parse(continent.code().as_bytes()),
                Some(continent)
            );
        }
        assert_eq!(Continent::parse(b"eu"), None);
        assert_eq!(Continent::parse(b"EUR"), None);
    }

    #[test]
    fn the_built_in_table_answers_by_code() {
        assert_eq!(builtin_continent(b"DE"), Some(Continent::EU));
        assert_eq!(
            builtin_continent(b"AS"),
            Some(Continent::OC),
            "American Samoa"
        );
        assert_eq!(builtin_continent(b"XK"), Some(Continent::EU));
        for none in [&b"XX"[..], b"T1", b"ZZ", b"", b"DEU"] {
            assert_eq!(builtin_continent(none), None);
        }
        for (code, continent) in builtin_table() {
            assert_eq!(
                builtin_continent(code.as_bytes()),
                Some(continent),
                "{code}"
            );
        }
    }
}
