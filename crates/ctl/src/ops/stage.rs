//! The stage operations (`stage create|widen|promote|abort`, and the rollout steps made of
//! them): a plain request in, each planned on the state read and previewed or committed
//! through the one preview-or-commit branch ([`run_checked`]: the size check, the load
//! prediction and the capacity guard included), the result out for the caller to word.
//! The planners are pure, in `crate::plan::stage_action`; the rules of a stage in
//! `crate::plan::stage` and `dw_routing::stage`.

use std::collections::BTreeMap;

use dw_capacity::Traffic;
use dw_routing::stage::{Cohort, STAGE_SCHEMA, Stage, check_stage_id};

use crate::context::Context;
use crate::error::Error;
use crate::input::read_file_async;
use crate::ops::commit::{Changes, Committed, State};
use crate::ops::fleet::{NodeReport, read_nodes};
use crate::ops::run::{ExemptReason, Predictor, WriteGuard, run_checked};
use crate::plan::apply::{Desired, DiffLine, FileFormat, parse_desired};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::rollout_gate::is_member;
use crate::plan::stage::is_empty_cohort;
pub use crate::plan::stage_action::Widening;
use crate::plan::stage_action::{plan_abort, plan_create, plan_promote, plan_widen};

/// Reads a stage's desired-state file (apply's format: JSON, or TOML by extension; `-`
/// reads stdin). Capacities are refused: no node reads them, so they are never staged.
pub async fn read_desired(file: &str) -> Result<Desired, Error> {
    let bytes = read_file_async(file).await?;
    let text = String::from_utf8(bytes).map_err(|_| Error::invalid("file", "is not UTF-8"))?;
    let desired = parse_desired(&text, FileFormat::from_path(file))?;
    if desired.capacities.is_some() || desired.capacity_headroom.is_some() {
        return Err(Error::invalid(
            "capacities",
            "capacities are not staged (no node reads them): set them with `dwctl apply` or \
             `dwctl origin capacity`",
        ));
    }
    Ok(desired)
}

/// `stage create`: a stage of `desired`'s keys that differ from current routing.
#[derive(Debug, Clone)]
pub struct CreateRequest<'a> {
    /// The desired state ([`read_desired`]).
    pub desired: &'a Desired,
    /// Who serves the staged values.
    pub cohort: Cohort,
    /// Why, for the stage and its audit record.
    pub reason: &'a str,
    /// The stage id.
    pub id: &'a str,
    /// Preview only, write nothing.
    pub dry_run: bool,
    /// The capacity guard's inputs (a stage moves its cohort's load).
    pub guard: WriteGuard,
}

/// What `stage create` made (or, dry, would make).
pub struct Created {
    /// The revision it was written at (`None` on a dry run).
    pub revision: Option<i64>,
    /// The stage as written.
    pub stage: Stage,
    /// The staged keys, each against current routing.
    pub diff: Vec<DiffLine>,
    /// The live nodes (by their reports) in the stage's cohort.
    pub members: Vec<String>,
    /// The load prediction to report.
    pub predictor: Predictor,
}

/// Creates a stage (or previews it with `dry_run`).
pub async fn create(context: &Context, request: &CreateRequest<'_>) -> Result<Created, Error> {
    if is_empty_cohort(&request.cohort) {
        return Err(Error::invalid(
            "cohort",
            "selects no node: give --cohort PERCENT, --nodes or --labels",
        ));
    }
    let id = request.id;
    check_stage_id(id).map_err(|e| Error::invalid("id", e.to_string()))?;
    let template = Stage {
        schema: STAGE_SCHEMA,
        id: id.to_owned(),
        cohort: request.cohort.clone(),
        kvs: BTreeMap::new(),
        base: BTreeMap::new(),
        created_by: operator(),
        created_at: now_rfc3339(),
        reason: request.reason.to_owned(),
    };
    let mut client = context.etcd.connect().await?;
    let mut diff = Vec::new();
    let plan = |state: &State, _: Result<&Traffic, String>| {
        Ok(plan_create(
            &context.layout,
            state,
            request.desired,
            &template,
            &mut diff,
        )?)
    };
    let title = format!("stage create {id}");
    let predictor = predictor(context, &mut client, &title, &request.guard).await?;
    let ran = run_checked(context, &mut client, predictor, request.dry_run, plan).await?;
    let stage = ran
        .committed
        .changes
        .stages
        .get(id)
        .cloned()
        .flatten()
        .unwrap_or(template);
    let nodes = read_nodes(&mut client, &context.layout.nodes).await?;
    let members = members(&stage, &nodes);
    Ok(Created {
        revision: ran.committed.revision,
        stage,
        diff,
        members,
        predictor: ran.predictor,
    })
}

/// The prediction of a stage action: the traffic the command's flags name, and the node
/// reports its cohort is judged by (read only when there is traffic to predict with).
async fn predictor(
    context: &Context,
    client: &mut etcd_client::Client,
    title: &str,
    guard: &WriteGuard,
) -> Result<Predictor, Error> {
    let predictor = Predictor::new(context, title, guard).await?;
    if !predictor.reads_traffic() {
        return Ok(predictor);
    }
    let nodes = read_nodes(client, &context.layout.nodes).await?;
    Ok(predictor.with_nodes(nodes))
}

/// The live nodes (by their reports) in the stage's cohort.
pub fn members(stage: &Stage, nodes: &[NodeReport]) -> Vec<String> {
    nodes
        .iter()
        .filter(|node| node.live && is_member(stage, node))
        .map(|node| node.id.clone())
        .collect()
}

/// A stage action written (widen, promote, abort).
pub struct Acted {
    /// What was written, and the state it was planned on.
    pub committed: Committed,
    /// The load prediction to report.
    pub predictor: Predictor,
}

/// Writes a stage action (`action`: `widened`, `promoted`, `aborted`) planned by `plan`.
async fn act<F>(
    context: &Context,
    action: &str,
    id: &str,
    guard: &WriteGuard,
    mut plan: F,
) -> Result<Acted, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let mut client = context.etcd.connect().await?;
    // A widen is predicted on the cohort's nodes; a promote writes the staged values as
    // current routing: predicted and guarded like any routing change (abort closes the
    // stage: never refused, nothing predicted).
    let title = format!("stage {action} {id}");
    let predictor = predictor(context, &mut client, &title, guard).await?;
    let ran = run_checked(context, &mut client, predictor, false, |state, _| {
        plan(state)
    })
    .await?;
    Ok(Acted {
        committed: ran.committed,
        predictor: ran.predictor,
    })
}

/// Widens stage `id`'s cohort by `widening` (earlier members always stay in).
pub async fn widen(
    context: &Context,
    id: &str,
    widening: &Widening,
    reason: &str,
    guard: &WriteGuard,
) -> Result<Acted, Error> {
    let plan = |state: &State| Ok(plan_widen(&context.layout, state, id, widening, reason)?);
    act(context, "widened", id, guard, plan).await
}

/// Promotes stage `id`: its values become current routing for every node, in one
/// transaction guarded on the revisions it was made from (`rebase`: over changes made
/// outside dwctl since).
pub async fn promote(
    context: &Context,
    id: &str,
    rebase: bool,
    reason: &str,
    guard: &WriteGuard,
) -> Result<Acted, Error> {
    let plan = |state: &State| Ok(plan_promote(&context.layout, state, id, rebase, reason)?);
    act(context, "promoted", id, guard, plan).await
}

/// Aborts stage `id`: its cohort returns to current routing.
pub async fn abort(context: &Context, id: &str, reason: &str) -> Result<Acted, Error> {
    let plan = |state: &State| Ok(plan_abort(&context.layout, state, id, reason)?);
    let exempt = WriteGuard::Exempt(ExemptReason::StageAbort);
    act(context, "aborted", id, &exempt, plan).await
}
