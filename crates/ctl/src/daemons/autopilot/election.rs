//! One active autopilot: a leader key held on a lease (`<control>autopilot/leader`,
//! `Layout::autopilot_leader`).
//!
//! Each instance grants itself a lease of `ttl` seconds and keeps it alive every `ttl / 3`;
//! it leads when a transaction creates the leader key on that lease (compare: the key's
//! `create_revision` is 0, so only an absent key is taken; built in
//! `ops::commit::take_leader_key`, where every transaction is). The leader's [`Fence`] is the
//! key at the revision it created it: every write is compared on it
//! (`ops::commit::transact_fenced`), so a leader whose lease lapsed (paused, partitioned)
//! writes nothing once another has taken the key. A standby tries again every evaluation:
//! it takes over within the TTL of the old leader's last keep-alive. Shutting down revokes
//! the lease, which deletes the key at once.

use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};

use crate::error::Error;
use crate::ops::commit::{Fence, take_leader_key};

/// An instance's lease and, while it leads, its fence.
pub struct Campaign {
    key: String,
    identity: String,
    lease: i64,
    keeper: LeaseKeeper,
    responses: LeaseKeepAliveStream,
    fence: Option<Fence>,
}

/// Who holds the leader key, as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The holder's identity (the key's value), or empty.
    pub identity: String,
}

impl Campaign {
    /// Grants a lease of `ttl` seconds and starts keeping it alive.
    pub async fn start(
        client: &mut Client,
        key: String,
        identity: String,
        ttl: i64,
    ) -> Result<Campaign, Error> {
        let lease = client.lease_grant(ttl, None).await?.id();
        let (keeper, responses) = client.lease_keep_alive(lease).await?;
        Ok(Campaign {
            key,
            identity,
            lease,
            keeper,
            responses,
            fence: None,
        })
    }

    /// The lease the instance holds (its leader key and status live on it).
    pub fn lease(&self) -> i64 {
        self.lease
    }

    /// The fence of the leadership held, if any.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// Gives the leadership up (a fenced write failed: another leads).
    pub fn deposed(&mut self) {
        self.fence = None;
    }

    /// Keeps the lease alive; `false` when it is gone (then the leadership is too).
    pub async fn keep_alive(&mut self) -> Result<bool, Error> {
        self.keeper.keep_alive().await?;
        match tokio::time::timeout(Duration::from_secs(2), self.responses.message()).await {
            Ok(Ok(Some(response))) if response.ttl() > 0 => Ok(true),
            Ok(Ok(Some(_))) => {
                self.fence = None;
                Ok(false)
            }
            Ok(Ok(None)) => Err(Error::Failed("the keep-alive stream ended".into())),
            Ok(Err(error)) => Err(error.into()),
            Err(_) => Err(Error::Failed("no keep-alive answer within 2 s".into())),
        }
    }

    /// Takes the leader key when it is absent. `Ok(None)`: someone else holds it.
    pub async fn try_lead(&mut self, client: &mut Client) -> Result<Result<Fence, Holder>, Error> {
        if let Some(fence) = &self.fence {
            return Ok(Ok(fence.clone()));
        }
        match take_leader_key(client, &self.key, &self.identity, self.lease).await? {
            Ok(fence) => {
                self.fence = Some(fence.clone());
                Ok(Ok(fence))
            }
            Err(identity) => Ok(Err(Holder { identity })),
        }
    }

    /// Revokes the lease (the key goes with it), within 3 s.
    pub async fn resign(self, client: &mut Client) {
        let _ = tokio::time::timeout(Duration::from_secs(3), client.lease_revoke(self.lease)).await;
    }
}
