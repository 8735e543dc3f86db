//! The origin registration daemon behind `origin register` (a long-running keep-alive),
//! (`commands::origin` is the command; the listing `origin list` and `rebalance` share is
//! `ops::origin`'s).
//!
//! An origin's key `<prefix>origin/<id>` lives on a lease; when the process stops renewing
//! it, etcd deletes the key and `rebalance` drains the origin. Registering also writes a
//! record `<control prefix>registered/<id>` (no lease) naming the lease: the record that
//! this origin registered, so that `rebalance` knows which vanished keys are worth a drain
//! even when it was not running at the time, and believes a key (or its disappearance)
//! only on that lease. `origin register` watches its own key: deleted, or put on another
//! lease, by anyone else while its lease lives, it is put back at once.

use std::time::Duration;

use etcd_client::{Client, EventType, WatchOptions};

use crate::ops::commit::{RecordWrite, write};
use serde_json::{Map, Value, json};

use crate::error::Error;
use crate::plan::clock::now_rfc3339;
use dw_etcd::{Backoff, EtcdOptions};

use crate::daemons::sessions::Sessions;
use crate::output::Reporter;
use crate::plan::keys::Layout;
use crate::shutdown::Shutdown;

/// What `origin register` keeps alive.
#[derive(Debug, Clone)]
pub struct RegisterConfig {
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Where the keys are.
    pub layout: Layout,
    /// The origin's name.
    pub id: String,
    /// Lease time-to-live, seconds.
    pub ttl: i64,
    /// The key's value.
    pub meta: Map<String, Value>,
}

/// How a registration session ended.
enum SessionEnd {
    Shutdown,
    LeaseLost,
}

/// Registers the origin and keeps its lease alive until `shutdown`, then revokes it. A lost
/// lease is replaced by a new registration; an unreachable etcd is retried with backoff.
pub async fn register(
    config: &RegisterConfig,
    reporter: Reporter,
    shutdown: Shutdown,
) -> Result<(), Error> {
    let describe = |error: &Error| {
        let fields = json!({"origin": config.id, "error": error.to_string()});
        (format!("{}: {error}; retrying", config.id), fields)
    };
    let sessions = Sessions::new(reporter, shutdown, Duration::from_secs(5));
    sessions
        .run(config, describe, |config, shutdown, backoff| {
            Box::pin(async move {
                match session(config, reporter, shutdown, backoff).await? {
                    SessionEnd::Shutdown => Ok(true),
                    SessionEnd::LeaseLost => {
                        reporter.event(
                            "lease-lost",
                            &format!("{}: the lease expired; registering again", config.id),
                            json!({"origin": config.id}),
                        );
                        Ok(false)
                    }
                }
            })
        })
        .await;
    Ok(())
}

async fn session(
    config: &RegisterConfig,
    reporter: Reporter,
    shutdown: &mut Shutdown,
    backoff: &mut Backoff,
) -> Result<SessionEnd, Error> {
    let mut client = config.etcd.connect().await?;
    let lease = client.lease_grant(config.ttl, None).await?.id();
    let key = config.layout.origin(&config.id);
    let revision = put_registration(&mut client, config, lease).await?;
    backoff.reset();
    reporter.event(
        "registered",
        &format!(
            "{} at {key} on lease {lease:x} (ttl {}s)",
            config.id, config.ttl
        ),
        json!({"origin": config.id, "key": key, "lease": lease, "ttl": config.ttl, "revision": revision}),
    );
    // Its own key, from the registration on: a delete, or a put on another lease, by
    // anyone else is undone at once.
    let mut watch = client
        .watch(
            key.as_str(),
            Some(WatchOptions::new().with_start_revision(revision + 1)),
        )
        .await?;
    let (mut keeper, mut responses) = client.lease_keep_alive(lease).await?;
    let period = Duration::from_millis((config.ttl as u64 * 1000 / 3).max(200));
    let mut ticker = tokio::time::interval(period);
    loop {
        tokio::select! {
            _ = shutdown.wait() => {
                let revoked = tokio::time::timeout(Duration::from_secs(3), client.lease_revoke(lease)).await;
                let text = match revoked {
                    Ok(Ok(_)) => format!("{}: lease revoked, key deleted", config.id),
                    Ok(Err(error)) => format!("{}: could not revoke the lease ({error}); the key expires within {}s", config.id, config.ttl),
                    Err(_) => format!("{}: revoking timed out; the key expires within {}s", config.id, config.ttl),
                };
                reporter.event("stopped", &text, json!({"origin": config.id}));
                return Ok(SessionEnd::Shutdown);
            }
            // A frozen process finds its lease gone either way: a keep-alive answered
            // with ttl 0, or an error naming the lease (which of the two depends on when
            // the stream noticed). Both are a lost lease, not an etcd failure.
            _ = ticker.tick() => {
                if let Err(error) = keeper.keep_alive().await {
                    return lease_lost_or(error.into());
                }
            }
            message = responses.message() => match message.map_err(Error::from) {
                Err(error) => return lease_lost_or(error),
                Ok(Some(response)) if response.ttl() <= 0 => return Ok(SessionEnd::LeaseLost),
                Ok(Some(_)) => {}
                Ok(None) => return Err(Error::Failed("the keep-alive stream ended".into())),
            },
            message = watch.message() => {
                let Some(response) = message? else {
                    return Err(Error::Failed("the watch of the origin's key ended".into()));
                };
                if response.canceled() {
                    return Err(Error::Failed(format!(
                        "the watch of the origin's key was canceled ({})",
                        response.cancel_reason()
                    )));
                }
                let changed = response.events().iter().rev().find_map(|event| {
                    let kv = event.kv()?;
                    match event.event_type() {
                        EventType::Delete => Some((kv.mod_revision(), "deleted".to_owned())),
                        EventType::Put if kv.lease() != lease => Some((
                            kv.mod_revision(),
                            format!("put on lease {:x}, not ours", kv.lease()),
                        )),
                        EventType::Put => None,
                    }
                });
                if let Some((changed_at, how)) = changed {
                    reporter.event(
                        "key-changed",
                        &format!(
                            "{}: {key} was {how} at revision {changed_at} while lease {lease:x} lives; registering again",
                            config.id
                        ),
                        json!({"origin": config.id, "key": key, "revision": changed_at, "change": how, "lease": lease}),
                    );
                    let revision = match put_registration(&mut client, config, lease).await {
                        Ok(revision) => revision,
                        // It vanished because the lease expired (this process was
                        // frozen past the ttl): register anew.
                        Err(error) => return lease_lost_or(error),
                    };
                    reporter.event(
                        "re-registered",
                        &format!("{} at {key} on lease {lease:x} again (revision {revision})", config.id),
                        json!({"origin": config.id, "key": key, "lease": lease, "revision": revision}),
                    );
                }
            }
        }
    }
}

/// Puts the origin's key on `lease` and its registration record naming that lease, in one
/// transaction; the revision it committed at.
async fn put_registration(
    client: &mut Client,
    config: &RegisterConfig,
    lease: i64,
) -> Result<i64, Error> {
    let key = config.layout.origin(&config.id);
    let marker = config.layout.registration(&config.id);
    let value = Value::Object(config.meta.clone()).to_string();
    let record =
        json!({"origin": config.id, "registered": now_rfc3339(), "lease": lease}).to_string();
    let registration = RecordWrite::new()
        .put_on_lease(&key, value, lease)
        .put(&marker, record);
    // Unguarded: it always commits.
    Ok(write(client, registration).await?.unwrap_or(0))
}

/// The lease an origin's registration record names (`None`: no record, or a record
/// written before records named leases, or by `rebalance` for a key it found live).
pub async fn registered_lease(
    client: &mut Client,
    layout: &Layout,
    id: &str,
) -> Result<Option<i64>, Error> {
    let response = client.get(layout.registration(id), None).await?;
    Ok(response.kvs().first().and_then(|kv| {
        serde_json::from_slice::<Value>(kv.value())
            .ok()?
            .get("lease")?
            .as_i64()
    }))
}

/// Writes the registration marker of `id` unless it exists.
pub async fn mark_registered(client: &mut Client, layout: &Layout, id: &str) -> Result<(), Error> {
    let marker = layout.registration(id);
    let record = json!({"origin": id, "registered": now_rfc3339()}).to_string();
    // Guarded on its absence: an existing marker (maybe naming a lease) is kept.
    write(
        client,
        RecordWrite::new().guard(&marker, 0).put(&marker, record),
    )
    .await?;
    Ok(())
}

/// A lease etcd no longer has (it expired while this process was frozen) ends the session
/// as lost, to register anew; any other error is an error.
fn lease_lost_or(error: Error) -> Result<SessionEnd, Error> {
    if error.to_string().contains("lease not found") {
        Ok(SessionEnd::LeaseLost)
    } else {
        Err(error)
    }
}
