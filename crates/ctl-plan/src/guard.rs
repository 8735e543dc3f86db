//! The capacity guard by type: every write states, with no default, either the inputs of
//! its load prediction ([`Guard::Predict`]) or why it is exempt ([`Guard::Exempt`]); and
//! the guard's decision on a planned change ([`decide`]), a pure function of what was
//! read.
//!
//! dwctl's write path (`ops::run::run_plan`, `run_checked`) takes a guard through
//! [`StatesGuard`], a trait whose one method has no default: a writing command that states
//! neither does not compile (`tests/guard_by_type.rs` pins the compiler's message).
//!
//! Who is refused (one rule for dwctl's writes, docs/dwctl.md "The guard"):
//! - a person's change (drain, shed, restore, set, apply, stages, rollouts) is judged only
//!   where capacities are set. It is refused (dwctl: exit 9) when it puts an origin above
//!   its guard, and when the configured source answered with traffic that cannot be used
//!   (never waved through); `--allow-overload` commits it anyway, audited. Where no
//!   capacity is set nothing is judged and nothing is said about it;
//! - the automatic drains of `health` and `rebalance` are never refused (an origin failing
//!   probes or gone serves errors either way): exempt, they record their prediction in
//!   the drain record ([`drain_prediction`]);
//! - writes that move no load (a registration forgotten, capacity records) are exempt.

use dw_capacity::Traffic;
use serde_json::{Value, json};

use crate::Error;
use crate::model::{Changes, State};
use crate::node_report::NodeReport;
use crate::prediction::caveats::{carriers_line, caveats_json};
use crate::prediction::stage::{predict_stage, writes_stage};
use crate::prediction::{Prediction, changes_routing, predict_change, refusal};
use crate::shown::Shown;

/// What a write states about the capacity guard: the inputs of its load prediction, or
/// why it needs none.
#[derive(Debug, Clone, PartialEq)]
pub enum Guard<I> {
    /// Predict the change's load with these inputs (dwctl: where the traffic comes from,
    /// and `--allow-overload`) and judge it.
    Predict(I),
    /// Not judged, for this reason.
    Exempt(ExemptReason),
}

/// Why a write is not judged by the capacity guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExemptReason {
    /// `health`'s drain or shed of an origin that fails its probes (it serves errors
    /// either way); its prediction is recorded in the drain record.
    HealthDrain,
    /// `rebalance`'s drain of an origin whose lease is gone; its prediction is recorded.
    Rebalance,
    /// `stage abort`: its cohort goes back to the current routing the rest of the fleet
    /// serves.
    StageAbort,
    /// The write moves no load.
    MovesNoLoad(NoLoad),
}

/// Writes that move no load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoLoad {
    /// `origin forget`: a registration record (whether `rebalance` watches an origin).
    Registration,
    /// Capacity and headroom records (`origin capacity`, their rollback): the guard's
    /// inputs, not routing.
    Capacities,
    /// An origin's home geos (`origin home`): which geos the autopilot moves last, kept
    /// in the capacity record; no routing.
    HomeGeos,
}

impl std::fmt::Display for ExemptReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExemptReason::HealthDrain => "a health drain (the origin fails its probes)",
            ExemptReason::Rebalance => "a rebalance drain (the origin's lease is gone)",
            ExemptReason::StageAbort => "a stage abort (its cohort returns to current routing)",
            ExemptReason::MovesNoLoad(NoLoad::Registration) => {
                "a registration record (moves no load)"
            }
            ExemptReason::MovesNoLoad(NoLoad::Capacities) => "capacity records (move no load)",
            ExemptReason::MovesNoLoad(NoLoad::HomeGeos) => "home geos (move no load)",
        })
    }
}

/// A write's statement about the guard. The one method has no default: a writing request
/// type that does not implement it, or implements it without saying, does not compile.
#[diagnostic::on_unimplemented(
    message = "`{Self}` writes without stating its capacity guard",
    label = "this write states neither its prediction inputs nor why it is exempt",
    note = "give `Guard::Predict(inputs)` or `Guard::Exempt(reason)` \
            (dw_ctl_plan::guard), or implement `StatesGuard` for `{Self}`"
)]
pub trait StatesGuard {
    /// The prediction's inputs (dwctl: `ops::run::PredictInputs`).
    type Inputs;
    /// The inputs of this write's prediction, or why it is exempt.
    fn guard(&self) -> Guard<Self::Inputs>;
}

impl<I: Clone> StatesGuard for Guard<I> {
    type Inputs = I;
    fn guard(&self) -> Guard<I> {
        self.clone()
    }
}

/// The guard a write states: what the write path takes ([`StatesGuard`]).
pub fn stated<W: StatesGuard + ?Sized>(write: &W) -> Guard<W::Inputs> {
    write.guard()
}

/// The traffic a prediction reads, as its source gave it.
#[derive(Debug, Clone)]
pub enum TrafficRead {
    /// No source was given (no traffic file, no Prometheus): why.
    NotGiven(String),
    /// A source was given and did not answer (unreachable, refused, cannot be asked): why.
    Unanswered(String),
    /// A source answered with traffic that cannot be used (a window with no data, rates
    /// that are not numbers, no usable node left): why. Refused where capacities are set.
    Unusable(String),
    /// Traffic to predict with.
    Usable {
        /// The rates.
        traffic: Traffic,
        /// Where they came from, as the report names it.
        source: String,
        /// Nodes whose rates were left out (issue 40's plausibility checks: a rate above
        /// the per-node ceiling, a counter that jumps, far above the fleet's median), each
        /// named with why. The prediction says so.
        left_out: Vec<LeftOut>,
    },
}

/// A node whose rates a prediction left out, and why (`dw_capacity::check_plausibility`
/// decides).
pub use dw_capacity::LeftOut;

impl TrafficRead {
    /// The traffic, or why there is none (for a plan that searches with it: shed, spill).
    pub fn traffic(&self) -> Result<&Traffic, String> {
        match self {
            TrafficRead::Usable { traffic, .. } => Ok(traffic),
            TrafficRead::NotGiven(why)
            | TrafficRead::Unanswered(why)
            | TrafficRead::Unusable(why) => Err(why.clone()),
        }
    }

    /// The nodes the reading left out as implausible (none but for `Usable`).
    pub fn left_out(&self) -> &[LeftOut] {
        match self {
            TrafficRead::Usable { left_out, .. } => left_out,
            _ => &[],
        }
    }

    /// The traffic and its source, or why there is none.
    pub fn usable(&self) -> Result<(&Traffic, &str), String> {
        match self {
            TrafficRead::Usable {
                traffic, source, ..
            } => Ok((traffic, source)),
            other => Err(other.traffic().err().unwrap_or_default()),
        }
    }
}

/// A planned change, as the guard judges it.
#[derive(Debug, Clone, Copy)]
pub struct Planned<'a> {
    /// The state it was planned on.
    pub state: &'a State,
    /// What it writes.
    pub changes: &'a Changes,
    /// The routing prefix (the tables are compiled under it).
    pub prefix: &'a str,
    /// The node reports a change that writes a stage is judged by (its cohort's members).
    pub nodes: &'a [NodeReport],
}

/// What a person's write asked of the guard (dwctl: its prediction flags), once the
/// traffic is read.
#[derive(Debug, Clone, Copy)]
pub struct Judging<'a> {
    /// The traffic read for it.
    pub traffic: &'a TrafficRead,
    /// `--allow-overload`: commit what the guard refuses, audited.
    pub allow_overload: bool,
}

/// The guard's decision on a planned change.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// Nothing judged and nothing to say: exempt, no routing moved, or no capacity set
    /// (and no traffic to show the load with).
    NotJudged,
    /// No prediction could be made; the change goes ahead and says why.
    NoPrediction(String),
    /// Predicted; nothing it raises is above a guard.
    Passed(Box<Prediction>),
    /// Refused: nothing is written (dwctl: exit 9); the message says why and what fits.
    Refused(String),
    /// What the guard refuses, committed with `--allow-overload`: an audit record goes in
    /// the same transaction.
    Overridden(Override),
}

/// What `--allow-overload` committed past the guard.
#[derive(Debug, Clone)]
pub enum Override {
    /// A change predicted above the guard.
    Overload(Box<Prediction>),
    /// A change the source's traffic could not judge (why).
    Unusable(String),
}

/// The guard's decision on `planned`: [`Verdict`]. `Err` only when the prediction itself
/// fails (a table the capacity model cannot take).
pub fn decide(guard: Guard<Judging<'_>>, planned: Planned<'_>) -> Result<Verdict, Error> {
    let judging = match guard {
        Guard::Exempt(_) => return Ok(Verdict::NotJudged),
        Guard::Predict(judging) => judging,
    };
    let Planned {
        state,
        changes,
        prefix,
        nodes,
    } = planned;
    // A routing change is predicted on current routing; one that writes a stage (and no
    // routing) on its cohort's nodes. Anything else moves no load.
    let staged = !changes_routing(changes) && writes_stage(changes);
    if !changes_routing(changes) && !staged {
        return Ok(Verdict::NotJudged);
    }
    if let Some(why) = &state.capacities_unreadable {
        // Whether capacities are set cannot be known: said, not refused.
        return Ok(Verdict::NoPrediction(why.clone()));
    }
    let capacities_set = !state.valid_capacities().is_empty();
    let traffic = match judging.traffic {
        TrafficRead::Usable { traffic, .. } => traffic,
        TrafficRead::NotGiven(_) | TrafficRead::Unanswered(_) if !capacities_set => {
            return Ok(Verdict::NotJudged);
        }
        TrafficRead::NotGiven(why) | TrafficRead::Unanswered(why) => {
            return Ok(Verdict::NoPrediction(why.clone()));
        }
        TrafficRead::Unusable(_) if !capacities_set => return Ok(Verdict::NotJudged),
        TrafficRead::Unusable(why) if judging.allow_overload => {
            return Ok(Verdict::Overridden(Override::Unusable(why.clone())));
        }
        TrafficRead::Unusable(why) => return Ok(Verdict::Refused(unusable_refusal(why))),
    };
    let prediction = if staged {
        match predict_stage(state, changes, prefix, traffic, nodes) {
            Ok(Some(prediction)) => prediction,
            Ok(None) => return Ok(Verdict::NotJudged),
            Err(_) if !capacities_set => return Ok(Verdict::NotJudged),
            Err(why) => return Ok(Verdict::NoPrediction(why)),
        }
    } else {
        predict_change(state, changes, prefix, traffic)?
    };
    if prediction.refused().is_empty() {
        Ok(Verdict::Passed(Box::new(prediction)))
    } else if judging.allow_overload {
        Ok(Verdict::Overridden(Override::Overload(Box::new(
            prediction,
        ))))
    } else {
        // The refusal names the nodes whose answers carry the load, and those left out.
        let mut message = refusal(&prediction);
        if let Some(line) = carriers_line(traffic, judging.traffic.left_out()) {
            message.push('\n');
            message.push_str(&line);
        }
        Ok(Verdict::Refused(message))
    }
}

/// What an automatic drain records of its predicted load (`predicted` in its drain
/// record): `{"made": true, "source", "headroom", "overloads": [{"origin", "predicted",
/// "before", "capacity", "limit"}], "left_out": [{"node", "why"}]}` (the overloads the
/// drain causes or worsens; the nodes left out as implausible), or `{"made": false,
/// "why"}`.
pub fn drain_prediction(
    state: &State,
    changes: &Changes,
    prefix: &str,
    read: &TrafficRead,
) -> Value {
    let (traffic, source) = match read.usable() {
        Ok(found) => found,
        Err(why) => return json!({"made": false, "why": why}),
    };
    if let Some(why) = &state.capacities_unreadable {
        return json!({"made": false, "why": why});
    }
    match predict_change(state, changes, prefix, traffic) {
        Ok(prediction) => json!({
            "made": true,
            "source": source,
            "headroom": prediction.headroom,
            "overloads": prediction.refused().iter().map(|overload| json!({
                "origin": overload.origin,
                "predicted": overload.predicted,
                "before": prediction.before.of(&overload.origin),
                "capacity": overload.capacity,
                "limit": overload.limit,
            })).collect::<Vec<_>>(),
            "left_out": caveats_json(traffic, read.left_out())["left_out"],
        }),
        Err(error) => json!({"made": false, "why": error.to_string()}),
    }
}

/// The refusal of a change whose source answered traffic that cannot be used.
pub fn unusable_refusal(why: &str) -> String {
    format!(
        "refused, nothing written: the traffic source answered data that cannot be used, \
         so the change cannot be checked against the capacities that are set: {}\n\
         --allow-overload commits it anyway (recorded in an audit record under \
         <control-prefix>audit/); capacities: `dwctl origin list`",
        Shown(why)
    )
}

/// Who overrode the guard, when, on what.
#[derive(Debug, Clone, Copy)]
pub struct Overrider<'a> {
    /// The change's title (`drain fra-a`).
    pub change: &'a str,
    /// Who.
    pub by: &'a str,
    /// When (RFC 3339).
    pub at: &'a str,
    /// The revision the change was planned on.
    pub read_revision: i64,
}

/// The audit record of `--allow-overload` (kept under `<control-prefix>audit/`).
pub fn override_record(overridden: &Override, who: Overrider<'_>) -> Value {
    let mut record = json!({
        "action": "allow-overload",
        "change": who.change,
        "by": who.by,
        "at": who.at,
        "read_revision": who.read_revision,
    });
    match overridden {
        Override::Overload(prediction) => {
            record["headroom"] = json!(prediction.headroom);
            record["overloads"] = prediction
                .refused()
                .iter()
                .map(|overload| {
                    json!({
                        "origin": overload.origin,
                        "predicted": overload.predicted,
                        "before": prediction.before.of(&overload.origin),
                        "capacity": overload.capacity,
                        "limit": overload.limit,
                    })
                })
                .collect();
        }
        Override::Unusable(why) => record["unusable_traffic"] = json!(why),
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::{DrainRequest, plan_drain};
    use crate::model::Entry;

    const PREFIX: &str = "/dw/routing/";

    fn entry(raw: &str) -> Entry {
        Entry {
            raw: raw.as_bytes().to_vec(),
            mod_revision: 2,
        }
    }

    /// DE split 50/50 between fra-a and fra-b; fra-b's capacity 1000/s when `capacity`.
    fn state(capacity: bool) -> State {
        let mut state = State {
            revision: 7,
            ..State::default()
        };
        state.regions.insert(
            "DE".into(),
            entry(
                r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#,
            ),
        );
        if capacity {
            state.capacities.insert(
                "fra-b".into(),
                entry(r#"{"answers_per_s":1000,"by":"","at":""}"#),
            );
        }
        state
    }

    fn drain(state: &State) -> Changes {
        plan_drain(
            state,
            &DrainRequest {
                origin: "fra-a".into(),
                regions: vec![],
                reason: "t".into(),
                source: "cli".into(),
                by: "t".into(),
                at: "t".into(),
                force: false,
                skip_emptying: false,
                fleet_limit: None,
            },
        )
        .unwrap()
    }

    fn usable(rate: f64) -> TrafficRead {
        TrafficRead::Usable {
            traffic: Traffic::parse(
                format!(r#"{{"geos":{{"DE":{{"sticky":{rate}}}}}}}"#).as_bytes(),
            )
            .unwrap(),
            source: "traffic file t.json".into(),
            left_out: Vec::new(),
        }
    }

    /// The verdict on draining fra-a (fra-b gets all of DE) with `traffic`.
    fn verdict(capacity: bool, traffic: &TrafficRead, allow_overload: bool) -> Verdict {
        let state = state(capacity);
        let changes = drain(&state);
        let planned = Planned {
            state: &state,
            changes: &changes,
            prefix: PREFIX,
            nodes: &[],
        };
        decide(
            Guard::Predict(Judging {
                traffic,
                allow_overload,
            }),
            planned,
        )
        .unwrap()
    }

    /// A short name of each verdict, for the table.
    fn kind(verdict: &Verdict) -> &'static str {
        match verdict {
            Verdict::NotJudged => "not judged",
            Verdict::NoPrediction(_) => "no prediction",
            Verdict::Passed(_) => "passed",
            Verdict::Refused(_) => "refused",
            Verdict::Overridden(Override::Overload(_)) => "overridden overload",
            Verdict::Overridden(Override::Unusable(_)) => "overridden unusable",
        }
    }

    #[test]
    fn the_guard_decides_by_the_table() {
        let not_given = TrafficRead::NotGiven("no traffic source".into());
        let unanswered = TrafficRead::Unanswered("Prometheus did not answer".into());
        let unusable = TrafficRead::Unusable("a rate of NaN".into());
        // fra-b gets 1000/s (guard 800/s) from 1000/s of DE; 700/s of DE fit.
        let overloading = usable(1000.0);
        let fitting = usable(700.0);
        // (capacities set, traffic, --allow-overload) → verdict
        let table: [(bool, &TrafficRead, bool, &str); 14] = [
            // No source: said where capacities are set, silent where none is.
            (true, &not_given, false, "no prediction"),
            (false, &not_given, false, "not judged"),
            (true, &unanswered, false, "no prediction"),
            (false, &unanswered, false, "not judged"),
            // A source that answered unusable traffic: never waved through.
            (true, &unusable, false, "refused"),
            (true, &unusable, true, "overridden unusable"),
            (false, &unusable, false, "not judged"),
            (false, &unusable, true, "not judged"),
            // Usable traffic: refused above the guard, unless --allow-overload.
            (true, &overloading, false, "refused"),
            (true, &overloading, true, "overridden overload"),
            (true, &fitting, false, "passed"),
            (true, &fitting, true, "passed"),
            // No capacity: predicted (the load is shown), nothing refused.
            (false, &overloading, false, "passed"),
            (false, &fitting, false, "passed"),
        ];
        for (capacities, traffic, allow, expected) in table {
            let got = verdict(capacities, traffic, allow);
            assert_eq!(
                kind(&got),
                expected,
                "capacities {capacities}, {traffic:?}, allow-overload {allow}"
            );
        }
    }

    #[test]
    fn refusals_name_the_origin_or_the_unusable_data() {
        let Verdict::Refused(message) = verdict(true, &usable(1000.0), false) else {
            panic!("an overloading drain is refused");
        };
        assert!(
            message.contains("fra-b: predicted 1000/s (now 500/s), capacity 1000/s, guard 800/s"),
            "{message}"
        );
        let unusable = TrafficRead::Unusable("a rate of NaN for DE".into());
        let Verdict::Refused(message) = verdict(true, &unusable, false) else {
            panic!("unusable traffic is refused");
        };
        assert!(
            message.contains("cannot be used") && message.contains("a rate of NaN for DE"),
            "{message}"
        );
        assert!(message.contains("--allow-overload"), "{message}");
        let Verdict::NoPrediction(why) =
            verdict(true, &TrafficRead::NotGiven("none".into()), false)
        else {
            panic!("no source is said");
        };
        assert_eq!(why, "none");
    }

    #[test]
    fn an_exempt_write_or_one_that_moves_no_routing_is_not_judged() {
        let state = state(true);
        let changes = drain(&state);
        let planned = Planned {
            state: &state,
            changes: &changes,
            prefix: PREFIX,
            nodes: &[],
        };
        for reason in [
            ExemptReason::HealthDrain,
            ExemptReason::Rebalance,
            ExemptReason::StageAbort,
            ExemptReason::MovesNoLoad(NoLoad::Registration),
            ExemptReason::MovesNoLoad(NoLoad::Capacities),
            ExemptReason::MovesNoLoad(NoLoad::HomeGeos),
        ] {
            let verdict = decide(Guard::Exempt(reason), planned).unwrap();
            assert_eq!(kind(&verdict), "not judged", "{reason}");
        }
        // A write of no routing and no stage (a capacity record) with overloading traffic.
        let mut capacity_only = Changes::default();
        capacity_only.capacities.insert("fra-b".into(), None);
        let traffic = usable(1000.0);
        let verdict = decide(
            Guard::Predict(Judging {
                traffic: &traffic,
                allow_overload: false,
            }),
            Planned {
                changes: &capacity_only,
                ..planned
            },
        )
        .unwrap();
        assert_eq!(kind(&verdict), "not judged");
    }

    #[test]
    fn unreadable_capacities_are_said_not_refused() {
        let mut state = state(true);
        state.capacities_unreadable = Some("permission denied".into());
        let changes = drain(&state);
        let traffic = usable(1000.0);
        let verdict = decide(
            Guard::Predict(Judging {
                traffic: &traffic,
                allow_overload: false,
            }),
            Planned {
                state: &state,
                changes: &changes,
                prefix: PREFIX,
                nodes: &[],
            },
        )
        .unwrap();
        assert!(matches!(verdict, Verdict::NoPrediction(why) if why == "permission denied"));
    }

    #[test]
    fn an_override_is_audited_with_what_it_overrode() {
        let who = Overrider {
            change: "drain fra-a",
            by: "alice",
            at: "2026-12-06T00:00:00Z",
            read_revision: 7,
        };
        let Verdict::Overridden(overridden) = verdict(true, &usable(1000.0), true) else {
            panic!("overridden");
        };
        let record = override_record(&overridden, who);
        assert_eq!(record["action"], "allow-overload");
        assert_eq!(record["change"], "drain fra-a");
        assert_eq!(record["overloads"][0]["origin"], "fra-b");
        assert_eq!(record["overloads"][0]["limit"], 800.0);
        let record = override_record(&Override::Unusable("NaN".into()), who);
        assert_eq!(record["unusable_traffic"], "NaN");
        assert_eq!(record["read_revision"], 7);
    }

    #[test]
    fn a_guard_states_itself() {
        let guard: Guard<u8> = Guard::Exempt(ExemptReason::Rebalance);
        assert_eq!(stated(&guard), Guard::Exempt(ExemptReason::Rebalance));
        assert_eq!(stated(&Guard::Predict(3u8)), Guard::Predict(3));
    }

    #[test]
    fn an_automatic_drain_records_its_overloads_or_why_none_were_predicted() {
        let state = state(true);
        let changes = drain(&state);
        let traffic = Traffic::parse(br#"{"geos":{"DE":{"sticky":1000}}}"#).unwrap();
        let read = TrafficRead::Usable {
            traffic,
            source: "f".into(),
            left_out: Vec::new(),
        };
        let recorded = drain_prediction(&state, &changes, PREFIX, &read);
        assert_eq!(recorded["made"], true);
        assert_eq!(recorded["overloads"][0]["origin"], "fra-b");
        assert_eq!(recorded["overloads"][0]["capacity"], 1000.0);
        let none = drain_prediction(
            &state,
            &changes,
            PREFIX,
            &TrafficRead::NotGiven("no source".into()),
        );
        assert_eq!(none, json!({"made": false, "why": "no source"}));
    }

    /// Per-node traffic (Prometheus) with one node left out as implausible: a refusal
    /// names the nodes the load is predicted from and the one left out; an automatic
    /// drain records it.
    #[test]
    fn a_refusal_and_a_drain_record_name_the_nodes_left_out() {
        let rows = [("n1", 600.0), ("n2", 600.0)].map(|(node, rate)| dw_capacity::AnswerRow {
            geo: "DE".into(),
            kind: dw_capacity::AnswerKind::Sticky,
            node: Some(node.into()),
            fail_open: false,
            rate,
        });
        let read = TrafficRead::Usable {
            traffic: Traffic::from_rows(rows, 0.0).unwrap(),
            source: "Prometheus p over 5m".into(),
            left_out: vec![LeftOut {
                node: "evil".into(),
                why: dw_capacity::Implausible::AboveCeiling {
                    rate: 1e9,
                    ceiling: 50_000.0,
                },
            }],
        };
        assert_eq!(read.left_out()[0].node, "evil");
        assert!(TrafficRead::NotGiven("none".into()).left_out().is_empty());
        let Verdict::Refused(message) = verdict(true, &read, false) else {
            panic!("refused");
        };
        assert!(
            message.ends_with(
                "the load is predicted from the answers of 2 node(s): n1 600/s, n2 600/s; \
                 left out as implausible: evil"
            ),
            "{message}"
        );
        let state = state(true);
        let changes = drain(&state);
        let recorded = drain_prediction(&state, &changes, PREFIX, &read);
        assert_eq!(recorded["left_out"][0]["node"], "evil", "{recorded}");
        assert!(
            recorded["left_out"][0]["why"]
                .as_str()
                .unwrap()
                .contains("above the per-node ceiling"),
            "{recorded}"
        );
    }
}
