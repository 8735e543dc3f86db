//! `rebalance`: drain origins whose lease expires, restore them when they register again.
//!
//! A session lists origins, registration markers and drain records at one revision,
//! reconciles (live with a rebalance drain: restore; registered but gone: pending), then
//! watches `<prefix>origin/` from the next revision. An origin is believed live only on the
//! lease its registration record names (when it names one), and is drained only once its
//! key has been absent (or on another lease) for the grace period and that lease has
//! ended: a key someone else deleted, or put on a lease of theirs and revoked, drains
//! nothing while the origin's own `origin register` lives (it puts the key back). Any error ends the session; the next
//! one starts after a jittered backoff with a fresh list, so an etcd restart or a compacted
//! watch costs a re-list, never a missed change. Only origins that registered (a marker,
//! or a key seen live) are ever drained, and only drains made by rebalance are restored.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::error::Error;
use crate::ops::run::{AutoDrain, ExemptReason, auto_drain, auto_restore};
use crate::ops::traffic_source::TrafficSource;
use crate::plan::clock::now_rfc3339;
use crate::plan::drain::DrainRequest;
use crate::plan::shed_record::OnFail;
use dw_etcd::{Backoff, EtcdOptions};

use crate::daemons::origin::{mark_registered, registered_lease};
use crate::daemons::sessions::Sessions;
use crate::ops::commit::{Committed, RetryPolicy};
use crate::ops::lease::lease_lives;
use crate::ops::origin::list_origins;
use crate::output::{Reporter, Shown};
use crate::plan::drain_record::SOURCE_REBALANCE;
use crate::plan::keys::{Layout, strip};
use crate::shutdown::Shutdown;

/// The reason written in drain records of origins whose lease ended.
pub const LEASE_EXPIRED: &str = "lease-expired";

/// What `dwctl rebalance` needs.
#[derive(Debug, Clone)]
pub struct RebalanceConfig {
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Where the keys are.
    pub layout: Layout,
    /// Retries of each guarded drain or restore.
    pub retry: RetryPolicy,
    /// `by` of the drain records it writes.
    pub by: String,
    /// How long a key must stay absent before its origin is drained (`--grace`).
    pub grace: Duration,
    /// Where a drain's predicted load reads its traffic (recorded in the drain record);
    /// [`TrafficSource::NotGiven`]: drains are recorded without a prediction.
    pub traffic: TrafficSource,
}

/// Runs until `shutdown`.
pub async fn run(
    config: &RebalanceConfig,
    reporter: Reporter,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let sessions = Sessions::new(reporter, shutdown, Duration::from_secs(10));
    sessions
        .run(config, describe_error, |config, shutdown, backoff| {
            Box::pin(async move {
                session(config, reporter, shutdown, backoff)
                    .await
                    .map(|()| true)
            })
        })
        .await;
    Ok(())
}

/// The `error` event of a failed session.
fn describe_error(error: &Error) -> (String, Value) {
    let fields = json!({"error": error.to_string()});
    (format!("{error}; re-listing after a pause"), fields)
}

async fn session(
    config: &RebalanceConfig,
    reporter: Reporter,
    shutdown: &mut Shutdown,
    backoff: &mut Backoff,
) -> Result<(), Error> {
    let mut client = config.etcd.connect().await?;
    let listing = list_origins(&mut client, &config.layout).await?;
    let mut seen: BTreeSet<String> = listing.registered.clone();
    for id in listing.live.keys() {
        if seen.insert(id.clone()) {
            mark_registered(&mut client, &config.layout, id).await?;
        }
    }
    reporter.event(
        "listed",
        &format!("revision {}: {} live, {} registered", listing.revision, listing.live.len(), seen.len()),
        json!({"revision": listing.revision, "live": listing.live.keys().collect::<Vec<_>>(), "registered": seen}),
    );
    // Origins whose key is absent (or on a lease their record does not name), with when
    // that was first seen: checked once the grace period has passed.
    let mut pending: BTreeMap<String, Instant> = BTreeMap::new();
    // Pending origins whose named lease was found alive (reported once).
    let mut held: BTreeSet<String> = BTreeSet::new();
    for id in &seen {
        let lease = listing.live.get(id).map(|(_, lease)| *lease);
        if trusted(&mut client, &config.layout, id, lease).await? {
            if listing
                .drains
                .get(id)
                .is_some_and(|record| record.has_part(SOURCE_REBALANCE))
            {
                restore(config, reporter, &mut client, id).await?;
            }
        } else {
            pending.insert(id.clone(), Instant::now());
        }
    }
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(listing.revision + 1);
    let mut stream = client.watch(config.layout.origins(), Some(options)).await?;
    backoff.reset();
    loop {
        let due = pending.values().min().map(|since| *since + config.grace);
        let message = tokio::select! {
            _ = shutdown.wait() => return Ok(()),
            _ = sleep_until(due) => {
                let now = Instant::now();
                let ready: Vec<String> = pending
                    .iter()
                    .filter(|(_, since)| **since + config.grace <= now)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in ready {
                    pending.remove(&id);
                    let quiet = held.contains(&id);
                    if check_absent(config, reporter, &mut client, &id, quiet).await? {
                        held.remove(&id);
                    } else {
                        // Its lease lives: look again after another grace period (said
                        // once, not every time).
                        held.insert(id.clone());
                        pending.insert(id, Instant::now());
                    }
                }
                continue;
            }
            message = stream.message() => message?,
        };
        let Some(response) = message else {
            return Err(Error::Failed("the watch ended".into()));
        };
        if response.canceled() {
            return Err(Error::Failed(format!(
                "the watch was canceled ({}; compacted at {})",
                response.cancel_reason(),
                response.compact_revision()
            )));
        }
        for event in response.events() {
            let Some(kv) = event.kv() else { continue };
            let Some(id) = strip(kv.key(), &config.layout.origins()).filter(|id| !id.is_empty())
            else {
                continue;
            };
            let id = id.to_string();
            match event.event_type() {
                EventType::Put => {
                    if seen.insert(id.clone()) {
                        mark_registered(&mut client, &config.layout, &id).await?;
                    }
                    if trusted(&mut client, &config.layout, &id, Some(kv.lease())).await? {
                        held.remove(&id);
                        if pending.remove(&id).is_some() {
                            reporter.event(
                                "back",
                                &format!(
                                    "{} is back within the grace period; not drained",
                                    Shown(&id)
                                ),
                                json!({"origin": id, "revision": kv.mod_revision()}),
                            );
                        }
                        reporter.event(
                            "up",
                            &format!("{} registered", Shown(&id)),
                            json!({"origin": id}),
                        );
                        restore(config, reporter, &mut client, &id).await?;
                    } else {
                        reporter.event(
                            "untrusted",
                            &format!(
                                "{}: put at revision {} on lease {:x}, which its registration record does not name; not believed",
                                Shown(&id),
                                kv.mod_revision(),
                                kv.lease()
                            ),
                            json!({"origin": id, "revision": kv.mod_revision(), "lease": kv.lease()}),
                        );
                        pending.entry(id).or_insert_with(Instant::now);
                    }
                }
                EventType::Delete if seen.contains(&id) => {
                    reporter.event(
                        "down",
                        &format!(
                            "{}: its key vanished at revision {}; drained if still absent after {:?} and its lease ended",
                            Shown(&id),
                            kv.mod_revision(),
                            config.grace
                        ),
                        json!({"origin": id, "revision": kv.mod_revision()}),
                    );
                    pending.entry(id).or_insert_with(Instant::now);
                }
                EventType::Delete => {}
            }
        }
    }
}

/// Sleeps until `due`, or for ever.
async fn sleep_until(due: Option<Instant>) {
    match due {
        Some(due) => tokio::time::sleep_until(due).await,
        None => std::future::pending().await,
    }
}

/// Whether a key of `id` on `lease` (`None`: no key) shows the origin live: the lease is
/// the one its registration record names, or the record names none.
async fn trusted(
    client: &mut Client,
    layout: &Layout,
    id: &str,
    lease: Option<i64>,
) -> Result<bool, Error> {
    let Some(lease) = lease else { return Ok(false) };
    Ok(registered_lease(client, layout, id)
        .await?
        .is_none_or(|named| named == lease))
}

/// Once the grace period has passed: drains `id` if its key is still absent (or on a
/// lease its record does not name) and the lease its record names has ended. False when
/// that lease still lives (the origin's `origin register` is up and will put the key back),
/// reported unless `quiet`.
async fn check_absent(
    config: &RebalanceConfig,
    reporter: Reporter,
    client: &mut Client,
    id: &str,
    quiet: bool,
) -> Result<bool, Error> {
    let key = client.get(config.layout.origin(id), None).await?;
    let lease = key.kvs().first().map(|kv| kv.lease());
    if trusted(client, &config.layout, id, lease).await? {
        return Ok(true);
    }
    if let Some(named) = registered_lease(client, &config.layout, id).await?
        && lease_lives(client, named).await?
    {
        if quiet {
            return Ok(false);
        }
        reporter.event(
            "held",
            &format!(
                "{}: its key is absent but lease {named:x}, which its registration record names, lives; not drained",
                Shown(id)
            ),
            json!({"origin": id, "lease": named}),
        );
        return Ok(false);
    }
    drain(config, reporter, client, id).await?;
    Ok(true)
}

async fn drain(
    config: &RebalanceConfig,
    reporter: Reporter,
    client: &mut Client,
    id: &str,
) -> Result<(), Error> {
    let request = DrainRequest {
        origin: id.to_string(),
        regions: Vec::new(),
        reason: LEASE_EXPIRED.into(),
        source: SOURCE_REBALANCE.into(),
        by: config.by.clone(),
        at: now_rfc3339(),
        force: false,
        skip_emptying: true,
        fleet_limit: None,
    };
    // A refusal means the origin is registered but listed in no region: nothing to take.
    // The drain always proceeds; its predicted load is recorded for alerts to see.
    let drained = auto_drain(
        client,
        &config.layout,
        &config.retry,
        AutoDrain {
            request: &request,
            on_fail: OnFail::Drain,
            exempt: ExemptReason::Rebalance,
            traffic: &config.traffic,
        },
    )
    .await;
    report(reporter, "drained", id, nothing_if_invalid(drained))
}

async fn restore(
    config: &RebalanceConfig,
    reporter: Reporter,
    client: &mut Client,
    id: &str,
) -> Result<(), Error> {
    // A refusal means no drain is recorded for it: nothing to give back.
    let restored = auto_restore(
        client,
        &config.layout,
        &config.retry,
        id,
        ExemptReason::Rebalance,
    )
    .await;
    report(reporter, "restored", id, nothing_if_invalid(restored))
}

/// A plan refused as invalid (the origin has nothing to drain or to restore) means that
/// there is nothing to change.
fn nothing_if_invalid(committed: Result<Committed, Error>) -> Result<Option<Committed>, Error> {
    match committed {
        Err(Error::Invalid(_)) => Ok(None),
        other => other.map(Some),
    }
}

/// Reports a drain or restore. A conflict that outlived the retries ends the session (the
/// next one re-lists and tries again); other errors too.
fn report(
    reporter: Reporter,
    event: &str,
    id: &str,
    committed: Result<Option<Committed>, Error>,
) -> Result<(), Error> {
    let Some(committed) = committed? else {
        return Ok(());
    };
    let notes = Shown(&committed.changes.notes.join("; ")).to_string();
    let shown = Shown(id);
    match committed.revision {
        Some(revision) => reporter.event(
            event,
            &format!("{shown} at revision {revision}{}", if notes.is_empty() { String::new() } else { format!(" ({notes})") }),
            json!({"origin": id, "revision": revision, "regions": committed.changes.regions.keys().collect::<Vec<_>>(), "notes": committed.changes.notes}),
        ),
        None if !notes.is_empty() => reporter.event("unchanged", &format!("{shown}: {notes}"), json!({"origin": id, "notes": committed.changes.notes})),
        None => {}
    }
    Ok(())
}
