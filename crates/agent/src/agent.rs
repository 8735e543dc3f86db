//! The agent's life: connecting, listing, watching, backing off, and publishing in between.
//!
//! ```text
//!   starting ──► connecting ──► listing ──► watching ──┐
//!                    ▲                                 │ error, compaction, no leader,
//!                    └──────── backing off ◄───────────┘ stall, cancel
//! ```
//!
//! Every session starts with a full list, so no failure can leave a gap: whatever happened
//! while the agent was away is in the next listing.

pub(crate) mod coalesce;
pub(crate) mod mirror;
pub(crate) mod stages;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use etcd_client::{Client, WatchStream};
use tokio::net::TcpListener;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::{error, info, warn};

use crate::agent::coalesce::{Coalescer, window_end};
use crate::agent::mirror::{Mirror, release_freed_memory};
use crate::config::Config;
use crate::error::Error;
use crate::etcd::{Connector, classify, within};
use crate::metrics::http;
use crate::metrics::{Metrics, State, StatusHandle};
use crate::publish::{Hold, Outcome, Publication, Publisher, WriteRetry};
use crate::report::Reporter;
use crate::report::json::{Condition, Report, ignored_in, rejected_in, unix_ms};
use dw_etcd::Backoff;

/// A started agent: configuration checked, snapshot directory usable, metrics bound.
pub struct Agent {
    config: Config,
    connector: Connector,
    publisher: Publisher,
    mirror: Mirror,
    metrics: Arc<Metrics>,
    listener: Option<TcpListener>,
    last_hold: Option<Hold>,
    observer: Option<UnboundedSender<Publication>>,
    /// The latest node report, for the reporter task (`None` when reports are off).
    reports: Option<watch::Sender<Option<Report>>>,
    reporter: Option<Reporter>,
    /// Keys of the published state left out of routing, once known.
    rejected: Option<crate::report::json::Rejected>,
    /// Regions of the published state whose stored assignment routers ignore, computed
    /// with `rejected` (so when `rejected` is known).
    ignored_assignments: crate::report::json::Rejected,
    published_at_ms: Option<u64>,
    /// The node's effective state when stages are open (`None`: the mirror's snapshot).
    effective: Option<dw_routing::stage::Overlay>,
    /// A published file with stages applied, as read at start: its keys are effective
    /// values, so the first state is compared with it rather than with etcd's keys.
    published_effective: Option<dw_routing::Snapshot>,
    /// The live report's lease, revoked on a clean stop.
    report_lease: Option<crate::report::LeaseHandle>,
    /// Why the readers refuse the published file, as last checked (logged on change).
    refused_by_readers: Option<String>,
    /// Backoff between failed writes, and the cause last logged.
    write_retry: WriteRetry,
    /// Bursts of changes wait for the end of `--coalesce-window` (see `coalesce`).
    coalescer: Coalescer,
    /// Purges the page cache after each publication (`--purge-url`; see `purge`).
    purge: Option<crate::purge::Purge>,
}

/// How a session ended.
struct Ended {
    error: Error,
    /// How long the watch was up, if it got that far.
    watched_for: Option<Duration>,
}

impl Agent {
    /// Does everything that can fail for good before the first connection: validates the
    /// configuration and TLS files, checks the snapshot directory, reads the published
    /// snapshot, binds the metrics address. Nothing here touches the published file.
    pub async fn start(config: Config) -> Result<Agent, Error> {
        config.validate()?;
        let connector = Connector::new(&config).await?;
        let readers = dw_snapshot_trust::TrustedOwner::parse(&config.trusted_owner);
        info!(snapshot = %config.snapshot.display(), readers_trust = %readers.describe(),
            "checking the snapshot by the readers' trust rules (--trusted-owner)");
        let (publisher, published) =
            Publisher::open(&config.snapshot, config.allow_empty, readers)?;
        let published_effective = published
            .as_ref()
            .filter(|published| !published.stages.is_empty())
            .cloned();
        let mirror = Mirror::new(&config.prefix, published);
        let mut metrics = Metrics::new(config.timing.stall_timeout, publisher.published_revision());
        if let Some(dir) = &config.answers_dir {
            let node = config
                .node_id
                .clone()
                .or_else(|| config.report.as_ref().map(|report| report.node_id.clone()))
                .or_else(crate::config::host_name)
                .unwrap_or_else(|| "unknown".into());
            let users = config
                .php_users
                .iter()
                .map(|user| (user.name.clone(), user.uid))
                .collect();
            metrics = metrics.with_answers(dir.clone(), node, users);
        }
        let metrics = Arc::new(metrics);
        let mut agent_refusal = None;
        check_readers(&publisher, &metrics, &mut agent_refusal);
        let listener =
            match config.metrics_addr {
                Some(addr) => Some(TcpListener::bind(addr).await.map_err(|source| {
                    Error::MetricsListener {
                        addr: addr.to_string(),
                        source,
                    }
                })?),
                None => None,
            };
        let report_lease = config
            .report
            .as_ref()
            .map(|_| crate::report::LeaseHandle::default());
        let (reports, reporter) = match &config.report {
            Some(report) => {
                let (sender, receiver) = watch::channel(None);
                let reporter = Reporter {
                    connector: connector.clone(),
                    endpoints: config.etcd.endpoints.clone(),
                    config: report.clone(),
                    snapshot: config.snapshot.display().to_string(),
                    request_timeout: config.etcd.request_timeout,
                    reports: receiver,
                    metrics: metrics.clone(),
                    lease: report_lease.clone().unwrap_or_default(),
                    healer: crate::report::heal::Healer::default(),
                    watch_refused: None,
                };
                (Some(sender), Some(reporter))
            }
            None => (None, None),
        };
        let purge = crate::purge::Purge::start(&config, metrics.purge.clone(), reports.clone())?;
        Ok(Agent {
            connector,
            publisher,
            mirror,
            metrics,
            listener,
            last_hold: None,
            observer: None,
            reports,
            reporter,
            rejected: None,
            ignored_assignments: crate::report::json::Rejected::default(),
            published_at_ms: None,
            effective: None,
            published_effective,
            report_lease,
            refused_by_readers: agent_refusal,
            write_retry: WriteRetry::new(config.timing.backoff_initial, config.timing.backoff_max),
            coalescer: Coalescer::new(config.timing.coalesce_window),
            purge,
            config,
        })
    }

    /// The address `/metrics` and `/healthz` listen on (useful when the port was 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.listener.as_ref().and_then(|l| l.local_addr().ok())
    }

    /// A handle on the agent's status, valid while and after it runs.
    pub fn status(&self) -> StatusHandle {
        StatusHandle(self.metrics.clone())
    }

    /// Reports every publication (revision, keys, rename time) on a channel.
    pub fn observe_publications(&mut self) -> UnboundedReceiver<Publication> {
        let (sender, receiver) = unbounded_channel();
        self.observer = Some(sender);
        receiver
    }

    /// Runs until `shutdown` completes. The published snapshot stays in place: stopping
    /// never touches it, and a write in progress is never interrupted half way (writes do
    /// not yield to the scheduler).
    pub async fn run(mut self, shutdown: impl Future<Output = ()>) -> Result<(), Error> {
        info!(
            endpoints = ?self.config.etcd.endpoints,
            prefix = %self.config.prefix,
            snapshot = %self.config.snapshot.display(),
            metrics = ?self.metrics_addr(),
            "dw-agent starting"
        );
        let server = match self.listener.take() {
            Some(listener) => Some(http::serve(
                listener,
                self.metrics.clone(),
                self.config.metrics_max_connections,
            )),
            None => None,
        };
        let serving = async move {
            match server {
                Some(server) => server.await,
                None => std::future::pending().await,
            }
        };
        // Reports go beside the watch loop, never in its way.
        let reporter = self.reporter.take();
        let reporting = async move {
            if let Some(reporter) = reporter {
                reporter.run().await;
            }
            std::future::pending::<()>().await
        };
        let lease = self.report_lease.clone();
        let _heartbeat = crate::report::heartbeat::start(
            &self.config.snapshot,
            self.config.heartbeat_interval,
            self.status(),
        );
        tokio::select! {
            () = shutdown => {
                info!(
                    revision = ?self.publisher.published_revision(),
                    "shutting down; the published snapshot stays in place"
                );
            }
            never = self.supervise() => match never {},
            () = serving => {}
            () = reporting => {}
        }
        // A clean stop takes the node out of the live set at once (its last-seen record
        // stays): `dwctl --wait` stops waiting for it without waiting out the lease.
        if let Some(lease) = lease {
            // Bounded: with etcd away, stopping must not hang on it.
            let deadline = self.config.etcd.dial_timeout.min(Duration::from_secs(1));
            crate::report::revoke(&lease, deadline).await;
        }
        Ok(())
    }

    /// Runs sessions forever, backing off between them and moving through the endpoints.
    async fn supervise(&mut self) -> Infallible {
        let timing = self.config.timing.clone();
        let mut backoff = Backoff::new(timing.backoff_initial, timing.backoff_max);
        let endpoints = self.config.etcd.endpoints.clone();
        // Start at a different member on each node so a fleet spreads over the cluster.
        let mut index = std::process::id() as usize % endpoints.len();
        loop {
            let endpoint = self.connector.display_endpoint(&endpoints[index]);
            let ended = self.session(&endpoints[index], &endpoint).await;
            if ended
                .watched_for
                .is_some_and(|up| up >= timing.healthy_after)
            {
                backoff.reset();
            }
            let delay = backoff.next_delay();
            self.metrics
                .session_ended(ended.error.cause(), ended.error.to_string());
            self.metrics.set_state(State::BackingOff);
            self.report(Some(format!("etcd session ended: {}", ended.error)));
            warn!(
                cause = ended.error.cause(),
                error = %ended.error,
                retry_in_ms = delay.as_millis() as u64,
                "session with etcd ended"
            );
            tokio::time::sleep(delay).await;
            index = (index + 1) % endpoints.len();
        }
    }

    /// One session: connect, list, publish, watch until something goes wrong.
    async fn session(&mut self, address: &str, endpoint: &str) -> Ended {
        let fail = |error| Ended {
            error,
            watched_for: None,
        };
        self.metrics.set_endpoint(endpoint);
        self.metrics.set_state(State::Connecting);
        let client = match self.connector.connect(address).await {
            Ok(client) => client,
            Err(e) => return fail(e),
        };

        self.metrics.set_state(State::Listing);
        let (listing, pages) = match self.connector.list(&client, endpoint).await {
            Ok(listed) => listed,
            Err(e) => return fail(e),
        };
        listing.warn_unrepresentable();
        let cluster_id = listing.cluster_id;
        self.mirror.replace(listing);
        release_freed_memory();
        let revision = self.mirror.revision();
        if let Some(reason) = self.publisher.distrust_unless_from(cluster_id, revision) {
            warn!(
                snapshot = %self.config.snapshot.display(),
                reason = %reason,
                "the published snapshot is not trusted; replacing it with etcd's state"
            );
            self.mirror.mark_dirty();
        }
        self.metrics.event_received();
        info!(
            endpoint,
            revision,
            keys = self.mirror.snapshot().kvs.len(),
            pages,
            "listed the prefix"
        );
        self.publish_if_changed(None);

        let mut stream = match self.connector.watch(&client, endpoint, revision + 1).await {
            Ok(stream) => stream,
            Err(e) => return fail(e),
        };
        self.metrics.set_state(State::Watching);
        self.metrics.response_received();
        info!(endpoint, from_revision = revision + 1, "watching");
        let watching_since = Instant::now();
        let error = self.follow(&client, &mut stream, endpoint).await;
        Ended {
            error,
            watched_for: Some(watching_since.elapsed()),
        }
    }

    /// Applies watch responses until the watch fails. The watchdog asks for progress every
    /// interval. A watch that stays silent (no events, no progress) until the stall timeout
    /// is checked with one read of the prefix: etcd's grpc-proxy never answers progress
    /// requests, so silence alone proves nothing there. The watch ends if the read fails, or
    /// if a change the read shows is still undelivered at the next tick.
    async fn follow(&mut self, client: &Client, stream: &mut WatchStream, endpoint: &str) -> Error {
        let timing = self.config.timing.clone();
        let mut ticker = tokio::time::interval_at(
            tokio::time::Instant::now() + timing.progress_interval,
            timing.progress_interval,
        );
        ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut last_response = Instant::now();
        // A revision a read showed that the watch had not delivered yet.
        let mut undelivered: Option<u64> = None;
        loop {
            let deadline = self.coalescer.deadline();
            tokio::select! {
                () = window_end(deadline) => self.publish_if_changed(None),
                message = stream.message() => {
                    let response = match message {
                        Ok(Some(response)) => response,
                        Ok(None) => {
                            return classify(endpoint, "the server closed the watch stream".into());
                        }
                        Err(e) => return classify(endpoint, crate::etcd::describe(&e)),
                    };
                    last_response = Instant::now();
                    let received = last_response;
                    if response.canceled() {
                        if response.compact_revision() > 0 {
                            return Error::Compacted {
                                endpoint: endpoint.to_owned(),
                                compact_revision: response.compact_revision(),
                            };
                        }
                        return classify(
                            endpoint,
                            format!("watch canceled by the server: {}", response.cancel_reason()),
                        );
                    }
                    if response.events().is_empty() {
                        self.metrics.response_received();
                        continue;
                    }
                    let applied = self.mirror.apply(response.events());
                    if applied.stale_events > 0 {
                        self.metrics.stale_events(applied.stale_events);
                        warn!(events = applied.stale_events, "skipped watch events at or below the applied revision");
                    }
                    self.metrics.event_received();
                    // All events of one response make one write: a transaction's keys
                    // arrive together, so they are published together. Within a window
                    // after a publication, they wait for its end.
                    if self.mirror.is_dirty() && self.coalescer.defer(received) {
                        self.metrics.coalesced();
                    } else {
                        self.publish_if_changed(Some(received));
                    }
                }
                _ = ticker.tick() => {
                    let silent_for = last_response.elapsed();
                    let stalled = |why: String| Error::Stalled {
                        endpoint: endpoint.to_owned(),
                        silent_for_ms: silent_for.as_millis(),
                        why,
                    };
                    if let Some(revision) = undelivered.take()
                        && self.mirror.revision() < revision
                    {
                        return stalled(format!(
                            "a read of the prefix shows revision {revision}, which the watch \
                             has not delivered (it is at {})",
                            self.mirror.revision()
                        ));
                    }
                    // Checked at the last tick before the stall timeout, so a quiet but
                    // live watch never looks unhealthy in between.
                    if silent_for + timing.progress_interval >= timing.stall_timeout {
                        match self.connector.prefix_head(client).await {
                            Ok(read) => match self.mirror.lacks(read) {
                                None => {
                                    last_response = Instant::now();
                                    self.metrics.silent_watch_confirmed();
                                }
                                Some(revision) => undelivered = Some(revision),
                            },
                            Err(e) => return stalled(format!("a read of the prefix failed: {e}")),
                        }
                    }
                    if let Err(message) =
                        within(self.config.etcd.request_timeout, stream.request_progress()).await
                    {
                        return classify(endpoint, format!("progress request failed: {message}"));
                    }
                    // Retry a publication that failed or was held. Changes that wait for
                    // the coalescing window's end are not due: its branch publishes them.
                    if self.mirror.is_dirty() && self.coalescer.deadline().is_none() {
                        self.publish_if_changed(None);
                    }
                }
            }
        }
    }

    /// Publishes the mirror if its keys differ from the published file and the rules allow,
    /// then updates the node report. `received`: when the watch response arrived.
    fn publish_if_changed(&mut self, received: Option<Instant>) {
        let received = self.coalescer.attempt(received);
        self.publish(received);
        // After the rename, never before it; the purge task posts, nothing here waits.
        if let Some(purge) = self.purge.as_mut().filter(|_| !self.mirror.is_dirty()) {
            purge.published(effective_snapshot(&self.effective, &self.mirror));
        }
        self.report(None);
    }

    /// Replaces the node report the reporter task writes (it never waits for the write).
    fn report(&mut self, session_error: Option<String>) {
        let Some(reports) = &self.reports else {
            return;
        };
        if !self.mirror.is_dirty() && self.rejected.is_none() {
            let published = effective_snapshot(&self.effective, &self.mirror);
            self.rejected = Some(rejected_in(
                published,
                self.effective.as_ref(),
                self.mirror.unrepresentable_keys(),
            ));
            self.ignored_assignments = ignored_in(published);
        }
        let published_revision = self.publisher.published_revision();
        let revision = if self.mirror.is_dirty() {
            published_revision.unwrap_or(0)
        } else {
            self.mirror.revision()
        };
        let stale = session_error.or_else(|| self.metrics.stale_reason());
        let condition = match (stale, &self.rejected) {
            (Some(why), _) => Condition::Stale(why),
            (None, Some(rejected)) if !rejected.is_empty() => Condition::Rejected(rejected.clone()),
            (None, _) => Condition::Ok,
        };
        let report = Report {
            revision,
            published_revision,
            published_at_ms: self.published_at_ms,
            condition,
            stages: self
                .effective
                .as_ref()
                .map(|overlay| overlay.snapshot.stages.clone())
                .unwrap_or_default(),
            purge_failures: self.metrics.purge.failures(),
            ignored_assignments: self.ignored_assignments.clone(),
        };
        reports.send_if_modified(|current| {
            if current.as_ref() == Some(&report) {
                false
            } else {
                *current = Some(report);
                true
            }
        });
    }

    fn publish(&mut self, received: Option<Instant>) {
        let snapshot = self.mirror.snapshot();
        self.metrics.mirrored(
            snapshot.revision,
            snapshot.kvs.len(),
            self.mirror.unrepresentable_keys(),
        );
        if !self.mirror.is_dirty() {
            self.clear_hold();
            return;
        }
        // After a failed write, the next attempt waits for its backoff (the ticker and
        // later events retry): a cause that needs an operator is not hammered.
        if !self.write_retry.due(Instant::now()) {
            return;
        }
        let building = Instant::now();
        self.effective = crate::agent::stages::effective(&self.mirror, self.config.report.as_ref());
        let snapshot = effective_snapshot(&self.effective, &self.mirror);
        if let Some(published) = self.published_effective.take()
            && published.kvs == snapshot.kvs
            && published.stages == snapshot.stages
        {
            // The file written before this agent started already holds this node's state.
            self.mirror.mark_published();
            self.rejected = None;
            self.clear_hold();
            return;
        }
        match self.publisher.publish(snapshot) {
            Outcome::Written(publication) => {
                if self.write_retry.succeeded() {
                    info!("the snapshot can be written again");
                }
                self.mirror.mark_published();
                self.coalescer.written(publication.renamed_at);
                let took = publication.renamed_at.saturating_duration_since(building);
                self.metrics.published(publication.revision, took);
                self.rejected = None;
                self.published_at_ms = Some(unix_ms(SystemTime::now()));
                if let Some(received) = received {
                    self.metrics.event_to_rename(
                        publication.renamed_at.saturating_duration_since(received),
                    );
                }
                if let Some(reason) = self.publisher.take_replaced_untrusted() {
                    self.metrics.untrusted_snapshot_replaced();
                    warn!(
                        snapshot = %self.config.snapshot.display(),
                        revision = publication.revision,
                        reason = %reason,
                        "replaced a snapshot file this agent did not trust"
                    );
                }
                self.clear_hold();
                check_readers(&self.publisher, &self.metrics, &mut self.refused_by_readers);
                info!(
                    revision = publication.revision,
                    keys = publication.keys,
                    "published the snapshot"
                );
                // Told after the status is updated, so an observer sees them agree.
                if let Some(observer) = &self.observer {
                    // A dropped receiver is fine: nobody is listening any more.
                    let _ = observer.send(publication);
                }
            }
            Outcome::Held(hold) => {
                // Log when the reason changes, not on every event while it lasts.
                let same_kind = self.last_hold.as_ref().is_some_and(|last| {
                    std::mem::discriminant(last) == std::mem::discriminant(&hold)
                });
                if !same_kind {
                    warn!(reason = %hold, "not publishing");
                }
                self.metrics.set_hold(Some(hold.to_string()));
                self.last_hold = Some(hold);
            }
            Outcome::Failed(e) => {
                let cause = self.publisher.explain_failure(&e);
                let (delay, new_cause) = self.write_retry.failed(Instant::now(), &cause);
                // One line per distinct cause, not one per event or tick while it lasts.
                if new_cause {
                    error!(
                        snapshot = %self.config.snapshot.display(),
                        error = %cause,
                        retry_in_ms = delay.as_millis() as u64,
                        "cannot write the snapshot; the published one is unchanged, retrying \
                         with backoff"
                    );
                }
                self.metrics.write_failed(cause);
            }
        }
    }

    fn clear_hold(&mut self) {
        if self.last_hold.take().is_some() {
            info!("publishing again");
        }
        self.metrics.set_hold(None);
    }
}

/// Checks the published file (or, before there is one, the directory) by the readers'
/// trust rules, and records the verdict for `/healthz` and the node report; logs when the
/// verdict changes, once per distinct reason.
fn check_readers(publisher: &Publisher, metrics: &Metrics, last: &mut Option<String>) {
    let verdict = publisher.refused_by_readers();
    if verdict != *last {
        match &verdict {
            Some(reason) => warn!(reason = %reason,
                "the readers (dw_router) refuse the snapshot by their trust rules; PHP serves \
                 its last good table or the fail-open route until this is fixed"),
            None if last.is_some() => info!("the readers' trust rules take the snapshot again"),
            None => {}
        }
    }
    metrics.set_refused_by_readers(verdict.clone());
    *last = verdict;
}

/// What this node serves: the mirror with the node's stages in place, or the mirror.
fn effective_snapshot<'a>(
    effective: &'a Option<dw_routing::stage::Overlay>,
    mirror: &'a Mirror,
) -> &'a dw_routing::Snapshot {
    effective
        .as_ref()
        .map_or(mirror.snapshot(), |o| &o.snapshot)
}
