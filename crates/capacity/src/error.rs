//! The crate's one error type.

use std::fmt;

/// What went wrong: bad traffic input, a limit passed, or an argument out of range.
#[derive(Debug, Clone, PartialEq)]
pub enum Error {
    /// The traffic file or rows are not what [`crate::Traffic`] accepts.
    Traffic(String),
    /// A stated limit was passed: `what` may hold at most `limit`, and had `found`.
    TooLarge {
        /// What was counted (bytes of the traffic file, geos, nodes, ...).
        what: &'static str,
        /// The limit.
        limit: usize,
        /// What was found (at least `limit + 1`; a reader may stop counting there).
        found: usize,
    },
    /// An argument of a planning function is out of range or names nothing.
    Invalid {
        /// The argument.
        field: &'static str,
        /// Why it is refused.
        reason: String,
    },
}

impl Error {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Error {
        Error::Invalid {
            field,
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Traffic(reason) => write!(f, "traffic: {reason}"),
            Error::TooLarge { what, limit, found } => {
                write!(f, "too many {what}: {found} (the limit is {limit})")
            }
            Error::Invalid { field, reason } => write!(f, "{field}: {reason}"),
        }
    }
}

impl std::error::Error for Error {}

/// `text` as an error message shows it: cut to [`dw_routing::MAX_QUOTED_BYTES`] and
/// escaped (`{:?}`), since geo and node names come from files and Prometheus labels.
pub(crate) fn shown(text: &str) -> String {
    format!("{:?}", dw_routing::quoted(text))
}
