//! `autopilot`: load feedback from the counted answers (issue 42, docs/autopilot.md).
//!
//! Every `interval` the instance reads the answer rates of a short window (the rate source:
//! Prometheus over `--window`, or a `--traffic` file) and the state (regions, drain records,
//! stages, capacities, headroom) at one revision, predicts each origin's measured load with
//! the table the fleet runs, and asks the pure control law
//! ([`crate::plan::autopilot::law::decide`]) for a decision. A missing, stale or
//! implausible source decides nothing (fail static: a hold, a metric, an alert). The one
//! action of a decision is one guarded transaction ([`crate::plan::autopilot::write`])
//! fenced on the leader key ([`election`]); with `--dry-run` it is logged with its figures
//! and nothing is written (a dry run never campaigns, so it can run beside the active
//! instance).

pub(crate) mod election;
pub(crate) mod metrics;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use etcd_client::Client;
use serde_json::json;

use crate::error::Error;
use crate::ops::commit::{Fence, RetryPolicy, put_on_lease_fenced, read_state, transact_fenced};
use crate::ops::traffic_source::{TrafficSource, read_traffic};
use crate::output::{Reporter, Shown};
use crate::plan::autopilot::Settings;
use crate::plan::autopilot::law::{
    Action, ActionKind, Decision, Memory, Reading, World, decide, measure,
};
use crate::plan::autopilot::status::{AutopilotStatus, Observed, status};
use crate::plan::autopilot::write::{Author, plan_action, records_of};
use crate::plan::clock::now_rfc3339;
use crate::plan::keys::Layout;
use crate::plan::model::State;
use crate::plan::prediction::table;
use crate::plan::stage::open_stages;
use crate::shutdown::Shutdown;
use dw_etcd::EtcdOptions;
use election::Campaign;
use metrics::Metrics;

/// What `dwctl autopilot` runs with.
#[derive(Debug, Clone)]
pub struct AutopilotConfig {
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Where the keys are.
    pub layout: Layout,
    /// Retries of each guarded write.
    pub retry: RetryPolicy,
    /// `by` of the records it writes.
    pub by: String,
    /// The law's settings.
    pub settings: Settings,
    /// Time between evaluations.
    pub interval: Duration,
    /// Where the short-window rates come from.
    pub traffic: TrafficSource,
    /// Log each decision, write nothing, never lead.
    pub dry_run: bool,
    /// The leader lease's TTL, seconds.
    pub lease_ttl: i64,
    /// This instance's name in the leader key.
    pub identity: String,
    /// Where `/metrics` is served, if anywhere.
    pub metrics: Option<SocketAddr>,
}

/// What the leader has published of its state (`plan::autopilot::status`): reset with the
/// memory whenever the leadership is lost.
#[derive(Debug, Default)]
struct Publication {
    /// When this instance began to lead, RFC 3339.
    leading_since: String,
    /// The status last written (written again only when it differs).
    last: Option<AutopilotStatus>,
    /// Why the last write failed, if it did (said once, not every evaluation).
    failed: Option<String>,
}

/// Now, seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// Runs until `shutdown`.
pub async fn run(
    config: &AutopilotConfig,
    reporter: Reporter,
    mut shutdown: Shutdown,
) -> Result<(), Error> {
    let metrics = Metrics::new();
    metrics.dry_run.set(i64::from(config.dry_run));
    // Every kind's series at 0 from the start: an instance's first action is then a change
    // that `changes()` and `increase()` see (the dashboard's annotation "Autopilot
    // actions"), not a series that appears at 1.
    for kind in ACTION_KINDS {
        let _ = metrics
            .decisions
            .get_or_create(&Metrics::label("kind", kind_label(kind)));
    }
    if let Some(addr) = config.metrics {
        let bound = metrics::serve(addr, metrics.clone()).await?;
        reporter.event(
            "listening",
            &format!("autopilot metrics at http://{bound}/metrics"),
            json!({"addr": bound.to_string()}),
        );
    }
    reporter.event(
        "started",
        &format!(
            "evaluating every {:?}{}",
            config.interval,
            if config.dry_run {
                "; dry run: decisions are logged, nothing is written"
            } else {
                ""
            }
        ),
        json!({"dry_run": config.dry_run, "interval_seconds": config.interval.as_secs_f64()}),
    );
    let key = config.layout.autopilot_leader();
    let mut client: Option<Client> = None;
    let mut campaign: Option<Campaign> = None;
    let mut memory = Memory::default();
    let mut publication = Publication::default();
    let mut last_holds = String::new();
    let started = Instant::now();
    let started_unix = unix_now();
    loop {
        if client.is_none() {
            match config.etcd.connect().await {
                Ok(connected) => client = Some(connected),
                Err(error) => reporter.event(
                    "error",
                    &format!("{error}; retrying"),
                    json!({"error": error.to_string()}),
                ),
            }
        }
        if let Some(connected) = client.as_mut() {
            let result = round(
                config,
                &reporter,
                &metrics,
                connected,
                &key,
                &mut campaign,
                &mut memory,
                &mut publication,
                &mut last_holds,
                (started, started_unix),
            )
            .await;
            if let Err(error) = result {
                reporter.event(
                    "error",
                    &format!("{error}; retrying next evaluation"),
                    json!({"error": error.to_string()}),
                );
                if error.is_etcd() {
                    client = None;
                    campaign = None;
                    metrics.leader.set(0);
                }
            }
        }
        if !shutdown.sleep(config.interval).await {
            if let (Some(campaign), Some(connected)) = (campaign.take(), client.as_mut()) {
                campaign.resign(connected).await;
            }
            reporter.event("stopped", "autopilot stopped", json!({}));
            return Ok(());
        }
    }
}

/// One evaluation: the leadership kept or sought, then the decision and its action.
#[allow(clippy::too_many_arguments)]
async fn round(
    config: &AutopilotConfig,
    reporter: &Reporter,
    metrics: &Metrics,
    client: &mut Client,
    key: &str,
    campaign: &mut Option<Campaign>,
    memory: &mut Memory,
    publication: &mut Publication,
    last_holds: &mut String,
    (started, started_unix): (Instant, u64),
) -> Result<(), Error> {
    let fence = if config.dry_run {
        None
    } else {
        let mut held = match campaign.take() {
            Some(held) => held,
            None => {
                Campaign::start(
                    client,
                    key.to_owned(),
                    config.identity.clone(),
                    config.lease_ttl,
                )
                .await?
            }
        };
        let was_leader = held.fence().is_some();
        if !held.keep_alive().await? {
            reporter.event(
                "lease-lost",
                "the leader lease lapsed: standing by",
                json!({}),
            );
            *memory = Memory::default();
            *publication = Publication::default();
            metrics.leader.set(0);
            return Ok(());
        }
        let outcome = held.try_lead(client).await?;
        *campaign = Some(held);
        match outcome {
            Ok(fence) => {
                if !was_leader {
                    *memory = Memory::default();
                    *publication = Publication {
                        leading_since: now_rfc3339(),
                        ..Publication::default()
                    };
                    reporter.event(
                        "leading",
                        &format!("{} holds {}", Shown(&config.identity), Shown(key)),
                        json!({"identity": config.identity, "key": key}),
                    );
                }
                metrics.leader.set(1);
                Some(fence)
            }
            Err(holder) => {
                if was_leader {
                    reporter.event("deposed", "another instance leads", json!({}));
                }
                metrics.leader.set(0);
                let _ = holder;
                return Ok(());
            }
        }
    };
    let (decision, state, now) = evaluate(config, metrics, client, memory, started).await?;
    report_holds(reporter, &decision, last_holds);
    if let (Some(fence), Some(held)) = (&fence, campaign.as_ref()) {
        let leading_since = publication.leading_since.clone();
        let observed = Observed {
            leader: &config.identity,
            leading_since: &leading_since,
            clock_origin_unix: started_unix,
            now,
            min_interval: config.settings.min_interval,
            memory,
            decision: &decision,
            records: &records_of(&state),
            state: &state,
        };
        let lease = held.lease();
        if let Err(error) = publish(config, client, fence, lease, &observed, publication).await {
            if let Error::Fenced(why) = &error {
                if let Some(held) = campaign.as_mut() {
                    held.deposed();
                }
                metrics.leader.set(0);
                *memory = Memory::default();
                *publication = Publication::default();
                reporter.event(
                    "deposed",
                    &format!("status write fenced: {}", Shown(why)),
                    json!({}),
                );
                return Ok(());
            }
            // A status that cannot be written (a role made before it existed: `dwctl
            // auth --apply`) is said once; the autopilot still acts.
            let why = error.to_string();
            if publication.failed.as_ref() != Some(&why) {
                reporter.event(
                    "error",
                    &format!("the status is not published: {}", Shown(&why)),
                    json!({"error": why}),
                );
                publication.failed = Some(why);
            }
        }
    }
    let Some(action) = decision.action else {
        return Ok(());
    };
    metrics
        .decisions
        .get_or_create(&Metrics::label("kind", kind_label(action.kind)))
        .inc();
    let read: BTreeMap<String, i64> = action
        .edits
        .iter()
        .filter_map(|edit| {
            state
                .regions
                .get(&edit.geo)
                .map(|entry| (edit.geo.clone(), entry.mod_revision))
        })
        .collect();
    let fields = json!({
        "origin": action.origin, "kind": kind_label(action.kind),
        "measured": action.figures.measured, "target": action.figures.target,
        "capacity": action.figures.capacity, "predicted": action.predicted,
        "moved": action.moved, "regions": action.edits.iter().map(|e| e.geo.clone()).collect::<Vec<_>>(),
        "skipped_staged": action.skipped_staged,
    });
    let Some(fence) = fence else {
        reporter.event(
            "would-act",
            &format!("dry run: {}", Shown(&action.reason())),
            fields,
        );
        return Ok(());
    };
    match commit(config, client, &fence, &action, &read).await {
        Ok(Some(revision)) => reporter.event(
            "acted",
            &format!("revision {revision}: {}", Shown(&action.reason())),
            fields,
        ),
        Ok(None) => {}
        Err(Error::Fenced(why)) => {
            if let Some(held) = campaign.as_mut() {
                held.deposed();
            }
            metrics.leader.set(0);
            *memory = Memory::default();
            *publication = Publication::default();
            reporter.event("deposed", &format!("write fenced: {}", Shown(&why)), fields);
        }
        Err(Error::Diverged(why)) => reporter.event("skipped", &Shown(&why).to_string(), fields),
        Err(other) => return Err(other),
    }
    Ok(())
}

/// Writes the status of this evaluation when it differs from the last one written
/// (fenced, on the leader's lease): a fleet that stays as it is writes nothing.
async fn publish(
    config: &AutopilotConfig,
    client: &mut Client,
    fence: &Fence,
    lease: i64,
    observed: &Observed<'_>,
    publication: &mut Publication,
) -> Result<(), Error> {
    let current = status(observed, publication.last.as_ref());
    if publication.last.as_ref() == Some(&current) {
        return Ok(());
    }
    put_on_lease_fenced(
        client,
        fence,
        &config.layout.autopilot_status(),
        &current.to_text(),
        lease,
    )
    .await?;
    publication.last = Some(current);
    publication.failed = None;
    Ok(())
}

/// Reads the rates and the state, and decides: the decision, the state it read, and the
/// law's clock when it decided.
async fn evaluate(
    config: &AutopilotConfig,
    metrics: &Metrics,
    client: &mut Client,
    memory: &mut Memory,
    started: Instant,
) -> Result<(Decision, State, u64), Error> {
    // A source that errs is as unusable as one that answers with nothing usable.
    let read = read_traffic(&config.traffic).await;
    let state = read_state(client, &config.layout).await?;
    let fleet = table(&state, &config.layout.prefix, None);
    let capacities = state.valid_capacities();
    let records = records_of(&state);
    let staged = staged_geos(&state);
    // The home geos live in the capacity records: read with them, at the same revision.
    let homes = state.homes();
    let world = World {
        now: started.elapsed().as_secs(),
        capacities: &capacities,
        headroom: state.headroom(),
        records: &records,
        staged: &staged,
        homes: &homes,
    };
    let usable = match &read {
        Ok(read) => read.usable().map(|(traffic, _)| traffic),
        Err(error) => Err(error.to_string()),
    };
    metrics.source_usable.set(i64::from(usable.is_ok()));
    metrics.last_evaluation.set(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |since| since.as_secs_f64()),
    );
    let decision = match usable {
        Ok(traffic) => {
            let loads = measure(&fleet, traffic);
            for (origin, load) in &loads.origins {
                if let Some(capacity) = capacities.get(origin) {
                    let target = capacity * world.headroom;
                    metrics.measured(origin, *load, target, *capacity);
                    if *load > target {
                        metrics.overloaded(origin, config.interval.as_secs_f64());
                    }
                }
            }
            decide(
                &config.settings,
                memory,
                &world,
                Ok(Reading {
                    table: &fleet,
                    traffic,
                    loads: &loads,
                }),
            )?
        }
        Err(why) => decide(&config.settings, memory, &world, Err(why))?,
    };
    metrics.over_target.set(decision.over_target.len() as i64);
    metrics
        .fleet_over_target
        .set(i64::from(decision.fleet_over_target));
    for hold in &decision.holds {
        metrics
            .holds
            .get_or_create(&Metrics::label("reason", hold.reason.label()))
            .inc();
    }
    Ok((decision, state, world.now))
}

/// Commits `action` fenced on the leadership; the revision, or `None` with nothing to write.
async fn commit(
    config: &AutopilotConfig,
    client: &mut Client,
    fence: &Fence,
    action: &Action,
    read: &BTreeMap<String, i64>,
) -> Result<Option<i64>, Error> {
    let at = now_rfc3339();
    let author = Author {
        by: &config.by,
        at: &at,
    };
    let committed = transact_fenced(
        client,
        &config.layout,
        &config.retry,
        &at,
        std::slice::from_ref(fence),
        &mut [],
        |state| Ok(plan_action(state, action, read, &author)?),
    )
    .await?;
    Ok(committed.revision)
}

/// The geos an open stage holds (a rollout's stage included): never changed.
fn staged_geos(state: &State) -> BTreeSet<String> {
    open_stages(state)
        .into_iter()
        .filter_map(|(_, stage)| stage.ok())
        .flat_map(|stage| {
            stage
                .kvs
                .keys()
                .filter_map(|key| key.strip_prefix("region/").map(str::to_owned))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Logs the holds when they change (a hold repeated every evaluation is said once).
fn report_holds(reporter: &Reporter, decision: &Decision, last: &mut String) {
    let holds: Vec<String> = decision
        .holds
        .iter()
        .map(|hold| format!("{} ({})", hold.origin, hold.reason))
        .collect();
    let mut text = holds.join("; ");
    if !decision.skipped_staged.is_empty() {
        let skipped: Vec<String> = decision
            .skipped_staged
            .iter()
            .map(|(origin, geos)| format!("{origin}: {}", geos.join(",")))
            .collect();
        text.push_str(&format!("; staged regions skipped: {}", skipped.join("; ")));
    }
    if text != *last {
        if !text.is_empty() {
            reporter.event(
                "holding",
                &Shown(&text).to_string(),
                json!({
                    "holds": decision.holds.iter().map(|hold| json!({"origin": hold.origin, "reason": hold.reason.label(), "why": hold.reason.to_string()})).collect::<Vec<_>>(),
                    "over_target": decision.over_target,
                    "fleet_over_target": decision.fleet_over_target,
                    "skipped_staged": decision.skipped_staged,
                }),
            );
        }
        *last = text;
    }
}

/// Every kind of action (`dwctl_autopilot_decisions_total` has a series for each).
const ACTION_KINDS: [ActionKind; 4] = [
    ActionKind::Relieve,
    ActionKind::RelieveAtCeiling,
    ActionKind::GiveBackStep,
    ActionKind::GiveBackAll,
];

fn kind_label(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::Relieve => "relieve",
        ActionKind::RelieveAtCeiling => "relieve_at_ceiling",
        ActionKind::GiveBackStep => "give_back_step",
        ActionKind::GiveBackAll => "give_back_all",
    }
}
