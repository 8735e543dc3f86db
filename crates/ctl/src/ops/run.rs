//! Running a plan (a function of the state read from etcd to the changes to write): a dry
//! run previews it, otherwise it is committed in one guarded transaction; either way the
//! report lists each key that changes, before and after.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::context::Context;
use crate::error::Error;
use dw_capacity::Traffic;

use crate::ops::commit::{
    Changes, Committed, PreCommitCheck, State, preview_checked, request_bytes, transact_checked,
};
use crate::ops::traffic_source::read_traffic;
use crate::output::{Outcome, Shown};
use crate::plan::apply::describe;
use crate::plan::capacity::{DEFAULT_HEADROOM, number_json};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::keys::Layout;
use crate::plan::node_report::NodeReport;
use crate::plan::prediction::caveats::{carriers_line, caveat_lines, caveats_json};
use crate::plan::prediction::stage::{predict_stage, writes_stage};
use crate::plan::prediction::{
    Prediction, changes_routing, drain_prediction, predict_change, refusal, render,
};

/// Previews or commits a plan and reports it, with its load prediction and the capacity
/// guard ([`Predictor`]).
pub async fn run_plan<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    dry_run: bool,
    mut plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    run_plan_with_traffic(context, client, title, dry_run, |state, _| plan(state)).await
}

/// [`run_plan`] for a plan that searches with the traffic the prediction reads (`shed`,
/// `--spill`): it gets the traffic, or why there is none.
pub async fn run_plan_with_traffic<F>(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    dry_run: bool,
    plan: F,
) -> Result<Outcome, Error>
where
    F: FnMut(&State, Result<&Traffic, String>) -> Result<Changes, Error>,
{
    let predictor = Predictor::new(context, title).await?;
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

/// The traffic a prediction reads and its source, or why there is none.
type TrafficRead = Result<(Traffic, String), String>;

/// The traffic of `read`, or why there is none (`None`: the command reads no traffic).
fn traffic_of(read: &Option<Arc<TrafficRead>>) -> Result<&Traffic, String> {
    match read.as_deref() {
        None => Err("this command reads no traffic".into()),
        Some(Ok((traffic, _))) => Ok(traffic),
        Some(Err(why)) => Err(why.clone()),
    }
}

/// A plan's load prediction and capacity guard, a [`PreCommitCheck`]: reads the traffic
/// once (a file or Prometheus, [`read_traffic`]), then on every attempt predicts the planned
/// change on the state read ([`predict_change`]) and refuses it (exit 9, nothing written)
/// when it puts an origin above its guard, unless `--allow-overload`, which adds an audit
/// record to the change. Without traffic, capacities or a routing change there is no
/// prediction, and the report says why.
pub struct Predictor {
    /// The traffic and its source, or why there is none (`None`: the command predicts
    /// nothing, it has no prediction flags). Shared with a plan that searches with it.
    traffic: Option<Arc<TrafficRead>>,
    allow_overload: bool,
    title: String,
    /// Where the audit record of `--allow-overload` goes, and the routing prefix.
    layout: Layout,
    /// The last attempt's prediction, or why none was made.
    last: Option<Result<Prediction, String>>,
    /// The node reports a change that writes a stage is predicted with (its cohort's
    /// members, [`Predictor::with_nodes`]).
    nodes: Vec<NodeReport>,
}

impl Predictor {
    /// Reads the traffic the command's flags name.
    pub async fn new(context: &Context, title: &str) -> Result<Predictor, Error> {
        let traffic = match &context.predict {
            Some(args) => Some(Arc::new(read_traffic(&args.source).await?)),
            None => None,
        };
        Ok(Predictor {
            traffic,
            allow_overload: context
                .predict
                .as_ref()
                .is_some_and(|args| args.allow_overload),
            title: title.to_owned(),
            layout: context.layout.clone(),
            last: None,
            nodes: Vec::new(),
        })
    }

    /// Whether the command reads traffic (it has prediction flags).
    pub fn reads_traffic(&self) -> bool {
        self.traffic.is_some()
    }

    /// The node reports to judge a stage's cohort by (`stage create`, `stage widen`).
    pub fn with_nodes(mut self, nodes: Vec<NodeReport>) -> Predictor {
        self.nodes = nodes;
        self
    }

    /// Predicts `changes` on `state` and applies the guard.
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
        // A routing change is predicted on current routing; one that writes a stage (and
        // no routing) on its cohort's nodes.
        let staged = !changes_routing(changes) && writes_stage(changes);
        if !changes_routing(changes) && !staged {
            return Ok(());
        }
        let (traffic, _) = match traffic {
            Ok(traffic) => traffic,
            Err(why) => {
                self.last = Some(Err(why.clone()));
                return Ok(());
            }
        };
        if let Some(why) = &state.capacities_unreadable {
            self.last = Some(Err(why.clone()));
            return Ok(());
        }
        let prediction = if staged {
            match predict_stage(state, changes, &layout.prefix, traffic, &self.nodes) {
                Ok(Some(prediction)) => prediction,
                Ok(None) => return Ok(()),
                Err(why) => {
                    self.last = Some(Err(why));
                    return Ok(());
                }
            }
        } else {
            predict_change(state, changes, &layout.prefix, traffic)?
        };
        let refused = prediction.refused();
        if !refused.is_empty() {
            if !self.allow_overload {
                let mut message = refusal(&prediction);
                if let Some(line) = carriers_line(traffic) {
                    message.push('\n');
                    message.push_str(&line);
                }
                return Err(Error::Overload(message));
            }
            let at = now_rfc3339();
            let key = format!("{}{at}-allow-overload-{}", layout.audits(), state.revision);
            let record = json!({
                "action": "allow-overload",
                "change": self.title,
                "by": operator(),
                "at": at,
                "read_revision": state.revision,
                "headroom": prediction.headroom,
                "overloads": refused.iter().map(|overload| json!({
                    "origin": overload.origin,
                    "predicted": overload.predicted,
                    "before": prediction.before.of(&overload.origin),
                    "capacity": overload.capacity,
                    "limit": overload.limit,
                })).collect::<Vec<_>>(),
            });
            changes.notes.push(format!(
                "--allow-overload: committed above the capacity guard; recorded at {}",
                Shown(&key)
            ));
            changes.audit.insert(key, record.to_string());
        }
        self.last = Some(Ok(prediction));
        Ok(())
    }

    /// Adds the prediction (or why none was made) to the outcome: its lines after the
    /// changes, `prediction` in the JSON.
    pub fn report(&self, outcome: &mut Outcome, dry_run: bool) {
        let (lines, json) = match (self.traffic.as_deref(), &self.last) {
            (None, _) | (Some(_), None) => return,
            (Some(_), Some(Err(why))) => (
                vec![format!(
                    "no load prediction: {}; the change is not checked against capacities",
                    Shown(why)
                )],
                json!({"made": false, "why": why}),
            ),
            (Some(Ok((traffic, source))), Some(Ok(prediction))) => {
                let (mut lines, mut json) = render(prediction, &Shown(source).to_string(), dry_run);
                // The nodes left out as implausible and the notes on the traffic's worth.
                lines.extend(caveat_lines(traffic));
                if let (Value::Object(object), Value::Object(caveats)) =
                    (&mut json, caveats_json(traffic))
                {
                    object.extend(caveats);
                }
                (lines, json)
            }
            (Some(Err(why)), Some(Ok(_))) => (Vec::new(), json!({"made": false, "why": why})),
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

/// An automatic drain's plan with its predicted load recorded in its drain record
/// (`predicted`): the overloads it causes, or why no prediction was made. Never refuses:
/// an origin failing probes or gone serves errors either way. `traffic` is read once per
/// drain ([`read_traffic`]); `None`: no source was configured.
pub async fn drain_traffic(
    source: Option<&crate::cli::TrafficSourceArgs>,
) -> Result<Result<(Traffic, String), String>, Error> {
    match source {
        Some(source) => read_traffic(source).await,
        None => Ok(Err("no traffic source configured".into())),
    }
}

/// Records in `changes`' drain record of `origin` what [`drain_prediction`] says.
pub fn record_drain_prediction(
    context_prefix: &str,
    traffic: &Result<(Traffic, String), String>,
    state: &State,
    changes: &mut Changes,
    origin: &str,
) {
    let predicted = drain_prediction(state, changes, context_prefix, traffic);
    if let Some(Some(record)) = changes.drains.get_mut(origin) {
        record.predicted = Some(predicted);
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
        lines.push(match (&before, capacity) {
            (None, Some(new)) => format!(
                "+ capacity/{shown} {} answers/s",
                number_json(new.answers_per_s)
            ),
            (Some(_), Some(new)) => format!(
                "~ capacity/{shown} {was} -> {} answers/s",
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
