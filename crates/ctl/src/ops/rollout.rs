//! A rollout's reads and its progress record in etcd, for the rollout driver
//! (`daemons::rollout`): the record and the stage read on their own, the node reports the
//! gate judges, the record written guarded on its last revision, and a new connection
//! after etcd was away. The stage actions themselves are `ops::stage`'s.

use dw_routing::stage::Stage;
use etcd_client::Client;

use crate::context::Context;
use crate::error::Error;
use crate::ops::commit::{RecordWrite, write};
use crate::ops::fleet::{NodeReport, read_nodes};
use crate::ops::key::read_entry;
use crate::plan::rollout::Record;
use crate::plan::stage::parse_stage;

/// A progress record as read: parsed (or why not) and its `mod_revision`.
pub type StoredRecord = (Result<Record, String>, i64);

/// The rollout's connection to etcd, taken from the context.
pub struct RolloutStore<'a> {
    context: &'a Context,
    client: Client,
}

impl<'a> RolloutStore<'a> {
    /// Connects as `context` says.
    pub async fn open(context: &'a Context) -> Result<RolloutStore<'a>, Error> {
        Ok(RolloutStore {
            context,
            client: context.etcd.connect().await?,
        })
    }

    /// The progress record of rollout `id` and its `mod_revision`; `None` without one.
    pub async fn load(&mut self, id: &str) -> Result<Option<StoredRecord>, Error> {
        let key = self.context.layout.rollout(id);
        Ok(read_entry(&mut self.client, &key)
            .await?
            .map(|entry| (Record::parse(&entry.raw), entry.mod_revision)))
    }

    /// Whether stage `id` is open (its key exists).
    pub async fn stage_is_open(&mut self, id: &str) -> Result<bool, Error> {
        let key = self.context.layout.stage(id);
        Ok(read_entry(&mut self.client, &key).await?.is_some())
    }

    /// Stage `id` and its `mod_revision`; not found when it is closed.
    pub async fn read_stage(&mut self, id: &str) -> Result<(Stage, i64), Error> {
        let key = self.context.layout.stage(id);
        let Some(entry) = read_entry(&mut self.client, &key).await? else {
            return Err(Error::NotFound(format!("stage {id}")));
        };
        Ok((parse_stage(id, &entry)?, entry.mod_revision))
    }

    /// Every node report ([`read_nodes`]).
    pub async fn nodes(&mut self) -> Result<Vec<NodeReport>, Error> {
        read_nodes(&mut self.client, &self.context.layout.nodes).await
    }

    /// Writes `value` as the progress record of `id`, guarded on `revision` (its last
    /// `mod_revision`, 0: none yet): the new revision, or `None` when someone else wrote
    /// it meanwhile.
    pub async fn save(
        &mut self,
        id: &str,
        value: String,
        revision: i64,
    ) -> Result<Option<i64>, Error> {
        let key = self.context.layout.rollout(id);
        let progress = RecordWrite::new().guard(&key, revision).put(&key, value);
        write(&mut self.client, progress).await
    }

    /// A new connection after etcd was away (best effort: the old one is kept when it
    /// cannot be made).
    pub async fn reconnect(&mut self) {
        if let Ok(client) = self.context.etcd.connect().await {
            self.client = client;
        }
    }
}
