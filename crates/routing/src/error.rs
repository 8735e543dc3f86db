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
    Region { field: &'static str, reason: String },
    /// The policy value is invalid (`field` is `"json"`: not JSON or not an object).
    Policy { field: &'static str, reason: String },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Snapshot(reason) => write!(f, "snapshot: {reason}"),
            Error::Region { field, reason } => write!(f, "region: field `{field}`: {reason}"),
            Error::Policy { field, reason } => write!(f, "policy: field `{field}`: {reason}"),
        }
    }
}

impl std::error::Error for Error {}
