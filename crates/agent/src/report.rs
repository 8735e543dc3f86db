//! Node reports: after each publication the agent says, in etcd, which revision this node
//! routes from, since when, and whether it could use every key.
//!
//! Two keys per node, both outside the routing prefix so no agent's watch ever sees them:
//!
//! - `<nodes prefix><id>` (default `/dw/nodes/<id>`) on a short lease (10 s), kept alive:
//!   the node is live while it exists;
//! - `<nodes prefix>-seen/<id>` on a long lease (10 min), written in the same transaction:
//!   after the live key's lease expires, `dwctl status` shows the node as gone from it
//!   until that lease expires too. Nothing has to clean up after a dead node.
//!
//! Writes are coalesced: the watch loop only replaces the latest report in a `watch`
//! channel (it never waits), and this task writes at most once per `min_interval`, always
//! the latest, so a burst costs one write per interval plus one when it ends. A refused
//! write (permissions, quota, etcd away) is logged and counted, then retried with backoff;
//! publication never depends on it.

pub(crate) mod heal;
pub(crate) mod heartbeat;
pub(crate) mod json;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{info, warn};

use crate::config::ReportConfig;
use crate::etcd::{Connector, describe};
use crate::metrics::Metrics;
use crate::report::heal::{Change, Healer, KeyWatch};
use crate::report::json::{Report, unix_ms};

/// The report writer: runs beside the watch loop until dropped.
pub(crate) struct Reporter {
    pub(crate) connector: Connector,
    pub(crate) endpoints: Vec<String>,
    pub(crate) config: ReportConfig,
    pub(crate) snapshot: String,
    pub(crate) request_timeout: Duration,
    pub(crate) reports: watch::Receiver<Option<Report>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) lease: LeaseHandle,
    /// Changes of our keys by others, and conflicts (`heal.rs`).
    pub(crate) healer: Healer,
    /// Why our keys cannot be watched, as last logged.
    pub(crate) watch_refused: Option<String>,
}

/// The live report's lease and a client to revoke it with, shared with the agent.
#[derive(Clone, Default)]
pub(crate) struct LeaseHandle(Arc<Mutex<Option<(Client, i64)>>>);

impl LeaseHandle {
    fn set(&self, client: &Client, lease: i64) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        *slot = Some((client.clone(), lease));
    }

    fn take(&self) -> Option<(Client, i64)> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Revokes the live report's lease (best effort, bounded): the node leaves the live set.
pub(crate) async fn revoke(lease: &LeaseHandle, deadline: Duration) {
    if let Some((mut client, id)) = lease.take() {
        match crate::etcd::within(deadline, client.lease_revoke(id)).await {
            Ok(_) => info!("node report: lease revoked, the node is listed as gone"),
            Err(message) => {
                warn!(error = %message, "node report: cannot revoke the lease; it expires by itself")
            }
        }
    }
}

/// One connection's leases.
struct Leases {
    client: Client,
    live: i64,
    seen: i64,
    live_keeper: LeaseKeeper,
    live_stream: LeaseKeepAliveStream,
    seen_keeper: LeaseKeeper,
    seen_stream: LeaseKeepAliveStream,
}

const MAX_BACKOFF: Duration = Duration::from_secs(30);

impl Reporter {
    pub(crate) async fn run(mut self) {
        let mut index = std::process::id() as usize % self.endpoints.len().max(1);
        let mut failures = 0u32;
        let mut last_error: Option<String> = None;
        loop {
            let endpoint = self.endpoints[index].clone();
            index = (index + 1) % self.endpoints.len();
            match self
                .session(&endpoint, &mut failures, &mut last_error)
                .await
            {
                Ok(()) => return,
                Err(message) => {
                    self.metrics.report_failed();
                    if last_error.as_deref() != Some(message.as_str()) {
                        warn!(endpoint, error = %message, "node report: cannot write; routing is unaffected, retrying");
                        last_error = Some(message);
                    }
                    failures = failures.saturating_add(1);
                    tokio::time::sleep(backoff(self.config.min_interval, failures)).await;
                }
            }
        }
    }

    /// Grants the leases and writes reports until something fails (`Err`) or the agent
    /// goes away (`Ok`).
    async fn session(
        &mut self,
        endpoint: &str,
        failures: &mut u32,
        last_error: &mut Option<String>,
    ) -> Result<(), String> {
        let mut leases = self.grant(endpoint).await?;
        let mut last_write: Option<Instant> = None;
        let mut pending = true;
        // Our two keys, watched from just after this session's first write.
        let mut guard: Option<KeyWatch> = None;
        let keepalive_every = self.config.ttl / 3;
        let mut ticker = tokio::time::interval(keepalive_every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        let mut ticks = 0u64;
        let (mut live_answered, mut seen_answered) = (Instant::now(), Instant::now());
        loop {
            let mut write_at = match last_write {
                Some(at) if *failures > 0 => at + backoff(self.config.min_interval, *failures),
                Some(at) => at + self.config.min_interval,
                None => Instant::now(),
            };
            // In conflict with another agent, every write waits for the conflict's backoff.
            if let Some(not_before) = self.healer.not_before() {
                write_at = write_at.max(not_before);
            }
            tokio::select! {
                changed = self.reports.changed() => {
                    if changed.is_err() {
                        return Ok(());
                    }
                    pending = true;
                    continue;
                }
                _ = tokio::time::sleep_until(write_at), if pending => {
                    let report = self.reports.borrow_and_update().clone();
                    let Some(report) = report else {
                        pending = false;
                        continue;
                    };
                    last_write = Some(Instant::now());
                    match self.write(&mut leases, &report).await {
                        Ok(revision) => {
                            pending = false;
                            self.metrics.report_written();
                            self.healer.written(&self.metrics);
                            self.guard(&mut guard, &leases.client, revision).await;
                            if last_error.is_some() {
                                info!("node report: writing again");
                            }
                            *failures = 0;
                            *last_error = None;
                        }
                        Err(message) => {
                            self.metrics.report_failed();
                            *failures = failures.saturating_add(1);
                            if message.contains("lease not found") {
                                return Err(message);
                            }
                            if last_error.as_deref() != Some(message.as_str()) {
                                warn!(error = %message, "node report: write refused; routing is unaffected, retrying");
                                *last_error = Some(message);
                            }
                        }
                    }
                }
                changes = changes(&mut guard) => match changes {
                    Ok(changes) => {
                        for change in changes {
                            self.healer.changed(change, Instant::now(), &self.metrics);
                            pending = true;
                        }
                    }
                    Err(message) => {
                        // Watched again after the next write, which comes at once.
                        warn!(error = %message, "node report: the watch on it ended; writing it again");
                        guard = None;
                        pending = true;
                    }
                },
                // Keep-alive answers are taken here, not awaited after each request: an
                // `etcd grpc-proxy` answers one only when its own keep-alive loop next hears
                // from etcd (every third of the lease's TTL, 200 s for the seen lease), and
                // waiting for that held back report writes for seconds.
                answer = leases.live_stream.message() => {
                    lease_answer(answer, "report")?;
                    live_answered = Instant::now();
                }
                answer = leases.seen_stream.message() => {
                    lease_answer(answer, "seen record")?;
                    seen_answered = Instant::now();
                }
                _ = ticker.tick() => {
                    ticks += 1;
                    if self.healer.expire(Instant::now(), &self.metrics) {
                        pending = true;
                    }
                    // Unanswered for a whole TTL: the lease has expired or the connection is
                    // gone; a new session grants new leases.
                    if live_answered.elapsed() > self.config.ttl {
                        return Err("report lease keep-alive: no answer".into());
                    }
                    if seen_answered.elapsed() > self.config.seen_ttl {
                        return Err("seen record lease keep-alive: no answer".into());
                    }
                    send_keep_alive(&mut leases.live_keeper, self.request_timeout, "report").await?;
                    // The seen lease is long; refreshing it every tenth tick is plenty.
                    if ticks.is_multiple_of(10) {
                        send_keep_alive(&mut leases.seen_keeper, self.request_timeout, "seen record").await?;
                    }
                }
            }
        }
    }

    async fn grant(&mut self, endpoint: &str) -> Result<Leases, String> {
        let timeout = self.request_timeout;
        let mut client = self
            .connector
            .connect(endpoint)
            .await
            .map_err(|e| e.to_string())?;
        let ttl = |d: Duration| i64::try_from(d.as_secs().max(1)).unwrap_or(i64::MAX);
        let live = crate::etcd::within(timeout, client.lease_grant(ttl(self.config.ttl), None))
            .await
            .map_err(|m| format!("lease grant: {m}"))?
            .id();
        let seen =
            crate::etcd::within(timeout, client.lease_grant(ttl(self.config.seen_ttl), None))
                .await
                .map_err(|m| format!("lease grant: {m}"))?
                .id();
        let (live_keeper, live_stream) =
            crate::etcd::within(timeout, client.lease_keep_alive(live))
                .await
                .map_err(|m| format!("lease keep-alive: {m}"))?;
        let (seen_keeper, seen_stream) =
            crate::etcd::within(timeout, client.lease_keep_alive(seen))
                .await
                .map_err(|m| format!("lease keep-alive: {m}"))?;
        self.lease.set(&client, live);
        Ok(Leases {
            client,
            live,
            seen,
            live_keeper,
            live_stream,
            seen_keeper,
            seen_stream,
        })
    }

    /// After a write committed at `revision`: its events are ours; the first one of a
    /// session opens the watch on our keys. A watch refused (a role without read on the
    /// keys) is logged once and tried again after the next write: reports go on unguarded.
    async fn guard(&mut self, guard: &mut Option<KeyWatch>, client: &Client, revision: i64) {
        if let Some(guard) = guard {
            guard.own_write(revision);
            return;
        }
        let keys = [self.config.key(), self.config.seen_key()];
        match KeyWatch::open(client, keys, revision + 1, self.request_timeout).await {
            Ok(watch) => {
                *guard = Some(watch);
                self.watch_refused = None;
            }
            Err(message) => {
                if self.watch_refused.as_deref() != Some(message.as_str()) {
                    warn!(error = %message, "node report: cannot watch it; a delete or overwrite \
                        by someone else is not healed until this works");
                    self.watch_refused = Some(message);
                }
            }
        }
    }

    /// Writes both keys in one transaction; `Ok` holds the revision it committed at.
    async fn write(&self, leases: &mut Leases, report: &Report) -> Result<i64, String> {
        let now = unix_ms(SystemTime::now());
        let conflict = self.healer.conflict();
        let value = report.to_json(&self.config, &self.snapshot, now, leases.live, conflict);
        let txn = Txn::new().and_then([
            TxnOp::put(
                self.config.key(),
                value.clone(),
                Some(PutOptions::new().with_lease(leases.live)),
            ),
            TxnOp::put(
                self.config.seen_key(),
                value,
                Some(PutOptions::new().with_lease(leases.seen)),
            ),
        ]);
        crate::etcd::within(self.request_timeout, leases.client.txn(txn))
            .await
            .map(|response| response.header().map_or(0, |header| header.revision()))
    }
}

/// The next changes of our keys by someone else; never, while they are not watched.
async fn changes(guard: &mut Option<KeyWatch>) -> Result<Vec<Change>, String> {
    match guard {
        Some(guard) => guard.next().await,
        None => std::future::pending().await,
    }
}

async fn send_keep_alive(
    keeper: &mut LeaseKeeper,
    timeout: Duration,
    what: &str,
) -> Result<(), String> {
    crate::etcd::within(timeout, keeper.keep_alive())
        .await
        .map_err(|m| format!("{what} lease keep-alive: {m}"))
}

/// One keep-alive answer: `Err` when the lease expired or the stream ended.
fn lease_answer(
    answer: Result<Option<etcd_client::LeaseKeepAliveResponse>, etcd_client::Error>,
    what: &str,
) -> Result<(), String> {
    match answer {
        Ok(Some(response)) if response.ttl() > 0 => Ok(()),
        Ok(Some(_)) => Err(format!("the {what} lease expired; granting a new one")),
        Ok(None) => Err(format!("the {what} lease keep-alive stream ended")),
        Err(e) => Err(format!("{what} lease keep-alive: {}", describe(&e))),
    }
}

/// Delay before retrying after `failures` failures in a row: doubling from the interval,
/// capped, so a fleet refused by etcd does not hammer it.
fn backoff(interval: Duration, failures: u32) -> Duration {
    interval
        .saturating_mul(1u32 << failures.min(6))
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let second = Duration::from_secs(1);
        assert_eq!(backoff(second, 1), Duration::from_secs(2));
        assert_eq!(backoff(second, 3), Duration::from_secs(8));
        assert_eq!(backoff(second, 40), MAX_BACKOFF);
    }
}
