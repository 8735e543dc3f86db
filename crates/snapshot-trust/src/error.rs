//! Why a snapshot was not opened: the crate's one error type.

use std::fmt;
use std::fs::Metadata;

/// Why a snapshot was not opened.
#[derive(Debug)]
pub enum Refused {
    /// Nothing at the path (or a directory on the way is missing): not a failed load, the
    /// agent may not have written it yet.
    Missing,
    /// Something is there and it is not read.
    Refused {
        /// The reason in words, naming the path.
        message: String,
        /// The opened file's metadata, when it got that far (so that a reader counts a
        /// refused file once per version of it).
        metadata: Option<Box<Metadata>>,
    },
}

impl Refused {
    pub(crate) fn new(message: String) -> Refused {
        Refused::Refused {
            message,
            metadata: None,
        }
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refused::Missing => f.write_str("no file at the path"),
            Refused::Refused { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for Refused {}
