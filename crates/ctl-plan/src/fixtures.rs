//! Test fixtures shared by the planners' unit tests (compiled for tests only).

use crate::model::{Entry, State};

/// A state at revision 10 holding `regions` (geo, stored value), each at `mod_revision` 5.
pub(crate) fn state(regions: &[(&str, &str)]) -> State {
    State {
        revision: 10,
        regions: regions
            .iter()
            .map(|(geo, raw)| {
                (
                    geo.to_string(),
                    Entry {
                        raw: raw.as_bytes().to_vec(),
                        mod_revision: 5,
                    },
                )
            })
            .collect(),
        ..State::default()
    }
}

/// Owned (name, weight) pairs from literals.
pub(crate) fn named(weights: &[(&str, u32)]) -> Vec<(String, u32)> {
    weights
        .iter()
        .map(|(name, weight)| (name.to_string(), *weight))
        .collect()
}
