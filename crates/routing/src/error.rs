//! The crate's one error type.

use std::fmt;

/// Everything that can be wrong with what this crate is given.
///
/// A snapshot error spoils the whole file (the reader keeps its last good table); a region or
/// policy error spoils only its own key, which [`crate::Table`] records as an
/// [`crate::InvalidKey`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The snapshot file as a whole is unreadable.
    Snapshot(String),
    /// A region value is invalid. `field` names the JSON field at fault: `"json"` (not JSON,
    /// not an object), `"shard"`, `"origins"`, `"weight"`, or `"geo"` for a `region/` key
    /// with nothing after the slash.
    Region {
        /// The JSON field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// A stage record (`stage/<id>`) is invalid; the stage applies nowhere.
    Stage(String),
    /// The policy value is invalid (`field` is `"json"`: not JSON or not an object).
    Policy {
        /// The JSON field at fault.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Snapshot(reason) => write!(f, "snapshot: {reason}"),
            Error::Region { field, reason } => write!(f, "region: field `{field}`: {reason}"),
            Error::Policy { field, reason } => write!(f, "policy: field `{field}`: {reason}"),
            Error::Stage(reason) => write!(f, "stage: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// The most bytes of input an error message quotes: a hostile file (a revision of 100,000
/// digits, an origin name of a megabyte) must not be echoed whole into `last_error`, logs
/// and `stats()`.
pub const MAX_QUOTED_BYTES: usize = 64;

/// `text` as an error message quotes it: at most [`MAX_QUOTED_BYTES`] bytes (cut at a
/// character boundary), followed by `…` when cut.
pub fn quoted(text: &str) -> std::borrow::Cow<'_, str> {
    if text.len() <= MAX_QUOTED_BYTES {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut end = MAX_QUOTED_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    std::borrow::Cow::Owned(format!("{}…", &text[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_input_is_cut_at_64_bytes() {
        assert_eq!(quoted("12345"), "12345");
        let exact = "9".repeat(MAX_QUOTED_BYTES);
        assert_eq!(quoted(&exact), exact);
        let long = "9".repeat(100_000);
        assert_eq!(quoted(&long), format!("{}…", &long[..64]));
        // Never in the middle of a character.
        let wide = "é".repeat(40);
        let cut = quoted(&wide);
        assert!(cut.ends_with('…') && cut.len() <= MAX_QUOTED_BYTES + '…'.len_utf8());
    }
}
