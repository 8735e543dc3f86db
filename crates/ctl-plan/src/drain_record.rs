//! Drain records: what `drain` took away, so that `restore` can give it back.
//!
//! One record per drained origin, at `<control prefix>drains/<origin>`, written in the same
//! transaction as the regions it changed. For each region it keeps what a restore needs:
//! the region's shard, origins and weights before the drain, and its origins and weights
//! after it (`null` when the drain deleted the region key; then `before` keeps the whole
//! value, unknown fields included, so that restore can recreate it), with who drained, why,
//! when, and which tool (`source`: `cli`, `rebalance`, `health`, `autopilot`). Every source
//! restores only its own part (below) unless a person asks for all of them.
//!
//! The record is versioned by its `schema` field ([`DRAIN_RECORD_SCHEMA`]):
//!
//! - schema 1: records written before the field existed (no `schema`); `before` and
//!   `after` hold whole region values, unknown fields included. They are read and restored
//!   as they are.
//! - schema 2: `before` and `after` keep only the fields a restore needs (above), so that
//!   a large unknown field is not copied twice into the drain's transaction; `stages`
//!   (optional, absent when empty) is reserved for staged rollouts (issue 22): stage id →
//!   geo → the staged value before and after the drain, in the same shape as `regions`;
//!   `predicted` (optional): an automatic drain's predicted overloads (see the field).
//! - schema 3: a record with a shed in it (`shed`, [`crate::shed_record`]): the
//!   regions where the origin is shed keep an `after` that still lists it. Written only
//!   while the record has shed regions, so that older dwctls, which would reconcile them
//!   away, read it as malformed instead; drains alone stay schema 2.
//!
//! - schema 4: a record with parts of more than one source (`parts`,
//!   [`crate::drain_parts::Part`]): each source that drained or shed the origin keeps its
//!   part apart (what it did in each region, its reason, by, at and shed steps), so that a
//!   restore by one source undoes only its own part. The top-level `source`, `reason`,
//!   `by`, `at` are the latest part's and `shed` merges the parts' sheds (for readers that
//!   show a record). A record with one source's part is written as schema 2 or 3, as
//!   before, so that older dwctls still read it; read back, its one part is derived from
//!   its regions' `before` and `after`. Older schemas are read as one part of their
//!   `source`.
//!
//! **How the parts compose into the weights** (the rule is [`crate::drain_parts::compose`],
//! one pure function): a region's value is its configured value (the record's `before`,
//! from before the first part) with each part's effect applied in the order the parts were
//! taken (a source that acts again moves its part to the end). A drain takes the origin
//! out and wins over any shed of it; sheds multiply the origin's share (their percents
//! combine as [`crate::shed_record::combined_percent`]); what an effect frees goes to its
//! spill origins by their recorded fractions and to the other origins in proportion to
//! their weights. Restoring source S ([`crate::drain::plan_restore`]) writes, in each
//! region S's part changed, the configured value with the *other* parts re-applied in
//! order: exactly the configured value when no other part is there. A region changed
//! since the record's last write is handled as a restore always did (the origin re-added
//! at its share in that value, the others renormalised around it).
//!
//! A record with a newer schema, or one that does not parse, is *malformed* for this
//! dwctl: it blocks only the commands about its origin (`drain`, `restore` of it), is named
//! by `status`, `origin list` and `history`, and `dwctl drain --repair ORIGIN` removes it
//! with an audit record.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::drain_parts::{Effect, MAX_PARTS, Part, compose, effect_between};
use crate::shed_record::{
    MAX_SHED_STEPS, SHED_RECORD_SCHEMA, ShedInfo, ShedStep, combined_percent,
};
use crate::value::RegionValue;

/// Who drained: an operator with the CLI.
pub const SOURCE_CLI: &str = "cli";
/// Who drained: `dwctl rebalance`, when an origin's lease expired.
pub const SOURCE_REBALANCE: &str = "rebalance";
/// Who drained: `dwctl health`, after failed probes.
pub const SOURCE_HEALTH: &str = "health";
/// Who shed: `dwctl autopilot`, from the measured load (issue 42, docs/autopilot.md).
pub const SOURCE_AUTOPILOT: &str = "autopilot";

/// The schema of a drain's record (a record with a shed in it is
/// [`crate::shed_record::SHED_RECORD_SCHEMA`], one with several sources' parts
/// [`PARTS_RECORD_SCHEMA`]).
pub const DRAIN_RECORD_SCHEMA: u32 = 2;

/// The schema of a record with parts of more than one source, the newest this dwctl reads.
pub const PARTS_RECORD_SCHEMA: u32 = 4;

fn schema_one() -> u32 {
    1
}

/// What a drain took, kept under the control prefix so that `restore` can give it back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DrainRecord {
    /// The record's schema: 1 when absent (records written before it existed).
    #[serde(default = "schema_one")]
    pub schema: u32,
    /// The drained origin.
    pub origin: String,
    /// Why it was drained.
    pub reason: String,
    /// Who drained: [`SOURCE_CLI`], [`SOURCE_REBALANCE`], [`SOURCE_HEALTH`] or
    /// [`SOURCE_AUTOPILOT`]; with several parts, the latest part's (each part has its own).
    pub source: String,
    /// The operator or automation instance that drained it.
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// geo → the region before and after the drain.
    pub regions: BTreeMap<String, DrainedRegion>,
    /// stage id → geo → the staged region before and after the drain, so that `restore`
    /// puts the origin back into the stages it was drained from.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub stages: BTreeMap<String, BTreeMap<String, DrainedRegion>>,
    /// An automatic drain's predicted load (optional, absent in records written before it
    /// existed and in manual drains, which the capacity guard checked instead):
    /// `{"made": true, "source", "headroom", "overloads": [{"origin", "predicted",
    /// "before", "capacity", "limit"}]}`, or `{"made": false, "why"}`. Readers that do not
    /// know the field ignore it, so the schema stays 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted: Option<serde_json::Value>,
    /// How much the origin's sheds took (schema 3; absent in a drain's record): the
    /// regions whose `after` still lists the origin are shed, the others drained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shed: Option<ShedInfo>,
    /// Each source's part, in the order taken (schema 4). In memory every record read has
    /// at least one: an older record's is derived from its regions; a record with one part
    /// is written without the field.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<Part>,
}

/// One region's value around the drain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainedRegion {
    /// The value before the drain.
    pub before: RegionValue,
    /// `None` when the drain deleted the region key (`--force` on its last origin).
    pub after: Option<RegionValue>,
}

impl DrainedRegion {
    /// What a schema-2 record keeps of a region around a drain: `after` without unknown
    /// fields, `before` without them too unless the drain deleted the key (then restore
    /// recreates the whole value from it).
    pub fn minimal(before: &RegionValue, after: Option<&RegionValue>) -> DrainedRegion {
        let routing = |value: &RegionValue| RegionValue {
            extra: Default::default(),
            ..value.clone()
        };
        DrainedRegion {
            before: match after {
                Some(_) => routing(before),
                None => before.clone(),
            },
            after: after.map(routing),
        }
    }
}

impl DrainRecord {
    /// A new record of `origin`, with no region and no part yet (the planner that makes
    /// it takes the first part with [`DrainRecord::take_part`]).
    pub fn new(origin: &str, source: &str, reason: &str, by: &str, at: &str) -> DrainRecord {
        DrainRecord {
            schema: DRAIN_RECORD_SCHEMA,
            origin: origin.to_owned(),
            reason: reason.to_owned(),
            source: source.to_owned(),
            by: by.to_owned(),
            at: at.to_owned(),
            regions: Default::default(),
            stages: Default::default(),
            predicted: None,
            shed: None,
            parts: Vec::new(),
        }
    }

    /// The record of `origin` as stored; a malformed one fails the command (only commands
    /// about `origin` read it). The record read has its parts (derived for schemas 1-3).
    pub fn parse(origin: &str, raw: &[u8]) -> Result<DrainRecord, Error> {
        let malformed = |why: String| {
            Error::Failed(format!(
                "the drain record of {origin} is malformed ({why}); inspect it with \
                 `dwctl history /<control-prefix>/drains/{origin}` and remove it with \
                 `dwctl drain --repair {origin}`"
            ))
        };
        let mut record: DrainRecord =
            serde_json::from_slice(raw).map_err(|error| malformed(error.to_string()))?;
        if record.schema == 0 || record.schema > PARTS_RECORD_SCHEMA {
            return Err(malformed(format!(
                "schema {} is not one this dwctl reads (1 to {PARTS_RECORD_SCHEMA}); a newer \
                 dwctl wrote it",
                record.schema
            )));
        }
        let valid_percent = |shed: &ShedInfo| {
            shed.percent.is_finite() && shed.percent > 0.0 && shed.percent <= 100.0
        };
        if let Some(shed) = &record.shed {
            if record.schema < SHED_RECORD_SCHEMA {
                return Err(malformed(format!(
                    "it has a `shed` but schema {}; a shed is schema {SHED_RECORD_SCHEMA}",
                    record.schema
                )));
            }
            if !valid_percent(shed) {
                return Err(malformed(format!(
                    "its shed percent {} is not above 0 and at most 100",
                    shed.percent
                )));
            }
        }
        if record.origin != origin {
            return Err(malformed(format!(
                "it names origin {:?}, not {origin:?}",
                record.origin
            )));
        }
        if record.schema < PARTS_RECORD_SCHEMA {
            if !record.parts.is_empty() {
                return Err(malformed(format!(
                    "it has `parts` but schema {}; parts are schema {PARTS_RECORD_SCHEMA}",
                    record.schema
                )));
            }
            record.parts = vec![record.derived_part()];
            return Ok(record);
        }
        if record.parts.is_empty() || record.parts.len() > MAX_PARTS {
            return Err(malformed(format!(
                "schema {PARTS_RECORD_SCHEMA} needs 1 to {MAX_PARTS} parts, it has {}",
                record.parts.len()
            )));
        }
        let mut sources = BTreeSet::new();
        for part in &record.parts {
            if !sources.insert(part.source.as_str()) {
                return Err(malformed(format!("two parts of source {:?}", part.source)));
            }
            if let Some((geo, _)) = part
                .regions
                .iter()
                .find(|(geo, effect)| !effect.is_valid() || !record.regions.contains_key(*geo))
            {
                return Err(malformed(format!(
                    "the part of {:?} in region {geo:?} is not one this dwctl reads (a \
                     region the record does not name, or a factor not in [0, 1))",
                    part.source
                )));
            }
            if part.shed.as_ref().is_some_and(|shed| !valid_percent(shed)) {
                return Err(malformed(format!(
                    "the shed percent of {:?}'s part is not above 0 and at most 100",
                    part.source
                )));
            }
        }
        Ok(record)
    }

    /// The one part of a record written without parts (schemas 1-3): its top-level who
    /// and why, and each region's effect from its `before` to its `after`.
    fn derived_part(&self) -> Part {
        Part {
            source: self.source.clone(),
            reason: self.reason.clone(),
            by: self.by.clone(),
            at: self.at.clone(),
            regions: self
                .regions
                .iter()
                .map(|(geo, region)| {
                    let effect =
                        effect_between(&region.before, region.after.as_ref(), &self.origin);
                    (geo.clone(), effect)
                })
                .collect(),
            shed: self.shed.clone(),
            predicted: self.predicted.clone(),
        }
    }

    /// Compact JSON: with `parts` only when more than one source has one (schema 4).
    pub fn encode(&self) -> String {
        if self.parts.len() > 1 {
            return serde_json::to_string(self).unwrap_or_default();
        }
        let single = DrainRecord {
            parts: Vec::new(),
            ..self.clone()
        };
        serde_json::to_string(&single).unwrap_or_default()
    }
}

impl DrainRecord {
    /// The part of `source`, if it has one.
    pub fn part(&self, source: &str) -> Option<&Part> {
        self.parts.iter().find(|part| part.source == source)
    }

    /// Whether `source` has a part in the record.
    pub fn has_part(&self, source: &str) -> bool {
        self.part(source).is_some()
    }

    /// The sources with a part, in the order taken.
    pub fn sources(&self) -> Vec<&str> {
        self.parts.iter().map(|part| part.source.as_str()).collect()
    }

    /// The first source with a part other than `source` (the autopilot's holds name it).
    pub fn other_source(&self, source: &str) -> Option<&str> {
        self.sources().into_iter().find(|name| *name != source)
    }

    /// The configured value of `geo` with every part's effect applied in order
    /// ([`compose`]); `None` when the key would be deleted or the record does not name
    /// `geo`.
    pub fn composed(&self, geo: &str) -> Option<RegionValue> {
        let region = self.regions.get(geo)?;
        let effects: Vec<&Effect> = self
            .parts
            .iter()
            .filter_map(|part| part.regions.get(geo))
            .collect();
        compose(&region.before, &self.origin, &effects)
    }

    /// The configured value of `geo` with the effects of every part but `without`'s
    /// applied in order ([`compose`]); `None` when the key would be deleted, or when the
    /// record does not name `geo`.
    pub fn composed_without(&self, geo: &str, without: &str) -> Option<RegionValue> {
        let region = self.regions.get(geo)?;
        let effects: Vec<&Effect> = self
            .parts
            .iter()
            .filter(|part| part.source != without)
            .filter_map(|part| part.regions.get(geo))
            .collect();
        compose(&region.before, &self.origin, &effects)
    }

    /// Records an action of `source` ((why, who, when); its shed step if it shed) that wrote
    /// the regions `geos` (their `after` already in the record): its part moves to the end
    /// (a new part is added there), and its effect in each of `geos` is taken against the
    /// other parts' composition ([`DrainRecord::refresh_effects`]).
    pub fn take_part(
        &mut self,
        source: &str,
        (reason, by, at): (&str, &str, &str),
        geos: &[String],
        step: Option<ShedStep>,
    ) {
        let mut part = match self.parts.iter().position(|part| part.source == source) {
            Some(index) => self.parts.remove(index),
            None => Part {
                source: source.to_owned(),
                reason: String::new(),
                by: String::new(),
                at: String::new(),
                regions: BTreeMap::new(),
                shed: None,
                predicted: None,
            },
        };
        part.reason = reason.to_owned();
        part.by = by.to_owned();
        part.at = at.to_owned();
        if let Some(step) = step {
            part.shed = Some(match part.shed.take() {
                Some(info) => info.then(step),
                None => ShedInfo {
                    percent: step.percent,
                    steps: vec![step],
                },
            });
        }
        self.parts.push(part);
        self.refresh_effects(source, geos);
    }

    /// Sets the effect of `source`'s part in each of `geos` from the region's recorded
    /// `after`, against the configured value with the other parts applied.
    pub fn refresh_effects(&mut self, source: &str, geos: &[String]) {
        for geo in geos {
            let Some(region) = self.regions.get(geo) else {
                continue;
            };
            let effect = match self.composed_without(geo, source) {
                Some(target) => effect_between(&target, region.after.as_ref(), &self.origin),
                None => Effect::drained(),
            };
            if let Some(part) = self.parts.iter_mut().find(|part| part.source == source) {
                part.regions.insert(geo.clone(), effect);
            }
        }
    }

    /// Sets the predicted load of `source`'s part (and the record's).
    pub fn set_predicted(&mut self, source: &str, predicted: serde_json::Value) {
        if let Some(part) = self.parts.iter_mut().find(|part| part.source == source) {
            part.predicted = Some(predicted.clone());
        }
        self.predicted = Some(predicted);
    }
}

impl DrainRecord {
    /// The geos where the origin is shed, not drained: its recorded `after` still lists
    /// it. Reconcile leaves these alone.
    pub fn shed_regions(&self) -> BTreeSet<String> {
        if self.shed.is_none() {
            return BTreeSet::new();
        }
        self.regions
            .iter()
            .filter(|(_, region)| {
                region
                    .after
                    .as_ref()
                    .is_some_and(|after| after.lists(&self.origin))
            })
            .map(|(geo, _)| geo.clone())
            .collect()
    }

    /// Wholly the autopilot's: its only part is the autopilot's, and every region in it is
    /// shed, none drained.
    pub fn autopilot_only(&self) -> bool {
        self.sources() == [SOURCE_AUTOPILOT]
            && self.shed.is_some()
            && self.shed_regions().len() == self.regions.len()
    }

    /// Whether the record counts toward `health`'s fleet limit: it has a part of a source
    /// other than the autopilot (the autopilot's part never counts, so that load it moved
    /// never refuses a dead origin's drain).
    pub fn counts_toward_fleet_limit(&self) -> bool {
        self.other_source(SOURCE_AUTOPILOT).is_some()
    }

    /// Sets the record's top-level fields and schema from its parts: parts with no region
    /// go (but the last), a part that sheds no region keeps no `shed`, the top-level who
    /// and why are the latest part's, `shed` merges the parts' sheds while a region lists
    /// the origin shed; schema 4 with more than one part, else 3 with shed regions and 2
    /// without.
    pub fn settle_schema(&mut self) {
        if self.parts.is_empty() {
            self.parts = vec![self.derived_part()];
        }
        // A part keeps its shed while one of its effects is a shed, even where another
        // part drains the origin over it: a restore of that part gives the shed back.
        let shed_in = |part: &Part| part.regions.values().any(|effect| !effect.drains());
        let keep_last = self.parts.last().cloned();
        self.parts.retain(|part| !part.regions.is_empty());
        if self.parts.is_empty() {
            self.parts.extend(keep_last);
        }
        for part in &mut self.parts {
            if !shed_in(part) {
                part.shed = None;
            }
        }
        if let Some(last) = self.parts.last() {
            self.source = last.source.clone();
            self.reason = last.reason.clone();
            self.by = last.by.clone();
            self.at = last.at.clone();
            self.predicted = last.predicted.clone();
        }
        let sheds: Vec<&ShedInfo> = self
            .parts
            .iter()
            .filter_map(|part| part.shed.as_ref())
            .collect();
        self.shed = if sheds.is_empty() {
            None
        } else {
            let percent = sheds
                .iter()
                .fold(0.0, |total, shed| combined_percent(total, shed.percent));
            let mut steps: Vec<ShedStep> = sheds
                .iter()
                .flat_map(|shed| shed.steps.iter().cloned())
                .collect();
            steps.sort_by(|a, b| a.at.cmp(&b.at));
            let over = steps.len().saturating_sub(MAX_SHED_STEPS);
            steps.drain(..over);
            Some(ShedInfo {
                percent: percent.min(100.0),
                steps,
            })
        };
        if self.shed.is_some() && self.shed_regions().is_empty() {
            self.shed = None;
        }
        self.schema = if self.parts.len() > 1 {
            PARTS_RECORD_SCHEMA
        } else if self.shed.is_some() {
            SHED_RECORD_SCHEMA
        } else {
            DRAIN_RECORD_SCHEMA
        };
    }

    /// What `status` and `origin list` call the origin: `drained`, `shed 40%`, or both
    /// (`shed 40%, drained in 2 regions`), and with several sources' parts, whose
    /// (`shed 40%, drained in 2 region(s) [cli, autopilot]`).
    pub fn state_label(&self) -> String {
        let shed = self.shed_regions();
        let label = match &self.shed {
            None => "drained".into(),
            Some(info) => {
                let percent = crate::capacity::number_json((info.percent * 10.0).round() / 10.0);
                let drained = self.regions.len() - shed.len();
                if drained == 0 {
                    format!("shed {percent}%")
                } else {
                    format!("shed {percent}%, drained in {drained} region(s)")
                }
            }
        };
        if self.parts.len() > 1 {
            format!("{label} [{}]", self.sources().join(", "))
        } else {
            label
        }
    }

    /// Each part in words, for `origin list` and `traffic`: `cli: drained in DE, FR (INC-1,
    /// ops@host, 2026-…)`.
    pub fn part_labels(&self) -> Vec<String> {
        self.parts
            .iter()
            .map(|part| {
                let geos = |drains: bool| -> Vec<&String> {
                    part.regions
                        .iter()
                        .filter(|(_, effect)| effect.drains() == drains)
                        .map(|(geo, _)| geo)
                        .collect()
                };
                let (drained, shed) = (geos(true), geos(false));
                let mut what = Vec::new();
                if let Some(info) = &part.shed
                    && !shed.is_empty()
                {
                    let percent =
                        crate::capacity::number_json((info.percent * 10.0).round() / 10.0);
                    what.push(format!("shed {percent}% in {}", joined(&shed)));
                }
                if !drained.is_empty() {
                    what.push(format!("drained in {}", joined(&drained)));
                }
                if what.is_empty() {
                    what.push("no region".into());
                }
                format!(
                    "{}: {} ({}, {}, {})",
                    part.source,
                    what.join("; "),
                    part.reason,
                    part.by,
                    part.at
                )
            })
            .collect()
    }
}

fn joined(geos: &[&String]) -> String {
    geos.iter()
        .map(|geo| geo.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a record keeps of a region a drain or shed changes: the value before the
/// *first* change (`previous`'s, when the record already has the region), `after` as now
/// written. A deleted key keeps the whole value (unknown fields too) so that restore can
/// recreate it.
pub fn record_region(
    previous: Option<&DrainedRegion>,
    current: &RegionValue,
    after: Option<&RegionValue>,
) -> DrainedRegion {
    let fresh = DrainedRegion::minimal(current, after);
    match previous {
        None => fresh,
        Some(previous) => DrainedRegion {
            before: match after {
                Some(_) => previous.before.clone(),
                None => RegionValue {
                    extra: current.extra.clone(),
                    ..previous.before.clone()
                },
            },
            after: fresh.after,
        },
    }
}

/// A drain to plan.
#[derive(Debug, Clone)]
pub struct DrainRequest {
    /// The origin to take out.
    pub origin: String,
    /// Only these geos; empty means every region that lists the origin.
    pub regions: Vec<String>,
    /// Why, as the drain record keeps it.
    pub reason: String,
    /// `cli`, `rebalance` or `health` (see [`DrainRecord`]).
    pub source: String,
    /// Who asked (the operator, or `rebalance:<host>`).
    pub by: String,
    /// When, RFC 3339 UTC.
    pub at: String,
    /// Drain even a region's last origin: its key is deleted (restore recreates it).
    pub force: bool,
    /// For automation: leave a region the drain would empty alone (and say so) instead of
    /// refusing the whole drain.
    pub skip_emptying: bool,
    /// Refuse when this many origins of the set are drained already.
    pub fleet_limit: Option<FleetLimit>,
}

/// At most `max_drained` of `origins` may be drained at once.
#[derive(Debug, Clone)]
pub struct FleetLimit {
    /// The origins the limit counts (those health probes).
    pub origins: BTreeSet<String>,
    /// How many of them may be drained at once.
    pub max_drained: usize,
}

/// What a fleet-limited change does to its origin, for the words of a refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitedChange {
    /// A drain (`plan_drain`, and a shed of 100 %).
    Drain,
    /// A shed below 100 % (`plan_shed`): it counts against the limit as a drain does.
    Shed,
}

impl FleetLimit {
    /// The fleet limit, a safety invariant, checked in this one place for every change that
    /// takes an origin out (drains and sheds): `origin` may be newly taken out only while
    /// fewer than `max_drained` of the limit's *other* origins are drained or shed already
    /// (`drained`: the origins that have a drain record). `origin` itself never counts, and
    /// an origin that has a record already that counts (`already_out`: the change extends
    /// it; the autopilot's part alone does not, [`DrainRecord::counts_toward_fleet_limit`])
    /// is never refused, so that automation can always finish what it started. Origins outside
    /// `origins` do not count. The refusal is [`Error::Failed`] (exit 1), naming the
    /// drained origins and the limit.
    pub fn admit<'a>(
        &self,
        drained: impl IntoIterator<Item = &'a String>,
        origin: &str,
        already_out: bool,
        change: LimitedChange,
    ) -> Result<(), Error> {
        let drained: Vec<&String> = drained
            .into_iter()
            .filter(|name| self.origins.contains(*name) && *name != origin)
            .collect();
        if already_out || drained.len() < self.max_drained {
            return Ok(());
        }
        let (doing, already) = match change {
            LimitedChange::Drain => ("draining", "drained already"),
            LimitedChange::Shed => ("shedding", "drained or shed already"),
        };
        Err(Error::Failed(format!(
            "not {doing} {origin}: {} of {} origins are {already} ({drained:?}), the limit is {}",
            drained.len(),
            self.origins.len(),
            self.max_drained
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(origins: &[&str], max_drained: usize) -> FleetLimit {
        FleetLimit {
            origins: origins.iter().map(|name| name.to_string()).collect(),
            max_drained,
        }
    }

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn the_fleet_limit_admits_up_to_its_edge_and_refuses_at_it() {
        let limit = limit(&["a", "b", "c", "d"], 2);
        // One other drained: below the limit of 2.
        assert!(
            limit
                .admit(&names(&["a"]), "c", false, LimitedChange::Drain)
                .is_ok()
        );
        // Two others drained: at the limit, a third is refused, with the words of a drain.
        let error = limit
            .admit(&names(&["a", "b"]), "c", false, LimitedChange::Drain)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "not draining c: 2 of 4 origins are drained already ([\"a\", \"b\"]), the limit is 2"
        );
        // ... and a shed's words.
        let error = limit
            .admit(&names(&["a", "b"]), "c", false, LimitedChange::Shed)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("not shedding c: 2 of 4 origins are drained or shed already"),
            "{error}"
        );
    }

    #[test]
    fn the_fleet_limit_counts_neither_the_origin_itself_nor_origins_outside_it() {
        let limit = limit(&["a", "b", "c"], 1);
        // `c`'s own record and `x` (not probed) are not counted.
        assert!(
            limit
                .admit(&names(&["c", "x", "y"]), "c", false, LimitedChange::Drain)
                .is_ok()
        );
        assert!(
            limit
                .admit(&names(&["a"]), "c", false, LimitedChange::Drain)
                .is_err()
        );
        // An origin already out extends its record: never refused.
        assert!(
            limit
                .admit(&names(&["a", "b"]), "c", true, LimitedChange::Shed)
                .is_ok()
        );
        // A limit of 0 refuses every new one, even with nothing drained.
        let none = FleetLimit {
            max_drained: 0,
            ..limit
        };
        assert!(
            none.admit(&names(&[]), "c", false, LimitedChange::Drain)
                .is_err()
        );
    }

    /// A record exactly as dwctl wrote them before the `schema` field (schema 1): whole
    /// values with unknown fields in `before` and `after`, a deleted region.
    const SCHEMA_ONE: &str = r#"{"origin":"fra-a","reason":"INC-1","source":"cli","by":"ops@host","at":"2026-01-01T00:00:00Z","regions":{"DE":{"before":{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50},"note":"x"},"after":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100},"note":"x"}},"AT":{"before":{"shard":"eu-1","origins":["fra-a"],"weight":{"fra-a":100}},"after":null}}}"#;

    #[test]
    fn records_written_before_the_schema_field_still_parse() {
        let record = DrainRecord::parse("fra-a", SCHEMA_ONE.as_bytes()).unwrap();
        assert_eq!(record.schema, 1);
        assert_eq!(record.regions["DE"].before.extra["note"], "x");
        assert!(record.regions["AT"].after.is_none());
        assert!(record.stages.is_empty());
    }

    #[test]
    fn newer_schemas_and_foreign_records_are_malformed() {
        let newer = SCHEMA_ONE.replacen('{', r#"{"schema":4,"#, 1);
        let error = DrainRecord::parse("fra-a", newer.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("schema 4"), "{error}");
        assert!(error.to_string().contains("--repair fra-a"), "{error}");
        assert!(DrainRecord::parse("fra-b", SCHEMA_ONE.as_bytes()).is_err());
        assert!(DrainRecord::parse("fra-a", b"garbage").is_err());
    }

    /// A shed record as this dwctl writes it: DE shed (its `after` lists fra-a), AT
    /// drained.
    const SCHEMA_THREE: &str = r#"{"schema":3,"origin":"fra-a","reason":"INC-2","source":"cli","by":"ops@host","at":"2026-01-02T00:00:00Z","regions":{"DE":{"before":{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}},"after":{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":300,"fra-b":700}}},"AT":{"before":{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":1,"fra-b":1}},"after":{"shard":"eu-1","origins":["fra-b"],"weight":{"fra-b":100}}}},"shed":{"percent":40,"steps":[{"percent":40,"achieved":39.5,"reason":"INC-2","source":"cli","by":"ops@host","at":"2026-01-02T00:00:00Z"}]}}"#;

    #[test]
    fn shed_records_are_schema_three_and_name_their_shed_regions() {
        let record = DrainRecord::parse("fra-a", SCHEMA_THREE.as_bytes()).unwrap();
        assert_eq!(record.schema, 3);
        let shed = record.shed.as_ref().unwrap();
        assert_eq!(shed.percent, 40.0);
        assert_eq!(shed.steps[0].achieved, Some(39.5));
        assert!(shed.steps[0].regions.is_empty());
        assert_eq!(
            record.shed_regions().into_iter().collect::<Vec<_>>(),
            ["DE"]
        );
        assert_eq!(record.state_label(), "shed 40%, drained in 1 region(s)");
        // It round-trips exactly.
        let again = DrainRecord::parse("fra-a", record.encode().as_bytes()).unwrap();
        assert_eq!(again, record);
        // A drain's record says drained and names no shed region.
        let drain = DrainRecord::parse("fra-a", SCHEMA_ONE.as_bytes()).unwrap();
        assert!(drain.shed_regions().is_empty());
        assert_eq!(drain.state_label(), "drained");
        // A `shed` in a schema-2 record, or a percent out of range, is malformed.
        let two = SCHEMA_THREE.replacen(r#""schema":3"#, r#""schema":2"#, 1);
        let error = DrainRecord::parse("fra-a", two.as_bytes()).unwrap_err();
        assert!(error.to_string().contains("schema 2"), "{error}");
        for bad in ["0", "100.5", "-1"] {
            let broken = SCHEMA_THREE.replacen(
                r#""percent":40,"steps""#,
                &format!(r#""percent":{bad},"steps""#),
                1,
            );
            assert!(
                DrainRecord::parse("fra-a", broken.as_bytes()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_schema_follows_the_shed_regions() {
        let mut record = DrainRecord::parse("fra-a", SCHEMA_THREE.as_bytes()).unwrap();
        record.settle_schema();
        assert_eq!(record.schema, 3);
        // Once DE is drained too, it is a drain's record: schema 2, no `shed`.
        let drained_de = record.regions["AT"].after.clone();
        record.regions.get_mut("DE").unwrap().after = drained_de;
        record.settle_schema();
        assert_eq!((record.schema, record.shed.is_none()), (2, true));
        assert!(!record.encode().contains("shed"));
        // An old record read and written back stays a drain's.
        let mut old = DrainRecord::parse("fra-a", SCHEMA_ONE.as_bytes()).unwrap();
        old.settle_schema();
        assert_eq!(old.schema, 2);
    }

    #[test]
    fn minimal_regions_drop_unknown_fields_unless_the_key_was_deleted() {
        let record = DrainRecord::parse("fra-a", SCHEMA_ONE.as_bytes()).unwrap();
        let de = &record.regions["DE"];
        let kept = DrainedRegion::minimal(&de.before, de.after.as_ref());
        assert!(kept.before.extra.is_empty() && kept.after.unwrap().extra.is_empty());
        let deleted = DrainedRegion::minimal(&de.before, None);
        assert_eq!(deleted.before.extra["note"], "x");
    }
}
