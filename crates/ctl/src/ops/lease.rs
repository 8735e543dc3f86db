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

/// The seconds `lease` has left, when etcd answers (`None`: it does not know the lease, or
/// did not answer).
pub async fn lease_ttl(client: &mut Client, lease: i64) -> Option<i64> {
    client
        .lease_time_to_live(lease, None)
        .await
        .ok()
        .map(|response| response.ttl())
}
