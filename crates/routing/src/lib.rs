//! dw-routing: the routing core. See docs/routing.md for the semantics.
mod snapshot;

pub use crate::snapshot::{DEFAULT_PREFIX, SNAPSHOT_FORMAT, Snapshot};

#[derive(Debug)]
pub enum Error {
    Snapshot(String),
}
impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Snapshot(m) => write!(f, "snapshot: {m}"),
        }
    }
}
impl std::error::Error for Error {}
