//! A key's past: its changes still in etcd's history (`dwctl history`), and `dwctl
//! rollback`'s read of its value at a past revision, planned by `crate::plan::rollback`
//! and committed through the one write path.

use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use serde::Serialize;

use crate::context::Context;
use crate::error::Error;
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard, run_plan};
use crate::output::Outcome;
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::rollback::{Rollback, RollbackKey};

/// One change of a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryEntry {
    /// The revision of the change.
    pub revision: i64,
    /// `put` or `delete`.
    pub kind: &'static str,
    /// The key's version after this change (0 after a delete).
    pub version: i64,
    /// The value written (lossy UTF-8), `None` for a delete.
    pub value: Option<String>,
}

/// How long replaying a key's history may take before it fails.
pub const HISTORY_REPLAY_LIMIT: Duration = Duration::from_secs(15);

/// [`read_history`] on a connection of `context`'s.
pub async fn history(
    context: &Context,
    key: &str,
) -> Result<(Vec<HistoryEntry>, Option<i64>), Error> {
    let mut client = context.etcd.connect().await?;
    read_history(&mut client, key).await
}

/// Every change of `key` still in etcd's history, oldest first, up to the current
/// revision; and the compaction revision when older changes are gone.
///
/// Replays a watch from revision 1 (or the compaction revision when etcd says the start
/// is compacted). The replay is complete once a progress notification reports a revision
/// at or past the one read first: etcd only sends those to watchers that caught up.
pub async fn read_history(
    client: &mut Client,
    key: &str,
) -> Result<(Vec<HistoryEntry>, Option<i64>), Error> {
    let head = client.get(key, None).await?;
    let target = head.header().map(|header| header.revision()).unwrap_or(0);
    let last_change = head.kvs().first().map(|kv| kv.mod_revision());
    let mut start = 1;
    let mut compacted = None;
    let deadline = tokio::time::Instant::now() + HISTORY_REPLAY_LIMIT;
    'replay: loop {
        let mut stream = client
            .watch(key, Some(WatchOptions::new().with_start_revision(start)))
            .await?;
        let mut entries = Vec::new();
        let mut ticker = tokio::time::interval(Duration::from_millis(100));
        loop {
            tokio::select! {
                message = stream.message() => {
                    let Some(response) = message? else {
                        return Err(Error::Failed("the history watch ended early".into()));
                    };
                    if response.canceled() {
                        if response.compact_revision() > start {
                            start = response.compact_revision();
                            compacted = Some(start);
                            continue 'replay;
                        }
                        return Err(Error::Failed(format!("the history watch was canceled: {}", response.cancel_reason())));
                    }
                    let progress = response.events().is_empty() && !response.created();
                    for event in response.events() {
                        let Some(kv) = event.kv() else { continue };
                        if kv.mod_revision() > target {
                            break;
                        }
                        let put = event.event_type() == EventType::Put;
                        entries.push(HistoryEntry {
                            revision: kv.mod_revision(),
                            kind: if put { "put" } else { "delete" },
                            version: kv.version(),
                            value: put.then(|| String::from_utf8_lossy(kv.value()).into_owned()),
                        });
                    }
                    let reached_head = last_change.is_some_and(|last| entries.last().is_some_and(|entry| entry.revision >= last));
                    let caught_up = progress && response.header().is_some_and(|header| header.revision() >= target);
                    if reached_head || caught_up {
                        return Ok((entries, compacted));
                    }
                }
                _ = ticker.tick() => stream.request_progress().await?,
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(Error::Failed("timed out replaying the key's history".into()));
                }
            }
        }
    }
}

/// The value of `key` at `revision` (`None`: it did not exist then).
async fn value_at(client: &mut Client, key: &str, revision: i64) -> Result<Option<Vec<u8>>, Error> {
    let past = client
        .get(key, Some(GetOptions::new().with_revision(revision)))
        .await
        .map_err(|error| {
            Error::Failed(format!("cannot read {key} at revision {revision}: {error}"))
        })?;
    Ok(past.kvs().first().map(|kv| kv.value().to_vec()))
}

/// `rollback`: puts `key` (which [`RollbackKey::of`] named `target`) back to its value at
/// `revision`, through the planner (guarded, previewed with `dry_run`, followed up like
/// every other write of the key).
pub async fn rollback(
    context: &Context,
    key: &str,
    target: RollbackKey,
    revision: i64,
    dry_run: bool,
    guard: &WriteGuard,
) -> Result<Outcome, Error> {
    // Capacity records are the guard's inputs, not routing: they move no load.
    let exempt = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Capacities));
    let guard = match &target {
        RollbackKey::Capacity(_) | RollbackKey::Headroom => &exempt,
        RollbackKey::Region(_) | RollbackKey::Policy => guard,
    };
    let mut client = context.etcd.connect().await?;
    let past = value_at(&mut client, key, revision).await?;
    let rollback = Rollback::new(
        target,
        revision,
        past.as_deref(),
        &operator(),
        &now_rfc3339(),
    )?;
    let title = format!("rollback {key} to revision {revision}");
    run_plan(context, &mut client, &title, dry_run, guard, |state| {
        Ok(rollback.plan(state)?)
    })
    .await
}
