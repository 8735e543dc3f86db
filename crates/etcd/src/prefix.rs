//! What one keys-only read says of a prefix, for the agent's check of a quiet watch and
//! `dwctl status`'s routing revision alike.

use etcd_client::{GetOptions, KvClient, SortOrder, SortTarget};

use crate::connect::prefix_range_end;

/// A prefix at the revision of one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixHead {
    /// Keys under the prefix.
    pub keys: u64,
    /// The highest `mod_revision` among them (0 when there are none).
    pub newest_mod_revision: u64,
    /// The store's revision the read saw (its response header).
    pub revision: u64,
}

/// Reads `prefix`'s key count and newest modification in one request: keys only, sorted by
/// `mod_revision`, one key back. etcd scans the prefix's keys for it (not their values).
pub async fn read_prefix_head(
    kv: &mut KvClient,
    prefix: &str,
) -> Result<PrefixHead, etcd_client::Error> {
    let options = GetOptions::new()
        .with_range(prefix_range_end(prefix.as_bytes()))
        .with_keys_only()
        .with_limit(1)
        .with_sort(SortTarget::Mod, SortOrder::Descend);
    let response = kv.get(prefix, Some(options)).await?;
    let unsigned = |value: i64| u64::try_from(value).unwrap_or(0);
    Ok(PrefixHead {
        keys: unsigned(response.count()),
        newest_mod_revision: response
            .kvs()
            .first()
            .map_or(0, |kv| unsigned(kv.mod_revision())),
        revision: response.header().map_or(0, |h| unsigned(h.revision())),
    })
}
