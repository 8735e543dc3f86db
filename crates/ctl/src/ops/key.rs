//! One key read on its own (not a whole prefix): its value and `mod_revision`, as the
//! model's [`Entry`] holds them.

use etcd_client::Client;

use crate::error::Error;
use crate::plan::model::Entry;

/// The value of `key` and the revision it was last written at; `None` when it does not
/// exist.
pub async fn read_entry(client: &mut Client, key: &str) -> Result<Option<Entry>, Error> {
    let response = dw_etcd::kv_client(client).get(key, None).await?;
    Ok(response.kvs().first().map(|kv| Entry {
        raw: kv.value().to_vec(),
        mod_revision: kv.mod_revision(),
    }))
}
