//! `history` (a key's past values, from etcd's MVCC history until compaction) and
//! `rollback` (put a key back to its value at a past revision, guarded).

use std::time::Duration;

use etcd_client::{Client, EventType, GetOptions, WatchOptions};
use serde::Serialize;
use serde_json::json;

use crate::context::Context;
use crate::error::{Error, FieldError};
use crate::ops::commit::{Changes, State};
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard, run_plan};
use crate::output::{Outcome, Shown};
use crate::plan::capacity::{Capacity, Headroom};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::check_origin_name;
use crate::plan::drain_record::DrainRecord;
use crate::plan::value::{PolicyValue, RegionValue};

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
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
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

pub async fn history(context: &Context, key: &str) -> Result<Outcome, Error> {
    let key = context.layout.resolve(key);
    let mut client = context.etcd.connect().await?;
    let (entries, compacted) = read_history(&mut client, &key).await?;
    // A drain record that does not parse is named as such: it blocks its origin's
    // commands until `dwctl drain --repair`.
    let drain_origin = key.strip_prefix(&context.layout.drains());
    let malformed = |value: &str| {
        drain_origin
            .and_then(|origin| DrainRecord::parse(origin, value.as_bytes()).err())
            .map(|error| {
                format!(
                    "\n          MALFORMED DRAIN RECORD: {}",
                    Shown(&error.to_string())
                )
            })
            .unwrap_or_default()
    };
    let mut lines: Vec<String> = entries
        .iter()
        .map(|entry| match &entry.value {
            Some(value) => format!(
                "{:>8}  put     {}{}",
                entry.revision,
                Shown(value),
                malformed(value)
            ),
            None => format!("{:>8}  delete", entry.revision),
        })
        .collect();
    if entries.is_empty() {
        lines.push(format!("no history for {}", Shown(&key)));
    }
    if let Some(revision) = compacted {
        lines.insert(
            0,
            format!("(history before revision {revision} was compacted)"),
        );
    }
    Ok(Outcome {
        text: lines.join("\n"),
        json: json!({"key": key, "compacted": compacted, "history": entries}),
    })
}

pub async fn rollback(
    context: &Context,
    key: &str,
    revision: i64,
    dry_run: bool,
    guard: &WriteGuard,
) -> Result<Outcome, Error> {
    if revision <= 0 {
        return Err(Error::Usage(
            "--to-revision must be a positive revision".into(),
        ));
    }
    let key = context.layout.resolve(key);
    let region = key.strip_prefix(&context.layout.regions());
    let capacity_origin = key.strip_prefix(&context.layout.capacities());
    let headroom = key == context.layout.capacity_headroom();
    if region.is_none() && capacity_origin.is_none() && !headroom && key != context.layout.policy()
    {
        return Err(Error::Usage(refused_rollback(&context.layout, &key)));
    }
    let mut client = context.etcd.connect().await?;
    let past = client
        .get(
            key.as_str(),
            Some(GetOptions::new().with_revision(revision)),
        )
        .await
        .map_err(|error| {
            Error::Failed(format!("cannot read {key} at revision {revision}: {error}"))
        })?;
    let past_value = past.kvs().first().map(|kv| kv.value().to_vec());
    let title = format!("rollback {key} to revision {revision}");
    let at_revision = format!("value at revision {revision}");
    // A past value that no longer validates: its errors, said of that revision.
    let invalid_at_revision = |errors: Vec<FieldError>| {
        Error::Invalid(
            errors
                .into_iter()
                .map(|error| error.within(&at_revision))
                .collect(),
        )
    };

    if capacity_origin.is_some() || headroom {
        // Capacities too, through the planner: guarded, previewed with --dry-run, and
        // stamped with who rolled back when (the value is the one of that revision).
        let (by, at) = (operator(), now_rfc3339());
        let reason = Some(format!("rollback to revision {revision}"));
        let origin = capacity_origin.map(str::to_owned);
        if let Some(origin) = &origin {
            check_origin_name("origin", origin)?;
        }
        let past = past_value.as_deref();
        let capacity = match (&origin, past) {
            (Some(origin), Some(raw)) => Some(
                Capacity::parse(origin, raw)
                    .map(|record| Capacity {
                        by: by.clone(),
                        at: at.clone(),
                        reason: reason.clone(),
                        ..record
                    })
                    .map_err(|error| invalid_at_revision(vec![error]))?,
            ),
            _ => None,
        };
        let headroom_value = match (headroom, past) {
            (true, Some(raw)) => Some(
                Headroom::parse(raw)
                    .map(|record| Headroom {
                        by: by.clone(),
                        at: at.clone(),
                        reason: reason.clone(),
                        ..record
                    })
                    .map_err(|error| invalid_at_revision(vec![error]))?,
            ),
            _ => None,
        };
        let plan = |state: &State| {
            if let Some(why) = &state.capacities_unreadable {
                return Err(Error::Failed(why.clone()));
            }
            let mut changes = Changes::default();
            if let Some(origin) = &origin
                && (capacity.is_some() || state.capacities.contains_key(origin))
            {
                changes.capacities.insert(origin.clone(), capacity.clone());
            }
            if headroom && (headroom_value.is_some() || state.headroom.is_some()) {
                changes.headroom = Some(headroom_value.clone());
            }
            Ok(changes)
        };
        // Capacity records are the guard's inputs, not routing: they move no load.
        let exempt = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Capacities));
        return run_plan(context, &mut client, &title, dry_run, &exempt, plan).await;
    }

    if let Some(geo) = region {
        // Regions go through the planner so that drain records stay true to them.
        let value = past_value
            .map(|raw| RegionValue::for_write(&raw))
            .transpose()
            .map_err(invalid_at_revision)?;
        let geo = geo.to_string();
        let plan = |state: &State| {
            let mut changes = Changes::default();
            if value.is_some() || state.regions.contains_key(&geo) {
                changes.regions.insert(geo.clone(), value.clone());
            }
            Ok(changes)
        };
        return run_plan(context, &mut client, &title, dry_run, guard, plan).await;
    }

    {
        // The policy too: the stage and drain-record follow-ups and the size check are the
        // planner's, as for every other write of a routing key.
        let value = past_value
            .map(|raw| PolicyValue::for_write(&raw))
            .transpose()
            .map_err(invalid_at_revision)?;
        let plan = |state: &State| {
            let mut changes = Changes::default();
            match &value {
                Some(policy) => changes.policy = Some(policy.clone()),
                None if state.policy.is_some() => {
                    return Err(Error::Failed(format!(
                        "policy/global did not exist at revision {revision}, and dwctl never \
                         deletes it (without it the readers' defaults apply); write the policy \
                         you want with `dwctl policy set`"
                    )));
                }
                None => {}
            }
            Ok(changes)
        };
        run_plan(context, &mut client, &title, dry_run, guard, plan).await
    }
}

/// Why `rollback` does not write `key`, and what to use instead. Only routing keys
/// (`region/<geo>`, `policy/global`) are rolled back: they go through the planner, which
/// keeps open stages and drain records in step. A record written verbatim around the
/// planners (a stage, a drain record, a rollout's progress) would leave those out of step.
fn refused_rollback(layout: &crate::plan::keys::Layout, key: &str) -> String {
    let instead = if key.starts_with(&layout.stages()) {
        "a stage is changed with `dwctl stage widen`, `dwctl stage promote` or `dwctl stage \
         abort` (and made again with `dwctl stage create`)"
    } else if key.starts_with(&layout.drains()) {
        "a drain record is changed with `dwctl drain`, `dwctl restore` or `dwctl drain \
         --repair`"
    } else if key.starts_with(&layout.rollout("")) {
        "a rollout's progress is kept by `dwctl rollout` (`dwctl rollout resume ID` goes on, \
         `dwctl stage abort ID` ends it)"
    } else if key.starts_with(&layout.registrations()) || key.starts_with(&layout.origins()) {
        "an origin's registration is kept by `dwctl origin register`"
    } else {
        "write it with the command that owns it"
    };
    format!(
        "rollback writes routing keys (region/<geo> and policy/global) and capacities \
         (capacity/<origin>, capacity-headroom) only, through the same checks as every other \
         write; {} is not one: {instead}",
        Shown(key)
    )
}
