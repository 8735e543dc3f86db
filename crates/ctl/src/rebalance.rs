//! `rebalance`: drain origins whose lease expires, restore them when they register again.
//!
//! A session lists origins, registration markers and drain records at one revision,
//! reconciles (registered but gone: drain; live with a rebalance drain: restore), then
//! watches `<prefix>origin/` from the next revision. Any error ends the session; the next
//! one starts after a jittered backoff with a fresh list, so an etcd restart or a compacted
//! watch costs a re-list, never a missed change. Only origins that registered (a marker,
//! or a key seen live) are ever drained, and only drains made by rebalance are restored.

use std::collections::BTreeSet;
use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};
use serde_json::{Value, json};

use crate::clock::{now_rfc3339, operator};
use crate::context::Context;
use crate::drain::{DrainRequest, plan_drain, plan_restore};
use crate::error::Error;
use dw_etcd::{Backoff, EtcdOptions};

use crate::etcd::{Layout, strip};
use crate::origin::{list_origins, mark_registered};
use crate::output::{Outcome, Reporter};
use crate::record::SOURCE_REBALANCE;
use crate::sessions::Sessions;
use crate::shutdown::Shutdown;
use crate::state::{Changes, Committed, RetryPolicy, State, transact};

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
}

pub async fn command(context: &Context, shutdown: Shutdown) -> Result<Outcome, Error> {
    let config = RebalanceConfig {
        etcd: context.etcd.clone(),
        layout: context.layout.clone(),
        retry: context.retry,
        by: format!("rebalance:{}", operator()),
    };
    run(&config, context.reporter(), shutdown).await?;
    Ok(Outcome {
        text: String::new(),
        json: json!({"stopped": true}),
    })
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
    for id in &seen {
        if listing.live.contains_key(id) {
            if listing
                .drains
                .get(id)
                .is_some_and(|record| record.source == SOURCE_REBALANCE)
            {
                restore(config, reporter, &mut client, id).await?;
            }
        } else {
            drain(config, reporter, &mut client, id).await?;
        }
    }
    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(listing.revision + 1);
    let mut stream = client.watch(config.layout.origins(), Some(options)).await?;
    backoff.reset();
    loop {
        let message = tokio::select! {
            _ = shutdown.wait() => return Ok(()),
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
                    reporter.event("up", &format!("{id} registered"), json!({"origin": id}));
                    restore(config, reporter, &mut client, &id).await?;
                }
                EventType::Delete if seen.contains(&id) => {
                    reporter.event(
                        "down",
                        &format!("{id}: its key vanished (lease ended)"),
                        json!({"origin": id}),
                    );
                    drain(config, reporter, &mut client, &id).await?;
                }
                EventType::Delete => {}
            }
        }
    }
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
    let plan = |state: &State| plan_drain(state, &request);
    report(
        reporter,
        "drained",
        id,
        transact_unless_invalid(config, client, plan).await,
    )
}

async fn restore(
    config: &RebalanceConfig,
    reporter: Reporter,
    client: &mut Client,
    id: &str,
) -> Result<(), Error> {
    // A refusal means no drain is recorded for it: nothing to give back.
    let plan = |state: &State| plan_restore(state, id, Some(SOURCE_REBALANCE));
    report(
        reporter,
        "restored",
        id,
        transact_unless_invalid(config, client, plan).await,
    )
}

/// Commits `plan`, taking its refusal as invalid (the origin has nothing to drain or to
/// restore) to mean that there is nothing to change.
async fn transact_unless_invalid(
    config: &RebalanceConfig,
    client: &mut Client,
    mut plan: impl FnMut(&State) -> Result<Changes, Error>,
) -> Result<Committed, Error> {
    transact(
        client,
        &config.layout,
        &config.retry,
        &now_rfc3339(),
        |state| match plan(state) {
            Err(Error::Invalid(_)) => Ok(Changes::default()),
            other => other,
        },
    )
    .await
}

/// Reports a drain or restore. A conflict that outlived the retries ends the session (the
/// next one re-lists and tries again); other errors too.
fn report(
    reporter: Reporter,
    event: &str,
    id: &str,
    committed: Result<Committed, Error>,
) -> Result<(), Error> {
    let committed = committed?;
    let notes = committed.changes.notes.join("; ");
    match committed.revision {
        Some(revision) => reporter.event(
            event,
            &format!("{id} at revision {revision}{}", if notes.is_empty() { String::new() } else { format!(" ({notes})") }),
            json!({"origin": id, "revision": revision, "regions": committed.changes.regions.keys().collect::<Vec<_>>(), "notes": committed.changes.notes}),
        ),
        None if !notes.is_empty() => reporter.event("unchanged", &format!("{id}: {notes}"), json!({"origin": id, "notes": committed.changes.notes})),
        None => {}
    }
    Ok(())
}
