//! `health`: drain origins that fail HTTP probes, restore them when they recover.
//!
//! Every `interval`, each origin is probed ([`crate::ops::probe`]). After `fail_after`
//! consecutive failures it is drained (source `health`, regions it would empty are left
//! alone), or with `--on-fail shed:PERCENT` shed by that percent
//! ([`crate::plan::shed`]); after `recover_after` consecutive successes its health drain is restored. Drains
//! made by people or by `rebalance` are never restored here. At most
//! `floor(max_drained_fraction * probed origins)` of the probed origins are drained at once,
//! counting every drain record: the check is made on the state the drain is planned from,
//! and the drain's transaction is guarded so that no drain record appeared meanwhile.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::Client;
use serde_json::json;

use crate::error::Error;
use crate::ops::run::{AutoDrain, ExemptReason, auto_drain, auto_restore};
use crate::ops::traffic_source::TrafficSource;
use crate::plan::clock::now_rfc3339;
use crate::plan::drain::{DrainRequest, FleetLimit};
use dw_etcd::EtcdOptions;

use crate::ops::commit::{RetryPolicy, read_state};
use crate::ops::probe::{ProbeTarget, probe};
use crate::output::{Reporter, Shown};
use crate::plan::drain_record::SOURCE_HEALTH;
use crate::plan::keys::Layout;
use crate::plan::shed_record::OnFail;
use crate::plan::streak::{Streak, Turn};
use crate::shutdown::Shutdown;

/// What `dwctl health` probes and how it decides.
#[derive(Debug, Clone)]
pub struct HealthConfig {
    /// How to reach etcd.
    pub etcd: EtcdOptions,
    /// Where the keys are.
    pub layout: Layout,
    /// Retries of each guarded drain or restore.
    pub retry: RetryPolicy,
    /// `by` of the drain records it writes.
    pub by: String,
    /// origin → probe target.
    pub probes: BTreeMap<String, ProbeTarget>,
    /// Time between probe rounds.
    pub interval: Duration,
    /// Deadline of one probe.
    pub timeout: Duration,
    /// Consecutive failures that drain an origin.
    pub fail_after: u32,
    /// Consecutive successes that restore it.
    pub recover_after: u32,
    /// At most this fraction of the probed origins drained at once (0 to 1).
    pub max_drained_fraction: f64,
    /// Where a drain's predicted load reads its traffic (recorded in the drain record);
    /// [`TrafficSource::NotGiven`]: drains are recorded without a prediction.
    pub traffic: TrafficSource,
    /// What a failing origin gets: a drain, or a shed of some percent of its load.
    pub on_fail: OnFail,
}

impl HealthConfig {
    /// How many probed origins may be drained at once.
    pub fn max_drained(&self) -> usize {
        (self.max_drained_fraction * self.probes.len() as f64 + 1e-9).floor() as usize
    }
}

/// Runs until `shutdown`.
pub async fn run(
    config: &HealthConfig,
    reporter: Reporter,
    mut shutdown: Shutdown,
) -> Result<(), Error> {
    let mut streaks: BTreeMap<String, Streak> = config
        .probes
        .keys()
        .map(|origin| (origin.clone(), Streak::default()))
        .collect();
    let mut client: Option<Client> = None;
    // What was last reported for an origin's pending action, so that a refusal repeated
    // every round is reported once.
    let mut reported: BTreeMap<String, String> = BTreeMap::new();
    let mut known = Known::default();
    reporter.event(
        "started",
        &format!("probing {} origins every {:?}; at most {} drained at once", config.probes.len(), config.interval, config.max_drained()),
        json!({"origins": config.probes.keys().collect::<Vec<_>>(), "max_drained": config.max_drained()}),
    );
    loop {
        let mut round = tokio::task::JoinSet::new();
        for (origin, target) in &config.probes {
            let (origin, target, timeout) = (origin.clone(), target.clone(), config.timeout);
            round.spawn(async move { (origin, probe(&target, timeout).await) });
        }
        while let Some(joined) = round.join_next().await {
            let Ok((origin, result)) = joined else {
                continue;
            };
            let Some(streak) = streaks.get_mut(&origin) else {
                continue;
            };
            let error = result.as_ref().err().cloned();
            match streak.record(result) {
                Turn::Recovered => reporter.event(
                    "probe-ok",
                    &format!("{origin} answers again"),
                    json!({"origin": origin}),
                ),
                Turn::Failed => {
                    let error = error.unwrap_or_default();
                    reporter.event(
                        "probe-failed",
                        &format!("{origin}: {}", Shown(&error)),
                        json!({"origin": origin, "error": error}),
                    );
                }
                Turn::Same => {}
            }
        }
        if known
            .read_at
            .is_none_or(|read_at| read_at.elapsed() >= RESYNC)
        {
            known.synced = false;
        }
        // etcd is only consulted when an origin needs something done, as far as the last
        // read knows: a failing origin not drained yet, a healthy one that health drained.
        let failing: Vec<String> = streaks
            .iter()
            .filter(|(origin, streak)| {
                streak.unhealthy(config.fail_after)
                    && !(known.synced && known.drained.contains(*origin))
            })
            .map(|(origin, _)| origin.clone())
            .collect();
        let healthy: Vec<String> = streaks
            .iter()
            .filter(|(origin, streak)| {
                streak.recovered(config.recover_after)
                    && (!known.synced || known.ours.contains(*origin))
            })
            .map(|(origin, _)| origin.clone())
            .collect();
        if !failing.is_empty() || !healthy.is_empty() {
            if client.is_none() {
                match config.etcd.connect().await {
                    Ok(connected) => client = Some(connected),
                    Err(error) => reporter.event(
                        "error",
                        &error.to_string(),
                        json!({"error": error.to_string()}),
                    ),
                }
            }
            if let Some(connected) = client.as_mut()
                && let Err(error) = act(
                    config,
                    reporter,
                    connected,
                    &streaks,
                    &failing,
                    &healthy,
                    &mut reported,
                    &mut known,
                )
                .await
            {
                known.synced = false;
                reporter.event(
                    "error",
                    &format!("{error}; retrying next round"),
                    json!({"error": error.to_string()}),
                );
                if error.is_etcd() {
                    client = None;
                }
            }
        }
        if !shutdown.sleep(config.interval).await {
            return Ok(());
        }
    }
}

/// How often the view of drains is refreshed even when nothing seems to need it (someone
/// else may have drained or restored a probed origin).
const RESYNC: Duration = Duration::from_secs(30);

/// What the last read of etcd said about the probed origins' drains.
#[derive(Debug, Default)]
struct Known {
    synced: bool,
    read_at: Option<std::time::Instant>,
    /// Probed origins with a drain record, whoever made it.
    drained: BTreeSet<String>,
    /// Probed origins with a drain record made by health.
    ours: BTreeSet<String>,
}

/// Drains the failing origins and restores the healthy ones that health drained.
#[allow(clippy::too_many_arguments)]
async fn act(
    config: &HealthConfig,
    reporter: Reporter,
    client: &mut Client,
    streaks: &BTreeMap<String, Streak>,
    failing: &[String],
    healthy: &[String],
    reported: &mut BTreeMap<String, String>,
    known: &mut Known,
) -> Result<(), Error> {
    let state = read_state(client, &config.layout).await?;
    known.drained.clear();
    known.ours.clear();
    for origin in config.probes.keys() {
        if let Some(record) = state.drain_record(origin).ok().flatten() {
            known.drained.insert(origin.clone());
            if record.has_part(SOURCE_HEALTH) {
                known.ours.insert(origin.clone());
            }
        }
    }
    known.synced = true;
    known.read_at = Some(std::time::Instant::now());
    for origin in healthy {
        let ours = state
            .drain_record(origin)
            .ok()
            .flatten()
            .is_some_and(|record| record.has_part(SOURCE_HEALTH));
        if !ours {
            continue;
        }
        let committed = match auto_restore(
            client,
            &config.layout,
            &config.retry,
            origin,
            ExemptReason::HealthDrain,
        )
        .await
        {
            // No health drain record to give back: nothing to change.
            Err(Error::Invalid(_)) => None,
            other => Some(other?),
        };
        reported.remove(origin);
        known.drained.remove(origin);
        known.ours.remove(origin);
        if let Some(committed) = committed
            && let Some(revision) = committed.revision
        {
            reporter.event(
                "restored",
                &format!(
                    "{origin} at revision {revision} after {} good probes",
                    config.recover_after
                ),
                json!({"origin": origin, "revision": revision, "notes": committed.changes.notes}),
            );
        }
    }
    let probed: BTreeSet<String> = config.probes.keys().cloned().collect();
    for origin in failing {
        // Health's own part is there already (or the record does not read): nothing to
        // do. Another source's drain or shed is joined: health's part joins it, so that
        // the origin is drained everywhere and that source's restore leaves it drained.
        let ours_or_unread = state.drain_record(origin).map_or(true, |record| {
            record.is_some_and(|r| r.has_part(SOURCE_HEALTH))
        });
        if ours_or_unread {
            continue;
        }
        let last_error = streaks
            .get(origin)
            .and_then(|streak| streak.last_error.clone())
            .unwrap_or_default();
        let request = DrainRequest {
            origin: origin.clone(),
            regions: Vec::new(),
            reason: format!(
                "health-check: {} consecutive failed probes ({last_error})",
                config.fail_after
            ),
            source: SOURCE_HEALTH.into(),
            by: config.by.clone(),
            at: now_rfc3339(),
            force: false,
            skip_emptying: true,
            fleet_limit: Some(FleetLimit {
                origins: probed.clone(),
                max_drained: config.max_drained(),
            }),
        };
        // The drain always proceeds; its predicted load is recorded for alerts to see.
        let result = auto_drain(
            client,
            &config.layout,
            &config.retry,
            AutoDrain {
                request: &request,
                on_fail: config.on_fail,
                exempt: ExemptReason::HealthDrain,
                traffic: &config.traffic,
            },
        )
        .await;
        let done = match config.on_fail {
            OnFail::Drain => "drained",
            OnFail::Shed(_) => "shed",
        };
        let (event, text, fields) = match result {
            Ok(committed) => match committed.revision {
                Some(revision) => (
                    done,
                    format!("{origin} at revision {revision}: {}", request.reason),
                    json!({"origin": origin, "revision": revision, "regions": committed.changes.regions.keys().collect::<Vec<_>>(), "notes": committed.changes.notes}),
                ),
                None => (
                    "drain-skipped",
                    format!("{origin}: {}", Shown(&committed.changes.notes.join("; "))),
                    json!({"origin": origin, "notes": committed.changes.notes}),
                ),
            },
            Err(Error::Failed(reason)) => (
                "drain-refused",
                Shown(&reason).to_string(),
                json!({"origin": origin, "reason": reason}),
            ),
            Err(Error::Invalid(errors)) => {
                let reason = errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                (
                    "drain-refused",
                    format!("{origin}: {}", Shown(&reason)),
                    json!({"origin": origin, "reason": reason}),
                )
            }
            Err(other) => return Err(other),
        };
        if event == done || reported.get(origin) != Some(&text) {
            reporter.event(event, &text, fields);
        }
        if event == done {
            known.drained.insert(origin.clone());
            known.ours.insert(origin.clone());
            reported.remove(origin);
        } else {
            reported.insert(origin.clone(), text);
        }
    }
    Ok(())
}
