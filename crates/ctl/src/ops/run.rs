//! Running a plan (a function of the state read from etcd to the changes to write): a dry
//! run previews it, otherwise it is committed in one guarded transaction; either way the
//! report lists each key that changes, before and after.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::context::Context;
use crate::error::Error;
use dw_capacity::Traffic;

use crate::ops::commit::{
    Changes, Committed, PreCommitCheck, RetryPolicy, State, preview_checked, request_bytes,
    transact, transact_checked,
};
use crate::ops::traffic_source::{TrafficSource, read_traffic};
use crate::output::{Outcome, Shown};
use crate::plan::apply::describe;
use crate::plan::capacity::{DEFAULT_HEADROOM, home_text, number_json};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::{DrainRequest, Restoring, plan_drain, plan_restore};
use crate::plan::drain_record::{SOURCE_HEALTH, SOURCE_REBALANCE};
pub use crate::plan::guard::{ExemptReason, Guard, NoLoad, StatesGuard};
use crate::plan::guard::{
    Judging, Override, Overrider, Planned, TrafficRead, Verdict, decide, drain_prediction,
    override_record, stated,
};
use crate::plan::keys::Layout;
use crate::plan::node_report::NodeReport;
use crate::plan::prediction::caveats::{caveat_lines, caveats_json};
use crate::plan::prediction::render;
use crate::plan::shed::{ShedRequest, plan_shed};
use crate::plan::shed_record::OnFail;

/// The inputs of a write's load prediction: where its traffic comes from, and whether the
/// guard may be overridden (`--allow-overload`).
#[derive(Debug, Clone)]
pub struct PredictInputs {
    /// Where the traffic comes from.
    pub source: TrafficSource,
    /// Commit what the guard refuses, audited.
    pub allow_overload: bool,
}

/// What every writing op states about the capacity guard: its prediction inputs, or why it
/// is exempt ([`crate::plan::guard`]).
pub type WriteGuard = Guard<PredictInputs>;

/// Previews or commits a plan and reports it, with its load prediction and the capacity
/// guard ([`Predictor`]) as `guard` states.
pub async fn run_plan<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    dry_run: bool,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
    mut plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    run_plan_with_traffic(context, client, title, dry_run, guard, |state, _| {
        plan(state)
    })
    .await
}

/// [`run_plan`] for a plan that searches with the traffic the prediction reads (`shed`,
/// `--spill`): it gets the traffic, or why there is none.
pub async fn run_plan_with_traffic<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    dry_run: bool,
    guard: &impl StatesGuard<Inputs = PredictInputs>,
    plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State, Result<&Traffic, String>) -> Result<Changes, Error>,
{
    let predictor = Predictor::new(context, title, guard).await?;
    let ran = run_checked(context, client, predictor, dry_run, plan).await?;
    let mut outcome = committed_outcome(title, &ran.committed, ran.request_bytes);
    ran.predictor.report(&mut outcome, dry_run);
    Ok(outcome)
}

/// A plan previewed or committed by [`run_checked`], for a command that words its own
/// outcome (`apply`, the stage commands).
pub struct Ran {
    /// What was committed, or on a dry run what would be (`revision` `None`, 0 attempts).
    pub committed: Committed,
    /// On a dry run: the request's size and the limit (`--max-request-bytes`).
    pub request_bytes: Option<(usize, usize)>,
    /// The prediction of the last attempt, to add to the outcome ([`Predictor::report`]).
    pub predictor: Predictor,
}

/// The one preview-or-commit branch of a plan: on every attempt it plans (with the traffic
/// `predictor` has read, for a plan that searches with it), then the predictor, a
/// [`PreCommitCheck`], predicts and applies the capacity guard; a dry run previews (the
/// size check included), otherwise the plan is committed in one guarded, retried
/// transaction ([`transact_checked`]).
pub async fn run_checked<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    mut predictor: Predictor,
    dry_run: bool,
    mut plan: F,
) -> Result<Ran, Error>
where
    F: FnMut(&State, Result<&Traffic, String>) -> Result<Changes, Error>,
{
    let traffic = predictor.traffic.clone();
    let mut planned = |state: &State| plan(state, traffic_of(&traffic));
    let mut checks: [&mut dyn PreCommitCheck; 1] = [&mut predictor];
    let (committed, request_bytes) = if dry_run {
        let (state, changes) =
            preview_checked(client, &context.layout, &mut checks, &mut planned).await?;
        let bytes = request_bytes(&context.layout, &state, &changes)?;
        let committed = Committed {
            revision: None,
            state,
            changes,
            attempts: 0,
        };
        (committed, Some((bytes, context.layout.max_request_bytes)))
    } else {
        let updated = now_rfc3339();
        let committed = transact_checked(
            client,
            &context.layout,
            &context.retry,
            &updated,
            &mut checks,
            planned,
        )
        .await?;
        (committed, None)
    };
    Ok(Ran {
        committed,
        request_bytes,
        predictor,
    })
}

/// The traffic of `read`, or why there is none (`None`: the write is exempt, it reads no
/// traffic).
fn traffic_of(read: &Option<Arc<TrafficRead>>) -> Result<&Traffic, String> {
    match read.as_deref() {
        None => Err("this command reads no traffic".into()),
        Some(read) => read.traffic(),
    }
}

/// A plan's load prediction and capacity guard, a [`PreCommitCheck`]: reads the traffic
/// once (a file or Prometheus, [`read_traffic`]), then on every attempt asks the guard
/// ([`decide`]) about the planned change on the state read: a refusal is exit 9, nothing
/// written; `--allow-overload` adds an audit record to the change instead. The report says
/// what was predicted, or why nothing was (only where a capacity is set).
pub struct Predictor {
    /// The traffic read (`None`: the write is exempt, nothing is predicted). Shared with a
    /// plan that searches with it.
    traffic: Option<Arc<TrafficRead>>,
    allow_overload: bool,
    title: String,
    /// Where the audit record of `--allow-overload` goes, and the routing prefix.
    layout: Layout,
    /// The last attempt's verdict.
    last: Option<Verdict>,
    /// The node reports a change that writes a stage is predicted with (its cohort's
    /// members, [`Predictor::with_nodes`]).
    nodes: Vec<NodeReport>,
}

impl Predictor {
    /// Reads the traffic `guard` names (none for an exempt write).
    pub async fn new(
        context: &Context,
        title: &str,
        guard: &impl StatesGuard<Inputs = PredictInputs>,
    ) -> Result<Predictor, Error> {
        let (traffic, allow_overload) = match stated(guard) {
            Guard::Predict(inputs) => (
                Some(Arc::new(read_traffic(&inputs.source).await?)),
                inputs.allow_overload,
            ),
            Guard::Exempt(_) => (None, false),
        };
        Ok(Predictor {
            traffic,
            allow_overload,
            title: title.to_owned(),
            layout: context.layout.clone(),
            last: None,
            nodes: Vec::new(),
        })
    }

    /// Whether the write reads traffic (it is not exempt).
    pub fn reads_traffic(&self) -> bool {
        self.traffic.is_some()
    }

    /// The node reports to judge a stage's cohort by (`stage create`, `stage widen`).
    pub fn with_nodes(mut self, nodes: Vec<NodeReport>) -> Predictor {
        self.nodes = nodes;
        self
    }

    /// Asks the guard about `changes` planned on `state`; refuses, or audits an override.
    fn guard(
        &mut self,
        layout: &Layout,
        state: &State,
        changes: &mut Changes,
    ) -> Result<(), Error> {
        self.last = None;
        let Some(traffic) = self.traffic.as_deref() else {
            return Ok(());
        };
        let verdict = decide(
            Guard::Predict(Judging {
                traffic,
                allow_overload: self.allow_overload,
            }),
            Planned {
                state,
                changes,
                prefix: &layout.prefix,
                nodes: &self.nodes,
            },
        )?;
        match &verdict {
            Verdict::Refused(message) => return Err(Error::Overload(message.clone())),
            Verdict::Overridden(overridden) => {
                let at = now_rfc3339();
                let key = format!("{}{at}-allow-overload-{}", layout.audits(), state.revision);
                let by = operator();
                let record = override_record(
                    overridden,
                    Overrider {
                        change: &self.title,
                        by: &by,
                        at: &at,
                        read_revision: state.revision,
                    },
                );
                changes.notes.push(match overridden {
                    Override::Overload(_) => format!(
                        "--allow-overload: committed above the capacity guard; recorded at {}",
                        Shown(&key)
                    ),
                    Override::Unusable(_) => format!(
                        "--allow-overload: committed unchecked, the traffic source's data \
                         cannot be used; recorded at {}",
                        Shown(&key)
                    ),
                });
                changes.audit.insert(key, record.to_string());
            }
            Verdict::NotJudged | Verdict::NoPrediction(_) | Verdict::Passed(_) => {}
        }
        self.last = Some(verdict);
        Ok(())
    }

    /// Adds the prediction (or why none was made) to the outcome: its lines after the
    /// changes, `prediction` in the JSON. Nothing when nothing was judged.
    pub fn report(&self, outcome: &mut Outcome, dry_run: bool) {
        let source = match self.traffic.as_deref() {
            Some(TrafficRead::Usable { source, .. }) => Shown(source).to_string(),
            _ => String::new(),
        };
        let (lines, json) = match &self.last {
            None | Some(Verdict::NotJudged) | Some(Verdict::Refused(_)) => return,
            Some(Verdict::NoPrediction(why)) => (
                vec![format!(
                    "no load prediction: {}; the change is not checked against capacities",
                    Shown(why)
                )],
                json!({"made": false, "why": why}),
            ),
            Some(Verdict::Passed(prediction))
            | Some(Verdict::Overridden(Override::Overload(prediction))) => {
                let (mut lines, mut json) = render(prediction, &source, dry_run);
                // The nodes left out as implausible and the notes on the traffic's worth.
                if let Some(read) = self.traffic.as_deref()
                    && let Ok(traffic) = read.traffic()
                {
                    lines.extend(caveat_lines(traffic, read.left_out()));
                    if let (Value::Object(object), Value::Object(caveats)) =
                        (&mut json, caveats_json(traffic, read.left_out()))
                    {
                        object.extend(caveats);
                    }
                }
                (lines, json)
            }
            Some(Verdict::Overridden(Override::Unusable(why))) => (
                vec![format!(
                    "no load prediction: {}; --allow-overload: the change is not checked \
                     against capacities",
                    Shown(why)
                )],
                json!({"made": false, "why": why, "allow_overload": true}),
            ),
        };
        if !outcome.text.is_empty() && !lines.is_empty() {
            outcome.text.push('\n');
        }
        outcome.text.push_str(&lines.join("\n"));
        if let Value::Object(object) = &mut outcome.json {
            object.insert("prediction".into(), json);
        }
    }
}

/// The capacity guard as [`run_plan`] passes it to every commit and dry run.
impl PreCommitCheck for Predictor {
    fn check(&mut self, state: &State, changes: &mut Changes) -> Result<(), Error> {
        let layout = self.layout.clone();
        self.guard(&layout, state, changes)
    }
}

/// An automatic drain (`health`, `rebalance`): what it takes and why it is exempt.
pub struct AutoDrain<'a> {
    /// The drain (its record's source says who).
    pub request: &'a DrainRequest,
    /// A drain, or a shed of some percent of the origin's load (`health --on-fail`).
    pub on_fail: OnFail,
    /// Why the guard does not judge it (the drain proceeds whatever it predicts).
    pub exempt: ExemptReason,
    /// Where its predicted load reads the traffic (recorded in the drain record).
    pub traffic: &'a TrafficSource,
}

/// The one home of the automatic drain: commits `drain` (never refused by the guard: an
/// origin failing probes or gone serves errors either way), with its predicted load
/// recorded in its drain record (`predicted`: the overloads it causes, or why no
/// prediction was made). The traffic is read once per drain. A plan's refusal is returned
/// as it is (the daemon reports it or takes it as nothing to do).
pub async fn auto_drain(
    client: &mut etcd_client::Client,
    layout: &Layout,
    retry: &RetryPolicy,
    drain: AutoDrain<'_>,
) -> Result<Committed, Error> {
    let AutoDrain {
        request,
        on_fail,
        exempt,
        traffic,
    } = drain;
    if request.source != automatic_source(exempt)? {
        return Err(Error::Failed(format!(
            "an automatic drain exempt as {exempt} must be recorded as {}, not {}",
            automatic_source(exempt)?,
            Shown(&request.source)
        )));
    }
    let traffic = read_traffic(traffic).await?;
    transact(client, layout, retry, &now_rfc3339(), |state| {
        let mut changes = match on_fail {
            OnFail::Drain => plan_drain(state, request)?,
            OnFail::Shed(percent) => plan_shed(
                state,
                &layout.prefix,
                traffic.traffic(),
                &ShedRequest {
                    drain: request.clone(),
                    percent,
                    spill: false,
                },
            )?,
        };
        let predicted = drain_prediction(state, &changes, &layout.prefix, &traffic);
        if let Some(Some(record)) = changes.drains.get_mut(&request.origin) {
            record.set_predicted(&request.source, predicted);
        }
        Ok(changes)
    })
    .await
}

/// The restore of an automatic drain, exempt as the drain was: only that daemon's part of
/// the drain record (its source, [`automatic_source`]) is given back; the other sources'
/// parts stay. A plan's refusal (no such
/// drain record) is returned as it is.
pub async fn auto_restore(
    client: &mut etcd_client::Client,
    layout: &Layout,
    retry: &RetryPolicy,
    origin: &str,
    exempt: ExemptReason,
) -> Result<Committed, Error> {
    let source = automatic_source(exempt)?;
    transact(client, layout, retry, &now_rfc3339(), |state| {
        Ok(plan_restore(state, origin, Restoring::Own(source))?)
    })
    .await
}

/// The drain records' source of an automatic drain exempt for `exempt`; only `health`'s
/// and `rebalance`'s drains are.
pub fn automatic_source(exempt: ExemptReason) -> Result<&'static str, Error> {
    match exempt {
        ExemptReason::HealthDrain => Ok(SOURCE_HEALTH),
        ExemptReason::Rebalance => Ok(SOURCE_REBALANCE),
        other => Err(Error::Failed(format!("{other} is not an automatic drain"))),
    }
}

/// The report of a plan: committed, or with `dry_run` (the request's size and the limit)
/// previewed.
fn committed_outcome(
    title: &str,
    committed: &Committed,
    dry_run: Option<(usize, usize)>,
) -> Outcome {
    let (mut lines, mut json) = render_changes(&committed.state, &committed.changes);
    lines.extend(
        committed
            .changes
            .notes
            .iter()
            .map(|note| format!("note: {}", Shown(note))),
    );
    let headline = match (dry_run, committed.revision) {
        (Some((bytes, limit)), _) => format!(
            "{title}: dry run, nothing written (the transaction would be about {bytes} \
             bytes, --max-request-bytes {limit})"
        ),
        (None, Some(revision)) => format!("{title}: committed at revision {revision}"),
        (None, None) => format!("{title}: nothing to change"),
    };
    lines.insert(0, headline);
    if let Value::Object(object) = &mut json {
        object.insert("dry_run".into(), Value::from(dry_run.is_some()));
        if let Some((bytes, limit)) = dry_run {
            object.insert("request_bytes".into(), Value::from(bytes));
            object.insert("max_request_bytes".into(), Value::from(limit));
        }
        object.insert(
            "revision".into(),
            committed.revision.map_or(Value::Null, Value::from),
        );
        object.insert(
            "read_revision".into(),
            Value::from(committed.state.revision),
        );
        object.insert("attempts".into(), Value::from(committed.attempts));
        object.insert("notes".into(), Value::from(committed.changes.notes.clone()));
    }
    Outcome {
        text: lines.join("\n"),
        json,
    }
}

/// The lines and JSON of a plan: each key that changes, before and after.
fn render_changes(state: &State, changes: &Changes) -> (Vec<String>, Value) {
    let mut lines = Vec::new();
    let mut regions = serde_json::Map::new();
    for (geo, new) in &changes.regions {
        let before = state.region(geo);
        let before_json = match &before {
            Some(Ok(value)) => value.to_json(),
            Some(Err(_)) => {
                Value::from(String::from_utf8_lossy(&state.regions[geo].raw).into_owned())
            }
            None => Value::Null,
        };
        let after_json = new.as_ref().map_or(Value::Null, |value| value.to_json());
        let shown_geo = Shown(geo);
        lines.push(match (&before, new) {
            (None, Some(value)) => format!(
                "+ region/{shown_geo} {}",
                Shown(&value.to_json().to_string())
            ),
            (Some(Ok(old)), Some(value)) => format!(
                "~ region/{shown_geo} {}",
                Shown(&describe(&old.to_json(), &value.to_json()))
            ),
            (Some(Err(error)), Some(value)) => format!(
                "~ region/{shown_geo} replaces an invalid value ({}) with {}",
                Shown(&error.to_string()),
                Shown(&value.to_json().to_string())
            ),
            (_, None) => format!("- region/{shown_geo}"),
        });
        regions.insert(
            geo.clone(),
            json!({"before": before_json, "after": after_json}),
        );
    }
    let mut policy = Value::Null;
    if let Some(new) = &changes.policy {
        let old = state.policy();
        lines.push(match &old {
            Some(Ok(old)) => format!(
                "~ policy/global {}",
                Shown(&describe(&old.to_json(), &new.to_json()))
            ),
            _ => format!("+ policy/global {}", Shown(&new.to_json().to_string())),
        });
        policy = json!({
            "before": old.and_then(Result::ok).map(|value| value.to_json()),
            "after": new.to_json(),
        });
    }
    let mut drains = serde_json::Map::new();
    for (origin, record) in &changes.drains {
        let existed = state.drains.contains_key(origin);
        let regions = |record: &crate::plan::drain_record::DrainRecord| {
            let geos: Vec<String> = record
                .regions
                .keys()
                .map(|geo| Shown(geo).to_string())
                .collect();
            geos.join(", ")
        };
        let shown_origin = Shown(origin);
        lines.push(match (existed, record) {
            (false, Some(record)) => {
                format!(
                    "+ drain record {shown_origin} (regions {})",
                    regions(record)
                )
            }
            (true, Some(record)) => {
                format!(
                    "~ drain record {shown_origin} (regions {})",
                    regions(record)
                )
            }
            (_, None) => format!("- drain record {shown_origin}"),
        });
        drains.insert(
            origin.clone(),
            record.as_ref().map_or(Value::Null, |record| {
                serde_json::to_value(record).unwrap_or(Value::Null)
            }),
        );
    }
    let (capacity_lines, capacities, headroom) = render_capacities(state, changes);
    lines.extend(capacity_lines);
    (
        lines,
        json!({"regions": regions, "policy": policy, "drains": drains,
               "capacities": capacities, "capacity_headroom": headroom}),
    )
}

/// The lines and JSON of the capacity and headroom records a plan writes.
fn render_capacities(state: &State, changes: &Changes) -> (Vec<String>, Value, Value) {
    let mut lines = Vec::new();
    let mut capacities = serde_json::Map::new();
    for (origin, capacity) in &changes.capacities {
        let before = state.capacity(origin);
        let shown = Shown(origin);
        let was = match &before {
            Some(Ok(old)) => format!("{} answers/s", number_json(old.answers_per_s)),
            Some(Err(error)) => format!("a malformed record ({})", Shown(&error.to_string())),
            None => String::new(),
        };
        // The home geos (`origin home`) ride in the record: say when they change.
        let old_home = match &before {
            Some(Ok(old)) => old.home.clone(),
            _ => Default::default(),
        };
        let home = |home: &std::collections::BTreeSet<String>| {
            if home.is_empty() {
                "none".to_string()
            } else {
                Shown(&home_text(home)).to_string()
            }
        };
        let home_change = match capacity {
            Some(new) if new.home != old_home => {
                format!(", home {} -> {}", home(&old_home), home(&new.home))
            }
            _ => String::new(),
        };
        lines.push(match (&before, capacity) {
            (None, Some(new)) => format!(
                "+ capacity/{shown} {} answers/s{home_change}",
                number_json(new.answers_per_s)
            ),
            (Some(_), Some(new)) => format!(
                "~ capacity/{shown} {was} -> {} answers/s{home_change}",
                number_json(new.answers_per_s)
            ),
            (_, None) => format!("- capacity/{shown} (was {was}; no capacity: no guard)"),
        });
        capacities.insert(
            origin.clone(),
            json!({
                "before": before.and_then(Result::ok).map(|old| old.to_json()),
                "after": capacity.as_ref().map(|new| new.to_json()),
            }),
        );
    }
    let mut headroom = Value::Null;
    if let Some(new) = &changes.headroom {
        let before = state.headroom_record();
        let was = match &before {
            Some(Ok(old)) => number_json(old.headroom).to_string(),
            Some(Err(_)) => "a malformed record".to_string(),
            None => format!("{} (the default)", number_json(DEFAULT_HEADROOM)),
        };
        lines.push(match new {
            Some(new) => format!("~ capacity-headroom {was} -> {}", number_json(new.headroom)),
            None => format!(
                "- capacity-headroom (was {was}; the default {} applies)",
                number_json(DEFAULT_HEADROOM)
            ),
        });
        headroom = json!({
            "before": before.and_then(Result::ok).map(|old| old.to_json()),
            "after": new.as_ref().map(|new| new.to_json()),
        });
    }
    (lines, Value::Object(capacities), headroom)
}
