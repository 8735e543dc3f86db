//! One evaluation of the control law: [`assess`] (the streaks and timers, from measured
//! loads alone), then [`plan`] (the one action, from the table and the window's answer
//! rates); [`decide`] is both. See the parent module for the law itself.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use dw_capacity::{Load, RegionEdit, Traffic, predict, predict_edited};
use dw_routing::Table;

use super::Settings;
use super::give_back::step_back;
use super::harm::{Harm, harm_order, load_by_region};
use super::relief::{ReliefAsk, plan_relief, rising_over};
use super::trend::{Readings, lead};
use crate::Error;

/// The window the per-minute cap on moved load looks back over, seconds.
pub const CAP_WINDOW: u64 = 60;

/// What a drain record on an origin means to the autopilot.
#[derive(Debug, Clone, PartialEq)]
pub enum RecordOf {
    /// A record made (wholly or in part) by another source (`cli`, `health`,
    /// `rebalance`): the autopilot holds on the origin until it is gone.
    Other(String),
    /// The autopilot's own part, alone: the values its give back goes toward (the
    /// regions it changed, as they were before its first shed), by geo.
    Own(Vec<RegionEdit>),
    /// The autopilot's part beside another source's (named): it sheds no more of the
    /// origin (a person's intent or a dead origin wins) and never sends it load, but gives
    /// its own part back toward `own` (the configured values with the other parts applied).
    Shared {
        /// The values its give back goes toward, by geo.
        own: Vec<RegionEdit>,
        /// The other source.
        other: String,
    },
}

impl RecordOf {
    /// The other source whose part makes the autopilot hold on the origin.
    pub fn other(&self) -> Option<&str> {
        match self {
            RecordOf::Other(source) | RecordOf::Shared { other: source, .. } => Some(source),
            RecordOf::Own(_) => None,
        }
    }

    /// The autopilot's own part, as the values its give back goes toward.
    pub fn own(&self) -> Option<&[RegionEdit]> {
        match self {
            RecordOf::Own(own) | RecordOf::Shared { own, .. } => Some(own),
            RecordOf::Other(_) => None,
        }
    }
}

/// Which way an action moved an origin's load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Load taken off (a relief).
    Down,
    /// Load given back.
    Up,
}

/// What the autopilot remembers of one origin between evaluations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OriginMemory {
    /// Evaluations in a row with the measured load above target.
    pub over: u32,
    /// Since when (seconds) the measured load has been below the low watermark.
    pub low_since: Option<u64>,
    /// When the last action on it was decided.
    pub last_action: Option<u64>,
    /// Which way it went.
    pub last_direction: Option<Direction>,
    /// How many times an action went the other way from the one before.
    pub direction_changes: u32,
    /// The last time a due action found nothing that fits, and why: tried again only
    /// `min_interval` later (a plan costs the routing core's evaluation of every
    /// candidate).
    pub last_hold: Option<(u64, HoldReason)>,
}

/// What the autopilot remembers between evaluations (lost on a restart or a takeover,
/// which only makes it wait longer).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Memory {
    /// By origin.
    pub origins: BTreeMap<String, OriginMemory>,
    /// The actions of the last [`CAP_WINDOW`] seconds: when, and answers per second moved.
    pub moved: VecDeque<(u64, f64)>,
    /// The last few readings' answer rates, for each load's trend
    /// ([`super::trend`]); [`decide`] keeps them, a caller of [`plan`] alone calls
    /// [`Readings::observe`] itself.
    pub readings: Readings,
}

impl Memory {
    fn moved_within(&mut self, now: u64) -> f64 {
        while let Some(&(at, _)) = self.moved.front() {
            if at + CAP_WINDOW <= now {
                self.moved.pop_front();
            } else {
                break;
            }
        }
        self.moved.iter().map(|(_, rate)| rate).sum()
    }

    fn record(&mut self, now: u64, origin: &str, moved: f64, direction: Direction) {
        self.moved.push_back((now, moved));
        let entry = self.origins.entry(origin.to_owned()).or_default();
        if entry.last_direction.is_some_and(|last| last != direction) {
            entry.direction_changes += 1;
        }
        entry.last_direction = Some(direction);
        entry.last_action = Some(now);
        entry.over = 0;
        entry.low_since = None;
        entry.last_hold = None;
    }

    fn held(&mut self, now: u64, origin: &str, reason: &HoldReason) {
        self.origins.entry(origin.to_owned()).or_default().last_hold = Some((now, reason.clone()));
    }
}

/// What the fleet holds beside the rates: capacities, records, stages, homes.
#[derive(Debug, Clone, Copy)]
pub struct World<'a> {
    /// Now, seconds (any monotonic origin).
    pub now: u64,
    /// Capacities, answers per second, by origin.
    pub capacities: &'a BTreeMap<String, f64>,
    /// The guard's headroom: target = headroom × capacity.
    pub headroom: f64,
    /// The drain records, by origin.
    pub records: &'a BTreeMap<String, RecordOf>,
    /// The geos an open stage or rollout holds.
    pub staged: &'a BTreeSet<String>,
    /// Each origin's home geos.
    pub homes: &'a BTreeMap<String, BTreeSet<String>>,
}

/// Why the autopilot does not act on an origin (a metric's label: [`HoldReason::label`]).
#[derive(Debug, Clone, PartialEq)]
pub enum HoldReason {
    /// The rate source is missing, stale or implausible: fail static.
    SourceUnusable(String),
    /// Another source holds a record on the origin.
    OtherSource(String),
    /// It acted on the origin less than `min_interval` ago.
    MinInterval,
    /// The per-minute cap on moved load is spent.
    RateCap,
    /// No relief fits, not even at the ceiling, or every region is staged.
    NoRoom,
    /// A give back would put the origin over target.
    GiveBackWouldOverload,
    /// The origin's load is rising: no give back now.
    Rising,
}

impl HoldReason {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            HoldReason::SourceUnusable(_) => "source_unusable",
            HoldReason::OtherSource(_) => "other_source",
            HoldReason::MinInterval => "min_interval",
            HoldReason::RateCap => "rate_cap",
            HoldReason::NoRoom => "no_room",
            HoldReason::GiveBackWouldOverload => "give_back_would_overload",
            HoldReason::Rising => "rising",
        }
    }
}

impl fmt::Display for HoldReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HoldReason::SourceUnusable(why) => write!(f, "the rate source is unusable: {why}"),
            HoldReason::OtherSource(source) => {
                write!(f, "a record of source {source} is on it")
            }
            HoldReason::MinInterval => f.write_str("it acted on it less than --min-interval ago"),
            HoldReason::RateCap => f.write_str("the per-minute cap on moved load is spent"),
            HoldReason::NoRoom => f.write_str("no origin has room for its load"),
            HoldReason::GiveBackWouldOverload => {
                f.write_str("giving back would put it over target")
            }
            HoldReason::Rising => f.write_str("its load is rising: nothing given back"),
        }
    }
}

/// An origin held, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    /// The origin (empty: every origin, the source being unusable).
    pub origin: String,
    /// Why.
    pub reason: HoldReason,
}

/// What [`assess`] found is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// Over target for `over_for` evaluations.
    Relieve,
    /// Below the watermark for `restore_after`, with the autopilot's own record.
    GiveBack,
}

/// One origin's figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Figures {
    /// Measured load, answers per second.
    pub measured: f64,
    /// Its capacity.
    pub capacity: f64,
    /// headroom × capacity.
    pub target: f64,
}

/// The assessment of an evaluation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// Origins due an action, with their figures.
    pub due: Vec<(String, Due, Figures)>,
    /// Origins held, and why.
    pub holds: Vec<Hold>,
    /// Origins measured above target.
    pub over_target: Vec<String>,
    /// Origins with load but no capacity (not judged).
    pub without_capacity: Vec<String>,
}

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// A shed, within the receivers' targets.
    Relieve,
    /// A shed when every origin is over target: receivers within the ceiling.
    RelieveAtCeiling,
    /// Part of the autopilot's shed given back.
    GiveBackStep,
    /// All of it given back: the record goes.
    GiveBackAll,
}

/// One action: the regions' new values and the figures its reason carries.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// The origin.
    pub origin: String,
    /// What it does.
    pub kind: ActionKind,
    /// The regions' new values, by geo.
    pub edits: Vec<RegionEdit>,
    /// The origin's figures when decided.
    pub figures: Figures,
    /// The origin's predicted load after.
    pub predicted: f64,
    /// Answers per second moved (off the origin for a relief, onto it for a give back).
    pub moved: f64,
    /// The receivers' limit used, a fraction of capacity (target's headroom or ceiling).
    pub limit: f64,
    /// The tiers a relief took load from.
    pub harms: Vec<Harm>,
    /// Origins a spill added (region, origin).
    pub spilled: Vec<(String, String)>,
    /// Regions skipped because an open stage or rollout holds them.
    pub skipped_staged: Vec<String>,
    /// Each origin whose load changes: before and after.
    pub changed: Vec<(String, f64, f64)>,
    /// What the load's trend added to a relief's aim (answers per second): its slope ×
    /// the trend horizon, bounded ([`super::trend::lead`]); 0 for a flat or falling load.
    pub ahead: f64,
}

impl Action {
    /// The reason written with the action (its drain record and `dwctl history`): the
    /// measured and predicted figures.
    pub fn reason(&self) -> String {
        let f = &self.figures;
        let what = match self.kind {
            ActionKind::Relieve => "relieve",
            ActionKind::RelieveAtCeiling => "relieve (every origin over target, ceiling)",
            ActionKind::GiveBackStep => "give back part",
            ActionKind::GiveBackAll => "give back all",
        };
        let mut text = format!(
            "autopilot {what}: {} measured {:.1}/s, target {:.1}/s, capacity {:.1}/s; \
             predicted {:.1}/s after moving {:.1}/s",
            self.origin, f.measured, f.target, f.capacity, self.predicted, self.moved
        );
        if self.ahead > 0.0 {
            text.push_str(&format!(
                ", aimed {:.1}/s ahead of a rising load",
                self.ahead
            ));
        }
        if f.measured > f.capacity {
            text.push_str(", above capacity: acted at once");
        }
        if !self.harms.is_empty() {
            let harms: Vec<&str> = self.harms.iter().map(|harm| harm.word()).collect();
            text.push_str(&format!(" from {} regions", harms.join("+")));
        }
        let receivers: Vec<String> = self
            .changed
            .iter()
            .filter(|(name, before, after)| *name != self.origin && after > before)
            .take(8)
            .map(|(name, before, after)| format!("{name} {before:.1}->{after:.1}"))
            .collect();
        if !receivers.is_empty() {
            text.push_str(&format!(
                "; receivers within {:.0} % of capacity: {}",
                self.limit * 100.0,
                receivers.join(", ")
            ));
        }
        if !self.skipped_staged.is_empty() {
            text.push_str(&format!(
                "; staged regions skipped: {}",
                self.skipped_staged.join(", ")
            ));
        }
        text
    }
}

/// An evaluation's decision.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    /// At most one action.
    pub action: Option<Action>,
    /// Origins held, and why.
    pub holds: Vec<Hold>,
    /// Origins measured above target.
    pub over_target: Vec<String>,
    /// A relief found no receiver within target: every origin that could take load is
    /// over target (`DwFleetOverTarget`).
    pub fleet_over_target: bool,
    /// Regions skipped as staged, by origin, for the origins it planned for.
    pub skipped_staged: BTreeMap<String, Vec<String>>,
}

/// Updates the streaks and timers from each origin's measured load and says which
/// origins are due what. `measured` is `None` when the source is unusable: fail static,
/// nothing is due and no streak moves.
pub fn assess(
    settings: &Settings,
    memory: &mut Memory,
    world: &World<'_>,
    measured: Result<&BTreeMap<String, f64>, &str>,
) -> Assessment {
    let mut assessment = Assessment::default();
    let measured = match measured {
        Ok(measured) => measured,
        Err(why) => {
            assessment.holds.push(Hold {
                origin: String::new(),
                reason: HoldReason::SourceUnusable(why.to_owned()),
            });
            return assessment;
        }
    };
    let now = world.now;
    // An origin with a part of the autopilot's that another part drains everywhere
    // answers nothing: it is measured at 0, so that its own part is still given back.
    let mut loads: BTreeMap<&String, f64> =
        measured.iter().map(|(name, load)| (name, *load)).collect();
    for (origin, record) in world.records {
        if record.own().is_some() {
            loads.entry(origin).or_insert(0.0);
        }
    }
    for (origin, load) in loads {
        let Some(&capacity) = world.capacities.get(origin) else {
            if load > 0.0 {
                assessment.without_capacity.push(origin.clone());
            }
            continue;
        };
        let target = world.headroom * capacity;
        let figures = Figures {
            measured: load,
            capacity,
            target,
        };
        let entry = memory.origins.entry(origin.clone()).or_default();
        let over = load > target;
        entry.over = if over {
            entry.over.saturating_add(1)
        } else {
            0
        };
        if load < settings.low_watermark * target {
            entry.low_since.get_or_insert(now);
        } else {
            entry.low_since = None;
        }
        // Above capacity is an emergency: acted on at the first evaluation over, without
        // waiting for --min-interval (the per-minute cap and one action an evaluation
        // still hold; a plan that found nothing is retried after --min-interval).
        let emergency = load > capacity;
        let cooling = !emergency
            && entry
                .last_action
                .is_some_and(|at| now < at + settings.min_interval);
        let record = world.records.get(origin);
        if over {
            assessment.over_target.push(origin.clone());
            if let Some(source) = record.and_then(RecordOf::other) {
                assessment.holds.push(Hold {
                    origin: origin.clone(),
                    reason: HoldReason::OtherSource(source.to_owned()),
                });
            } else if entry.over >= settings.over_for || emergency {
                if cooling {
                    assessment.holds.push(Hold {
                        origin: origin.clone(),
                        reason: HoldReason::MinInterval,
                    });
                } else if let Some(reason) = recently_held(entry, now, settings) {
                    assessment.holds.push(Hold {
                        origin: origin.clone(),
                        reason,
                    });
                } else {
                    assessment.due.push((origin.clone(), Due::Relieve, figures));
                }
            }
        } else if record.and_then(RecordOf::own).is_some()
            && entry
                .low_since
                .is_some_and(|since| now >= since + settings.restore_after)
            && !cooling
        {
            match recently_held(entry, now, settings) {
                Some(reason) => assessment.holds.push(Hold {
                    origin: origin.clone(),
                    reason,
                }),
                None => assessment
                    .due
                    .push((origin.clone(), Due::GiveBack, figures)),
            }
        }
    }
    // The per-minute cap, against the answers the origins measured: when it is spent
    // nothing is due (and no plan is made).
    let fleet: f64 = measured.values().sum();
    let budget = settings.max_moved_per_minute * fleet - memory.moved_within(now);
    if budget <= 0.0 {
        for (origin, _, _) in assessment.due.drain(..) {
            assessment.holds.push(Hold {
                origin,
                reason: HoldReason::RateCap,
            });
        }
    }
    // Reliefs first, the most utilised first; then give backs, the least utilised first.
    assessment.due.sort_by(|a, b| {
        let rank = |due: &(String, Due, Figures)| match due.1 {
            Due::Relieve => (0, -due.2.measured / due.2.capacity.max(f64::MIN_POSITIVE)),
            Due::GiveBack => (1, due.2.measured / due.2.capacity.max(f64::MIN_POSITIVE)),
        };
        let (ra, rb) = (rank(a), rank(b));
        ra.0.cmp(&rb.0)
            .then(ra.1.total_cmp(&rb.1))
            .then(a.0.cmp(&b.0))
    });
    assessment
}

/// The reason an origin's last due action found nothing that fits, while that is less
/// than `min_interval` ago.
fn recently_held(entry: &OriginMemory, now: u64, settings: &Settings) -> Option<HoldReason> {
    entry
        .last_hold
        .as_ref()
        .filter(|(at, _)| now < at + settings.min_interval)
        .map(|(_, reason)| reason.clone())
}

/// What [`plan`] reads: the table the fleet runs and the window's answer rates, with the
/// load predicted from them ([`dw_capacity::predict`]: the measured load per origin).
#[derive(Debug, Clone, Copy)]
pub struct Reading<'a> {
    /// The table the fleet runs.
    pub table: &'a Table,
    /// The short window's answer rates.
    pub traffic: &'a Traffic,
    /// `predict(table, traffic)`.
    pub loads: &'a Load,
}

/// Plans the one action of an evaluation from its assessment: the first due origin whose
/// plan fits (see the parent module). The action is remembered (for `min_interval`, the
/// per-minute cap and the direction) whether or not the caller commits it.
pub fn plan(
    settings: &Settings,
    memory: &mut Memory,
    world: &World<'_>,
    assessment: Assessment,
    reading: &Reading<'_>,
) -> Result<Decision, Error> {
    let mut decision = Decision {
        holds: assessment.holds,
        over_target: assessment.over_target,
        ..Decision::default()
    };
    if assessment.due.is_empty() {
        return Ok(decision);
    }
    let now = world.now;
    let budget = settings.max_moved_per_minute * reading.loads.total - memory.moved_within(now);
    // An origin another source holds a record on (drained by health, rebalance or a
    // person) never receives: it has no capacity as far as a relief is concerned.
    let receivers: BTreeMap<String, f64> = world
        .capacities
        .iter()
        .filter(|(name, _)| world.records.get(*name).and_then(RecordOf::other).is_none())
        .map(|(name, capacity)| (name.clone(), *capacity))
        .collect();
    let no_home = BTreeSet::new();
    // Each origin's trend under the table now (a few predictions: only when a plan is due).
    let slopes = if settings.trend_horizon > 0 {
        memory.readings.slopes(reading.table, now, reading.loads)
    } else {
        BTreeMap::new()
    };
    for (origin, due, figures) in assessment.due {
        let slope = slopes.get(&origin).copied();
        let ahead = match due {
            Due::Relieve => lead(slope, settings.trend_horizon, figures.target),
            Due::GiveBack => 0.0,
        };
        if decision.action.is_some() {
            break;
        }
        // A budget under a tenth of what is wanted is spent: a sliver moves nothing useful.
        let wanted = match due {
            Due::Relieve => {
                reading.loads.of(&origin) - figures.target * (1.0 - settings.band) + ahead
            }
            Due::GiveBack => 0.0,
        };
        if budget <= 0.0 || budget < 0.1 * wanted {
            decision.holds.push(Hold {
                origin,
                reason: HoldReason::RateCap,
            });
            continue;
        }
        match due {
            Due::Relieve => {
                let home = world.homes.get(&origin).unwrap_or(&no_home);
                let order = harm_order(reading.table, &origin, home, world.staged);
                if !order.skipped_staged.is_empty() {
                    decision
                        .skipped_staged
                        .insert(origin.clone(), order.skipped_staged.clone());
                }
                let by_region = load_by_region(reading.table, reading.traffic, &origin);
                let goal = figures.target * (1.0 - settings.band);
                let want = (reading.loads.of(&origin) - goal + ahead).min(budget);
                let mut ask = ReliefAsk {
                    origin: &origin,
                    want,
                    tiers: &order.tiers,
                    by_region: &by_region,
                    capacities: &receivers,
                    limit: world.headroom,
                };
                let mut kind = ActionKind::Relieve;
                let mut relief = plan_relief(reading.table, reading.traffic, reading.loads, &ask)?;
                // No relief within the receivers' targets, or only part of one: every
                // origin with room is over target. Receivers up to the ceiling, never
                // above the origin's own utilisation now (the highest utilisation only
                // falls), when that moves more.
                let partial = relief
                    .as_ref()
                    .is_none_or(|relief| relief.moved < 0.9 * want);
                if partial {
                    decision.fleet_over_target = true;
                    let utilisation = reading.loads.of(&origin) / figures.capacity;
                    let at_target = ask.limit;
                    ask.limit = settings.ceiling.min(utilisation);
                    let higher = if ask.limit > at_target {
                        plan_relief(reading.table, reading.traffic, reading.loads, &ask)?
                    } else {
                        None
                    };
                    match (&relief, higher) {
                        (Some(found), Some(higher)) if higher.moved <= found.moved => {
                            ask.limit = at_target;
                        }
                        (_, Some(higher)) => {
                            kind = ActionKind::RelieveAtCeiling;
                            relief = Some(higher);
                        }
                        (Some(_), None) => ask.limit = at_target,
                        (None, None) => {}
                    }
                }
                let Some(relief) = relief else {
                    memory.held(now, &origin, &HoldReason::NoRoom);
                    decision.holds.push(Hold {
                        origin,
                        reason: HoldReason::NoRoom,
                    });
                    continue;
                };
                let limit = ask.limit;
                memory.record(now, &origin, relief.moved, Direction::Down);
                decision.action = Some(Action {
                    predicted: relief.after.of(&origin),
                    changed: changed(reading.loads, &relief.after),
                    origin,
                    kind,
                    edits: relief.edits,
                    figures,
                    moved: relief.moved,
                    limit,
                    harms: relief.harms,
                    spilled: relief.spilled,
                    skipped_staged: order.skipped_staged,
                    ahead,
                });
            }
            Due::GiveBack => {
                let Some(before) = world.records.get(&origin).and_then(RecordOf::own) else {
                    continue;
                };
                // A rising load is not given more: what it would rise by over the trend
                // horizon eats the band (the load it would come back to relieve).
                if rising(slope, settings, &figures) {
                    memory.held(now, &origin, &HoldReason::Rising);
                    decision.holds.push(Hold {
                        origin,
                        reason: HoldReason::Rising,
                    });
                    continue;
                }
                match give_back(settings, world, reading, &origin, &figures, before, budget)? {
                    Ok((kind, edits, after)) => {
                        let moved = after.of(&origin) - reading.loads.of(&origin);
                        memory.record(now, &origin, moved.abs(), Direction::Up);
                        decision.action = Some(Action {
                            predicted: after.of(&origin),
                            changed: changed(reading.loads, &after),
                            origin,
                            kind,
                            edits,
                            figures,
                            moved,
                            limit: world.headroom,
                            harms: Vec::new(),
                            spilled: Vec::new(),
                            skipped_staged: Vec::new(),
                            ahead: 0.0,
                        });
                    }
                    Err(reason) => {
                        memory.held(now, &origin, &reason);
                        decision.holds.push(Hold { origin, reason });
                    }
                }
            }
        }
    }
    Ok(decision)
}

/// Whether a load's trend is rising for a give back: it would rise by more than the band
/// (`band × target`) within the trend horizon.
fn rising(slope: Option<f64>, settings: &Settings, figures: &Figures) -> bool {
    slope.is_some_and(|slope| {
        slope > 0.0 && slope * settings.trend_horizon as f64 > settings.band * figures.target
    })
}

type GiveBack = (ActionKind, Vec<RegionEdit>, Load);

fn give_back(
    settings: &Settings,
    world: &World<'_>,
    reading: &Reading<'_>,
    origin: &str,
    figures: &Figures,
    before: &[RegionEdit],
    budget: f64,
) -> Result<Result<GiveBack, HoldReason>, Error> {
    let goal = figures.target * (1.0 - settings.band);
    let steps = [
        (1.0, ActionKind::GiveBackAll, goal),
        (
            settings.give_back_step,
            ActionKind::GiveBackStep,
            figures.target,
        ),
    ];
    for (fraction, kind, limit) in steps {
        let mut edits = Vec::new();
        for value in before {
            if world.staged.contains(&value.geo) {
                continue;
            }
            // `Table::region` finds own keys only; a bucket's region is found by its geo.
            let Some((_, region)) = reading.table.regions().find(|(geo, _)| *geo == value.geo)
            else {
                continue;
            };
            let now = RegionEdit::of_region(&value.geo, region);
            if let Some(edit) = step_back(&now, value, fraction)
                && edit != now
            {
                edits.push(edit);
            }
        }
        let after = predict_edited(reading.table, reading.traffic, &edits).map_err(|error| {
            Error::Failed(format!("the give back's prediction failed: {error}"))
        })?;
        let moved = after.of(origin) - reading.loads.of(origin);
        let others_fit = rising_over(
            &after,
            reading.loads,
            world.capacities,
            world.headroom,
            origin,
        )
        .is_empty();
        if after.of(origin) <= limit && others_fit && moved <= budget {
            return Ok(Ok((kind, edits, after)));
        }
    }
    Ok(Err(HoldReason::GiveBackWouldOverload))
}

fn changed(before: &Load, after: &Load) -> Vec<(String, f64, f64)> {
    after
        .origins
        .iter()
        .filter_map(|(name, &load)| {
            let was = before.of(name);
            ((load - was).abs() > 1e-9).then(|| (name.clone(), was, load))
        })
        .collect()
}

/// [`assess`] then [`plan`]: one evaluation. `reading` is `Err(why)` when the source is
/// missing, stale or implausible: nothing moves.
pub fn decide(
    settings: &Settings,
    memory: &mut Memory,
    world: &World<'_>,
    reading: Result<Reading<'_>, String>,
) -> Result<Decision, Error> {
    match reading {
        Err(why) => {
            let assessment = assess(settings, memory, world, Err(&why));
            Ok(Decision {
                holds: assessment.holds,
                ..Decision::default()
            })
        }
        Ok(reading) => {
            let assessment = assess(settings, memory, world, Ok(&reading.loads.origins));
            let decision = plan(settings, memory, world, assessment, &reading);
            memory.readings.observe(world.now, reading.traffic);
            decision
        }
    }
}

/// The loads of `table` for `traffic`: what [`Reading::loads`] holds.
pub fn measure(table: &Table, traffic: &Traffic) -> Load {
    predict(table, traffic)
}
