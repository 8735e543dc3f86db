//! What one list of the prefix brought: its keys at one revision, the ones the snapshot
//! cannot carry, and the revisions of its stage keys. Filled page by page by
//! [`crate::etcd::Connector::list`], then handed whole to the mirror.

use std::collections::{BTreeMap, BTreeSet};

use tracing::warn;

/// A complete listing of the prefix at one revision.
#[derive(Debug, Default)]
pub(crate) struct Listing {
    pub(crate) revision: u64,
    /// The id of the etcd cluster that answered (from the response header).
    pub(crate) cluster_id: u64,
    pub(crate) kvs: BTreeMap<String, String>,
    /// Keys the snapshot cannot carry because the key or the value is not UTF-8.
    pub(crate) unrepresentable: BTreeSet<Vec<u8>>,
    /// The `mod_revision` of each listed key that holds a stage (`<prefix>stage/<id>`),
    /// which the effective snapshot names as the revision of the stage applied.
    pub(crate) stage_revisions: BTreeMap<String, u64>,
}

impl Listing {
    /// Logs the keys left out as not UTF-8, naming the first few (a flood of them must
    /// not flood the log).
    pub(crate) fn warn_unrepresentable(&self) {
        if self.unrepresentable.is_empty() {
            return;
        }
        let named: Vec<String> = self
            .unrepresentable
            .iter()
            .take(10)
            .map(|key| String::from_utf8_lossy(key).into_owned())
            .collect();
        warn!(
            keys = self.unrepresentable.len(),
            first = ?named,
            "keys with a non-UTF-8 key or value are left out of the snapshot"
        );
    }

    /// Adds one listed key, setting it aside if JSON cannot carry it exactly.
    /// `mod_revision` is kept for stage keys only.
    pub(crate) fn insert(&mut self, key: &[u8], value: &[u8], mod_revision: i64) {
        match (std::str::from_utf8(key), std::str::from_utf8(value)) {
            (Ok(key), Ok(value)) => {
                if is_stage_key(key) {
                    self.stage_revisions
                        .insert(key.to_owned(), u64::try_from(mod_revision).unwrap_or(0));
                }
                self.kvs.insert(key.to_owned(), value.to_owned());
            }
            _ => {
                self.unrepresentable.insert(key.to_vec());
            }
        }
    }
}

/// Whether `key` (a full key) is a stage key: `stage/` right below some prefix. The
/// mirror's prefix ends with `/`, so a key below it holds `/stage/` right after it; the
/// check is made again against the real prefix by `dw_routing::stage::open_stages`.
pub(crate) fn is_stage_key(key: &str) -> bool {
    key.contains("/stage/")
}
