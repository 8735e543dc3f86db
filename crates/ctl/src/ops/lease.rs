//! Leases: whether one still lives, the one rule for every reader that believes a key
//! only while the lease it names lives (node reports, registered origins).

use etcd_client::Client;

use crate::error::Error;

/// Whether `lease` still lives (a time-to-live above zero). A lease etcd no longer knows
/// ("lease not found") has ended: `false`, not an error.
pub async fn lease_lives(client: &mut Client, lease: i64) -> Result<bool, Error> {
    match client.lease_time_to_live(lease, None).await {
        Ok(response) => Ok(response.ttl() > 0),
        Err(error) if error.to_string().contains("not found") => Ok(false),
        Err(error) => Err(error.into()),
    }
}

/// The remaining time-to-live of `lease` in seconds, as etcd reports it (`-1` for a lease
/// it no longer knows); `None` when etcd does not answer (a listing shows `?` then).
pub async fn lease_ttl(client: &mut Client, lease: i64) -> Option<i64> {
    client
        .lease_time_to_live(lease, None)
        .await
        .ok()
        .map(|response| response.ttl())
}
