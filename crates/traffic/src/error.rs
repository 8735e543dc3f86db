//! The crate's one error type: why a counter file is refused or cannot be used.

use std::fmt;

/// Why a counter file, or a part of one, was not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The file's size is not the layout's.
    Size {
        /// The size found, in bytes.
        found: usize,
        /// The layout's size, in bytes.
        expected: usize,
    },
    /// The header does not describe this layout (the word that differs).
    Header(&'static str),
    /// A label-set entry is malformed (skipped, with its counts).
    Entry(&'static str),
    /// An operating-system call failed (writer side).
    Io(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Size { found, expected } => write!(
                f,
                "counter file is {found} bytes, the layout's is {expected}"
            ),
            Error::Header(word) => {
                write!(f, "counter file header: {word} differs from the layout's")
            }
            Error::Entry(why) => write!(f, "label-set entry: {why}"),
            Error::Io(why) => write!(f, "counter file: {why}"),
        }
    }
}

impl std::error::Error for Error {}
