//! The driver of one rollout: each step widened, waited for and baked, the progress record
//! written as it goes, and the verdicts (abort, time-out, signal, promote).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use dw_routing::stage::Stage;

use crate::context::Context;
use crate::error::{EXIT_ROLLOUT_ABORTED, EXIT_STEP_TIMED_OUT, Error};
use crate::ops::bake_checks::{probe_round, run_check};
use crate::ops::rollout::RolloutStore;
use crate::ops::run::{Predictor, WriteGuard};
use crate::ops::stage::{self, Widening};
use crate::output::{Outcome, Reporter, escape as shown};
use crate::plan::clock::now_rfc3339;
use crate::plan::rollout::{Record, RolloutState, duration_text, percent_text};
use crate::plan::rollout_gate::{Gate, Streaks, judge};
use crate::progress::ProgressLine;
use crate::shutdown::Shutdown;

/// How often the node reports and the stage are read while a step waits or bakes.
const POLL: Duration = Duration::from_millis(250);

/// The bake of a step, once its cohort serves the stage.
struct Bake {
    started: Instant,
    next_probe: Instant,
    next_check: Instant,
    /// The round after the bake time (probes and check once more) has been made.
    final_round: bool,
}

/// Drives one rollout from the step its record names.
pub(super) struct Driver<'a> {
    context: &'a Context,
    store: RolloutStore<'a>,
    /// The progress record as last written (or about to be).
    pub(super) record: Record,
    record_revision: i64,
    reporter: Reporter,
    progress: Option<ProgressLine>,
    shutdown: Shutdown,
    /// The check command given on this command line (never one read from etcd).
    check: Option<String>,
    /// The capacity guard's inputs of each widen and the promote (this command line's).
    guard: WriteGuard,
}

impl<'a> Driver<'a> {
    /// A driver of `record` (last written at `record_revision`, 0: never), running `check`.
    pub(super) fn new(
        context: &'a Context,
        store: RolloutStore<'a>,
        record: Record,
        record_revision: i64,
        shutdown: Shutdown,
        check: Option<String>,
        guard: WriteGuard,
    ) -> Driver<'a> {
        Driver {
            context,
            store,
            record,
            record_revision,
            reporter: context.reporter(),
            progress: ProgressLine::on_terminal(context.output),
            shutdown,
            check,
            guard,
        }
    }

    fn id(&self) -> &str {
        &self.record.id
    }

    fn step_text(&self) -> String {
        let steps = &self.record.plan.steps;
        let step = self.record.step.min(steps.len() - 1);
        format!(
            "step {}/{} ({})",
            step + 1,
            steps.len(),
            percent_text(steps[step])
        )
    }

    /// Prints one event (text line or JSON object), clearing the progress line first.
    pub(super) fn event(&mut self, event: &str, text: &str, mut fields: Value) {
        if let Some(progress) = self.progress.as_mut() {
            progress.clear();
        }
        if let Value::Object(object) = &mut fields {
            object
                .entry("id")
                .or_insert_with(|| Value::from(self.record.id.clone()));
        }
        self.reporter.event(event, text, fields);
    }

    /// Prints the load a stage action was predicted to make (a `predicted` event: its
    /// summary on one line, the prediction in JSON), when a prediction was made.
    pub(super) fn predicted(&mut self, predictor: &Predictor) {
        let mut outcome = Outcome {
            text: String::new(),
            json: json!({}),
        };
        predictor.report(&mut outcome, false);
        if outcome.json["prediction"]["made"] != true {
            return;
        }
        let summary: Vec<&str> = outcome.text.lines().map(str::trim).collect();
        let text = format!("{}: {}", self.step_text(), summary.join("; "));
        // The promote is the last step's (the record's step is past it by then).
        let step = self.record.step.min(self.record.plan.steps.len() - 1) + 1;
        let fields = json!({"step": step, "prediction": outcome.json["prediction"]});
        self.event("predicted", &text, fields);
    }

    /// Writes the progress record, guarded on its last revision.
    pub(super) async fn save(&mut self) -> Result<(), Error> {
        self.record.updated_at = now_rfc3339();
        let key = self.context.layout.rollout(&self.record.id);
        let value = serde_json::to_string(&self.record)
            .map_err(|e| Error::Failed(format!("cannot encode the progress record: {e}")))?;
        let saved = self
            .store
            .save(&self.record.id, value, self.record_revision)
            .await?;
        let Some(revision) = saved else {
            return Err(Error::Failed(format!(
                "the progress record {key} was written by someone else meanwhile (another \
                 `dwctl rollout resume {}`?): this dwctl stops here; the stage stays as it is",
                self.record.id
            )));
        };
        self.record_revision = revision;
        Ok(())
    }

    /// Records how the rollout stopped (best effort: the error that stops it matters more).
    async fn finish(&mut self, state: RolloutState, outcome: &str) {
        self.record.state = state;
        self.record.outcome = Some(outcome.to_owned());
        if let Err(error) = self.save().await {
            let text = format!("cannot record the rollout's end: {error}");
            self.event("error", &text, json!({"error": error.to_string()}));
        }
    }

    fn resume_hint(&self) -> String {
        let check = self
            .record
            .plan
            .check
            .as_ref()
            .map(|check| format!(" --check {check:?}"))
            .unwrap_or_default();
        format!(
            "resume with `dwctl rollout resume {}{}` (the step's bake starts over), or abort \
             with `dwctl stage abort {}`",
            self.id(),
            shown(&check),
            self.id()
        )
    }

    /// Runs the steps from the recorded one, then promotes.
    pub(super) async fn drive(&mut self) -> Result<Outcome, Error> {
        loop {
            let steps = self.record.plan.steps.clone();
            if self.record.step >= steps.len() {
                return self.promote().await;
            }
            let points = steps[self.record.step];
            self.widen_to(points).await?;
            self.record.bake_started_at = None;
            self.save().await?;
            let text = self.step_text();
            self.event(
                "step",
                &format!("{text}: the stage's cohort is {}", percent_text(points)),
                json!({"step": self.record.step + 1, "steps": steps.len(),
                       "percent": f64::from(points) / 100.0}),
            );
            let gate = self.run_step().await?;
            let text = format!(
                "{}: passed ({} cohort node(s) served it for {})",
                self.step_text(),
                gate.serving.len(),
                duration_text(self.record.plan.bake())
            );
            self.event(
                "step-passed",
                &text,
                json!({"step": self.record.step + 1, "serving": gate.serving}),
            );
            self.record.step += 1;
            self.save().await?;
        }
    }

    /// Widens the stage to `points` unless its cohort is that wide already (a resumed step).
    async fn widen_to(&mut self, points: u16) -> Result<(), Error> {
        let stage = match self.read_stage().await {
            Ok((stage, _)) => stage,
            Err(Error::NotFound(_)) => return Err(self.closed_outside().await),
            Err(error) => return Err(self.stopped(error).await),
        };
        if stage.cohort.points >= points {
            return Ok(());
        }
        let reason = format!("rollout {}: {}", self.step_text(), self.record.reason);
        match stage::widen(
            self.context,
            self.id(),
            &Widening::to_points(points),
            &reason,
            &self.guard,
        )
        .await
        {
            Ok(widened) => {
                self.predicted(&widened.predictor);
                Ok(())
            }
            Err(Error::NotFound(_)) => Err(self.closed_outside().await),
            Err(Error::Overload(refusal)) => Err(self.refused(&refusal).await),
            Err(error) => Err(self.stopped(error).await),
        }
    }

    async fn read_stage(&mut self) -> Result<(Stage, i64), Error> {
        let id = self.record.id.clone();
        self.store.read_stage(&id).await
    }

    /// The stage's revision and what the node reports say of its cohort.
    async fn look(&mut self) -> Result<(i64, Gate), Error> {
        let (stage, revision) = self.read_stage().await?;
        let nodes = self.store.nodes().await?;
        Ok((
            revision,
            judge(&stage, revision, &self.context.layout.prefix, &nodes),
        ))
    }

    /// Waits for the cohort, then bakes; `Ok` with the last look once the step passed.
    async fn run_step(&mut self) -> Result<Gate, Error> {
        let plan = self.record.plan.clone();
        let mut waiting_since = Instant::now();
        let mut bake: Option<Bake> = None;
        let mut streaks = Streaks::new(plan.fail_after);
        let mut last_blocking: Option<Vec<(String, String)>> = None;
        loop {
            if self.shutdown.is_triggered() {
                return Err(self.interrupted().await);
            }
            let (revision, gate) = match self.look().await {
                Ok(look) => look,
                Err(Error::NotFound(_)) => return Err(self.closed_outside().await),
                Err(error) => {
                    // etcd away for a moment: no evidence, so a bake starts over.
                    let text = format!("{error}; retrying");
                    self.event("error", &text, json!({"error": error.to_string()}));
                    if bake.take().is_some() {
                        waiting_since = Instant::now();
                    }
                    self.store.reconnect().await;
                    if waiting_since.elapsed() > plan.step_timeout() {
                        return Err(self.timed_out(&Gate::default()).await);
                    }
                    self.pause().await?;
                    continue;
                }
            };
            if let Some((node, key)) = gate.rejected.first() {
                let reason = format!(
                    "node {} reports the staged key {} rejected",
                    shown(node),
                    shown(key)
                );
                return Err(self.abort(&reason).await);
            }
            if gate.members.len() < plan.min_nodes {
                let reason = format!(
                    "the cohort holds {} live node(s), fewer than --min-nodes {}",
                    gate.members.len(),
                    plan.min_nodes
                );
                return Err(self.abort(&reason).await);
            }
            if !gate.all_serving(plan.min_nodes) {
                if bake.take().is_some() {
                    waiting_since = Instant::now();
                    let text = format!(
                        "{}: {} cohort node(s) stopped serving the stage: the bake starts over \
                         once they do",
                        self.step_text(),
                        gate.blocking.len()
                    );
                    let fields = json!({"blocking": blocking_json(&gate)});
                    self.event("bake-restarted", &text, fields);
                }
                if waiting_since.elapsed() > plan.step_timeout() {
                    return Err(self.timed_out(&gate).await);
                }
                if last_blocking.as_ref() != Some(&gate.blocking) {
                    let text = format!(
                        "{}: {}/{} cohort node(s) serve revision {revision} of the stage; \
                         waiting for {}",
                        self.step_text(),
                        gate.serving.len(),
                        gate.members.len(),
                        blocking_text(&gate)
                    );
                    let fields = json!({"step": self.record.step + 1, "serving": gate.serving,
                                        "blocking": blocking_json(&gate)});
                    self.event("waiting", &text, fields);
                    last_blocking = Some(gate.blocking.clone());
                }
                let left = plan.step_timeout().saturating_sub(waiting_since.elapsed());
                self.show(&format!(
                    "{}: {}/{} cohort nodes serve it, waiting ({} to time-out)",
                    self.step_text(),
                    gate.serving.len(),
                    gate.members.len(),
                    duration_text(left)
                ));
                self.pause().await?;
                continue;
            }
            last_blocking = None;
            if bake.is_none() {
                let now = Instant::now();
                bake = Some(Bake {
                    started: now,
                    next_probe: now,
                    next_check: now,
                    final_round: false,
                });
                streaks.reset();
                self.record.bake_started_at = Some(now_rfc3339());
                if let Err(error) = self.save().await {
                    return Err(self.stopped(error).await);
                }
                let text = format!(
                    "{}: all {} cohort node(s) serve revision {revision} of the stage; baking {}",
                    self.step_text(),
                    gate.serving.len(),
                    duration_text(plan.bake())
                );
                let fields = json!({"step": self.record.step + 1, "serving": gate.serving,
                                    "bake_seconds": plan.bake().as_secs_f64()});
                self.event("baking", &text, fields);
            }
            let Some(current) = bake.as_mut() else {
                continue;
            };
            let now = Instant::now();
            let over = current.started.elapsed() >= plan.bake();
            let final_round = over && !current.final_round;
            if final_round {
                current.final_round = true;
            }
            let probe_now = !plan.probes.is_empty() && (now >= current.next_probe || final_round);
            let check_now = self.check.is_some() && (now >= current.next_check || final_round);
            if probe_now {
                current.next_probe = now + Duration::from_millis(plan.probe_interval_ms);
            }
            if check_now {
                current.next_check = now + Duration::from_millis(plan.check_interval_ms);
            }
            let left = plan.bake().saturating_sub(current.started.elapsed());
            if probe_now {
                let timeout = Duration::from_millis(plan.probe_timeout_ms);
                for (origin, result) in probe_round(&plan.probes, timeout).await {
                    if let Err(error) = &result {
                        let text = format!("{origin}: {}", shown(error));
                        let fields = json!({"origin": origin, "error": error});
                        self.event("probe-failed", &text, fields);
                    }
                    if let Some(reason) = streaks.record(&origin, result) {
                        return Err(self.abort(&shown(&reason)).await);
                    }
                }
            }
            if check_now && let Some(check) = self.check.clone() {
                let percent = percent_text(plan.steps[self.record.step]);
                let env = [
                    ("DW_ROLLOUT_ID", self.record.id.clone()),
                    ("DW_ROLLOUT_STEP", (self.record.step + 1).to_string()),
                    (
                        "DW_ROLLOUT_PERCENT",
                        percent.trim_end_matches('%').to_owned(),
                    ),
                ];
                let timeout = Duration::from_millis(plan.check_timeout_ms);
                if let Err(why) = run_check(&check, &env, timeout).await {
                    let reason = format!("--check failed: {}", shown(&why));
                    return Err(self.abort(&reason).await);
                }
            }
            if over && streaks.all_healthy() {
                if let Some(progress) = self.progress.as_mut() {
                    progress.clear();
                }
                return Ok(gate);
            }
            self.show(&format!(
                "{}: {}/{} cohort nodes serve it, baking, {} left",
                self.step_text(),
                gate.serving.len(),
                gate.members.len(),
                duration_text(left)
            ));
            self.pause().await?;
        }
    }

    fn show(&mut self, text: &str) {
        if let Some(progress) = self.progress.as_mut() {
            progress.show(text);
        }
    }

    /// Sleeps one poll; a signal meanwhile stops the rollout where it is.
    async fn pause(&mut self) -> Result<(), Error> {
        if self.shutdown.sleep(POLL).await {
            Ok(())
        } else {
            Err(self.interrupted().await)
        }
    }

    async fn abort(&mut self, reason: &str) -> Error {
        let at = self.step_text();
        let audit = format!("rollout {at}: {reason}");
        let aborted = match stage::abort(self.context, self.id(), &audit).await {
            Ok(_) | Err(Error::NotFound(_)) => {
                "the stage is aborted: its cohort routes from current routing again".to_owned()
            }
            Err(error) => format!(
                "aborting the stage failed ({error}): abort it with `dwctl stage abort {}`",
                self.id()
            ),
        };
        let message = format!("rollout {} aborted at {at}: {reason}; {aborted}", self.id());
        self.finish(RolloutState::Aborted, reason).await;
        let fields = json!({"step": self.record.step + 1, "reason": reason});
        let text = format!("stage {} aborted at {at}", self.id());
        self.event("aborted", &text, fields);
        Error::Rollout {
            code: EXIT_ROLLOUT_ABORTED,
            kind: "rollout-aborted",
            message,
        }
    }

    async fn closed_outside(&mut self) -> Error {
        let message = format!(
            "rollout {} stopped at {}: its stage was closed outside the rollout (promoted or \
             aborted by someone else)",
            self.id(),
            self.step_text()
        );
        self.finish(
            RolloutState::Aborted,
            "the stage was closed outside the rollout",
        )
        .await;
        Error::Rollout {
            code: EXIT_ROLLOUT_ABORTED,
            kind: "rollout-aborted",
            message,
        }
    }

    async fn timed_out(&mut self, gate: &Gate) -> Error {
        let message = format!(
            "rollout {}: {} timed out after {}: {}/{} cohort node(s) serve the stage; not: {}. \
             The stage stays as it is; {}",
            self.id(),
            self.step_text(),
            duration_text(self.record.plan.step_timeout()),
            gate.serving.len(),
            gate.members.len(),
            blocking_text(gate),
            self.resume_hint()
        );
        self.finish(RolloutState::TimedOut, "the step timed out")
            .await;
        Error::Rollout {
            code: EXIT_STEP_TIMED_OUT,
            kind: "step-timed-out",
            message,
        }
    }

    async fn interrupted(&mut self) -> Error {
        let message = format!(
            "rollout {} stopped by a signal at {}: the stage stays as it is (its cohort keeps \
             serving it); {}",
            self.id(),
            self.step_text(),
            self.resume_hint()
        );
        self.finish(RolloutState::Interrupted, "stopped by a signal")
            .await;
        Error::Rollout {
            code: 130,
            kind: "interrupted",
            message,
        }
    }

    /// The capacity guard refused the step's widen or the promote (nothing written): the
    /// rollout stops there as after a timed-out step, resumable, the stage as it is (its
    /// cohort the last passed step's), and the command exits 9 with the refusal.
    async fn refused(&mut self, refusal: &str) -> Error {
        let at = self.step_text();
        let what = if self.record.step >= self.record.plan.steps.len() {
            "the promote"
        } else {
            "the step's widen"
        };
        self.finish(
            RolloutState::Stopped,
            &format!("the capacity guard refused {what} at {at}"),
        )
        .await;
        let text = format!(
            "{at}: the capacity guard refused {what}, nothing written; the stage stays as it is"
        );
        self.event(
            "refused",
            &text,
            json!({"step": self.record.step + 1, "refusal": refusal}),
        );
        Error::Overload(format!(
            "rollout {} stopped at {at}: {refusal}\nThe stage stays as it is (its cohort is the \
             last passed step's). Once the load fits (a capacity raised, traffic moved), {}; \
             give the traffic source again (--traffic or --prometheus) for the resumed steps to \
             be guarded, or --allow-overload to go on above the guard",
            self.id(),
            self.resume_hint()
        ))
    }

    /// An error that stops the rollout without a verdict (etcd, a promote conflict).
    async fn stopped(&mut self, error: Error) -> Error {
        let text = format!("{error}");
        self.finish(RolloutState::Stopped, &text).await;
        let hint = self.resume_hint();
        self.event(
            "stopped",
            &format!("{text}; {hint}"),
            json!({"error": text}),
        );
        error
    }

    async fn promote(&mut self) -> Result<Outcome, Error> {
        let reason = format!("rollout: every step passed; {}", self.record.reason);
        let promoted =
            match stage::promote(self.context, self.id(), false, &reason, &self.guard).await {
                Ok(promoted) => promoted,
                Err(Error::NotFound(_)) => return Err(self.closed_outside().await),
                Err(Error::Overload(refusal)) => return Err(self.refused(&refusal).await),
                Err(error) => return Err(self.stopped(error).await),
            };
        self.predicted(&promoted.predictor);
        let revision = promoted.committed.revision.map_or(Value::Null, Value::from);
        self.finish(RolloutState::Promoted, "promoted").await;
        let steps = self.record.plan.steps.len();
        Ok(Outcome {
            text: format!(
                "promoted: rollout {} at revision {revision} after {steps} step(s): the staged \
                 values are current routing for every node",
                self.id()
            ),
            json: json!({"event": "promoted", "id": self.id(), "revision": revision,
                         "steps": steps, "at": now_rfc3339()}),
        })
    }
}

fn blocking_text(gate: &Gate) -> String {
    if gate.blocking.is_empty() {
        return "-".into();
    }
    let mut parts: Vec<String> = gate
        .blocking
        .iter()
        .take(5)
        .map(|(node, why)| format!("{} ({})", shown(node), shown(why)))
        .collect();
    if gate.blocking.len() > 5 {
        parts.push(format!("and {} more", gate.blocking.len() - 5));
    }
    parts.join(", ")
}

fn blocking_json(gate: &Gate) -> Value {
    gate.blocking
        .iter()
        .map(|(node, why)| json!({"id": node, "why": why}))
        .collect()
}
