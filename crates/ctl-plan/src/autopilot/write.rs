//! An action as the changes of one guarded transaction, and the drain records as the law
//! reads them.
//!
//! A relief writes the regions' new values and the origin's drain record with source
//! `autopilot` (a shed step whose reason carries the measured and predicted figures, so
//! that `dwctl history` shows them); a give-back step writes values part way back and keeps
//! the record (its regions' `after` updated); giving all back is `restore`'s plan for the
//! autopilot's own record ([`crate::drain::plan_restore`] with source `autopilot`). The
//! plan is made again on each attempt's state: a region whose `mod_revision` is not the one
//! the decision read, or a record another source wrote meanwhile, refuses the write
//! ([`Error::Diverged`]): a person's change wins, and the next evaluation decides again.

use std::collections::BTreeMap;

use dw_capacity::RegionEdit;

use super::SOURCE_AUTOPILOT;
use super::law::{Action, ActionKind, RecordOf};
use crate::drain::{Restoring, plan_restore};
use crate::drain_record::{DrainRecord, record_region};
use crate::model::{Changes, StageEdits, State};
use crate::shed_record::ShedStep;
use crate::value::RegionValue;
use crate::{Error, shown::Shown};

/// Each origin's drain record as the law reads it: the autopilot's own part alone
/// ([`RecordOf::Own`]), its part beside another source's ([`RecordOf::Shared`]), or only
/// other sources' parts ([`RecordOf::Other`]; a malformed record counts as another's: it
/// is not the autopilot's to touch). The autopilot's part is read as the values its give
/// back goes toward: each region's configured value with the other parts applied (the
/// composition rule, `crate::drain_parts`).
pub fn records_of(state: &State) -> BTreeMap<String, RecordOf> {
    let mut records = BTreeMap::new();
    for origin in state.drains.keys() {
        let record = match state.drain_record(origin) {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(_) => {
                records.insert(origin.clone(), RecordOf::Other("malformed".into()));
                continue;
            }
        };
        let other = record.other_source(SOURCE_AUTOPILOT).map(str::to_owned);
        let Some(part) = record.part(SOURCE_AUTOPILOT) else {
            let source = other.unwrap_or_else(|| "unknown".into());
            records.insert(origin.clone(), RecordOf::Other(source));
            continue;
        };
        let own: Vec<RegionEdit> = part
            .regions
            .keys()
            .filter_map(|geo| Some(record.composed_without(geo, SOURCE_AUTOPILOT)?.as_edit(geo)))
            .collect();
        let value = match other {
            Some(other) => RecordOf::Shared { own, other },
            None => RecordOf::Own(own),
        };
        records.insert(origin.clone(), value);
    }
    records
}

/// Who and when, written into the record.
#[derive(Debug, Clone)]
pub struct Author<'a> {
    /// `by` of the record and its step.
    pub by: &'a str,
    /// When, RFC 3339.
    pub at: &'a str,
}

/// The changes of `action` on `state`; `read` holds the `mod_revision` of each region the
/// decision read (by geo).
pub fn plan_action(
    state: &State,
    action: &Action,
    read: &BTreeMap<String, i64>,
    author: &Author<'_>,
) -> Result<Changes, Error> {
    let origin = action.origin.as_str();
    let existing = state.drain_record(origin)?;
    let relief = matches!(
        action.kind,
        ActionKind::Relieve | ActionKind::RelieveAtCeiling
    );
    match records_of(state).get(origin) {
        Some(RecordOf::Other(source)) => {
            return Err(Error::Diverged(format!(
                "{} has a record of source {} now: the autopilot leaves it alone",
                Shown(origin),
                Shown(source)
            )));
        }
        // Beside another source's part the autopilot only gives its own part back.
        Some(RecordOf::Shared { other, .. }) if relief => {
            return Err(Error::Diverged(format!(
                "{} has a part of source {} now: the autopilot sheds no more of it",
                Shown(origin),
                Shown(other)
            )));
        }
        _ => {}
    }
    if action.kind == ActionKind::GiveBackAll {
        let mut changes = plan_restore(state, origin, Restoring::Own(SOURCE_AUTOPILOT))?;
        check_read(state, action, read)?;
        changes.notes.push(action.reason());
        return Ok(changes);
    }
    check_read(state, action, read)?;
    let mut changes = Changes {
        guard_regions: true,
        stage_edits: StageEdits::Direct,
        ..Changes::default()
    };
    let reason = action.reason();
    let mut record = existing.unwrap_or_else(|| {
        DrainRecord::new(origin, SOURCE_AUTOPILOT, &reason, author.by, author.at)
    });
    for edit in &action.edits {
        let Some(Ok(current)) = state.region(&edit.geo) else {
            return Err(Error::Diverged(format!(
                "region {} is gone or invalid since the decision",
                Shown(&edit.geo)
            )));
        };
        let after = RegionValue {
            shard: current.shard.clone(),
            origins: edit.origins.clone(),
            weight: edit.weight.iter().cloned().collect(),
            extra: current.extra.clone(),
        };
        if after.same_routing(&current) {
            continue;
        }
        let entry = record_region(record.regions.get(&edit.geo), &current, Some(&after));
        record.regions.insert(edit.geo.clone(), entry);
        changes.regions.insert(edit.geo.clone(), Some(after));
    }
    if changes.regions.is_empty() {
        return Ok(changes);
    }
    let step = relief.then(|| {
        let measured = action.figures.measured;
        let percent = if measured > 0.0 {
            (100.0 * action.moved / measured).clamp(0.001, 100.0)
        } else {
            0.001
        };
        ShedStep {
            percent,
            achieved: Some(percent),
            regions: action.edits.iter().map(|edit| edit.geo.clone()).collect(),
            reason: reason.clone(),
            source: SOURCE_AUTOPILOT.into(),
            by: author.by.to_owned(),
            at: author.at.to_owned(),
        }
    });
    // A give-back step keeps the autopilot's part, its effect now the smaller one.
    let written: Vec<String> = changes.regions.keys().cloned().collect();
    record.take_part(
        SOURCE_AUTOPILOT,
        (&reason, author.by, author.at),
        &written,
        step,
    );
    record.settle_schema();
    changes.drains.insert(origin.to_owned(), Some(record));
    changes.notes.push(action.reason());
    Ok(changes)
}

/// Refuses when a region the action changes is not at the revision the decision read.
fn check_read(state: &State, action: &Action, read: &BTreeMap<String, i64>) -> Result<(), Error> {
    for edit in &action.edits {
        let now = state.regions.get(&edit.geo).map(|entry| entry.mod_revision);
        if now != read.get(&edit.geo).copied() {
            return Err(Error::Diverged(format!(
                "region {} changed since the decision: decided again next evaluation",
                Shown(&edit.geo)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autopilot::law::Figures;
    use crate::model::Entry;

    fn state() -> State {
        let mut state = State::default();
        state.regions.insert(
            "DE".into(),
            Entry {
                raw: br#"{"shard":"eu","origins":["a","b"],"weight":{"a":50,"b":50}}"#.to_vec(),
                mod_revision: 7,
            },
        );
        state
    }

    fn relief() -> Action {
        Action {
            origin: "a".into(),
            kind: ActionKind::Relieve,
            edits: vec![RegionEdit {
                geo: "DE".into(),
                shard: "eu".into(),
                origins: vec!["a".into(), "b".into()],
                weight: vec![("a".into(), 300), ("b".into(), 700)],
            }],
            figures: Figures {
                measured: 1000.0,
                capacity: 1000.0,
                target: 800.0,
            },
            predicted: 760.0,
            moved: 240.0,
            limit: 0.8,
            harms: Vec::new(),
            spilled: Vec::new(),
            skipped_staged: Vec::new(),
            changed: vec![("a".into(), 1000.0, 760.0), ("b".into(), 500.0, 740.0)],
            ahead: 0.0,
        }
    }

    const AUTHOR: Author<'static> = Author {
        by: "autopilot:host",
        at: "2026-12-06T00:00:00Z",
    };

    #[test]
    fn a_relief_writes_the_values_and_an_autopilot_record_with_its_figures() {
        let state = state();
        let read = BTreeMap::from([("DE".to_owned(), 7)]);
        let changes = plan_action(&state, &relief(), &read, &AUTHOR).unwrap();
        let region = changes.regions["DE"].as_ref().unwrap();
        assert_eq!((region.weight["a"], region.weight["b"]), (300, 700));
        let record = changes.drains["a"].as_ref().unwrap();
        assert_eq!(record.source, SOURCE_AUTOPILOT);
        let step = &record.shed.as_ref().unwrap().steps[0];
        assert_eq!(step.source, SOURCE_AUTOPILOT);
        assert!(step.reason.contains("measured 1000.0/s"), "{}", step.reason);
        assert!(step.reason.contains("predicted 760.0/s"), "{}", step.reason);
        assert!((step.percent - 24.0).abs() < 1e-9);
        assert_eq!(record.regions["DE"].before.weight["a"], 50);

        // Read back, the record is the autopilot's own, with the values from before.
        let mut after = state.clone();
        after.drains.insert(
            "a".into(),
            Entry {
                raw: record.encode().into_bytes(),
                mod_revision: 8,
            },
        );
        match &records_of(&after)["a"] {
            RecordOf::Own(before) => {
                assert_eq!(
                    before[0].weight,
                    [("a".to_owned(), 50), ("b".to_owned(), 50)]
                )
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_region_changed_since_the_decision_or_another_record_refuses() {
        let state = state();
        let stale = BTreeMap::from([("DE".to_owned(), 6)]);
        assert!(matches!(
            plan_action(&state, &relief(), &stale, &AUTHOR),
            Err(Error::Diverged(_))
        ));
        let mut held = state.clone();
        held.drains.insert(
            "a".into(),
            Entry {
                raw: br#"{"schema":2,"origin":"a","reason":"maintenance","source":"cli","by":"alice","at":"2026-01-01T00:00:00Z","regions":{}}"#.to_vec(),
                mod_revision: 3,
            },
        );
        assert_eq!(records_of(&held)["a"], RecordOf::Other("cli".into()));
        let read = BTreeMap::from([("DE".to_owned(), 7)]);
        assert!(matches!(
            plan_action(&held, &relief(), &read, &AUTHOR),
            Err(Error::Diverged(_))
        ));
    }

    #[test]
    fn the_autopilots_records_do_not_count_toward_healths_fleet_limit() {
        use crate::drain::{DrainRequest, FleetLimit, fleet_limit_counts, plan_drain};
        let mut state = state();
        state.regions.insert(
            "FR".into(),
            Entry {
                raw: br#"{"shard":"eu","origins":["a","c"],"weight":{"a":50,"c":50}}"#.to_vec(),
                mod_revision: 9,
            },
        );
        let read = BTreeMap::from([("DE".to_owned(), 7)]);
        let ours = plan_action(&state, &relief(), &read, &AUTHOR).unwrap();
        let record = ours.drains["a"].as_ref().unwrap().clone();
        assert!(record.autopilot_only());
        state.drains.insert(
            "a".into(),
            Entry {
                raw: record.encode().into_bytes(),
                mod_revision: 10,
            },
        );
        assert!(fleet_limit_counts(&state).is_empty());
        // health may drain c although a holds a record and only one of three may be out.
        let drain = DrainRequest {
            origin: "c".into(),
            regions: Vec::new(),
            reason: "health-check".into(),
            source: "health".into(),
            by: "health".into(),
            at: "2026-12-06T00:00:00Z".into(),
            force: false,
            skip_emptying: true,
            fleet_limit: Some(FleetLimit {
                origins: ["a", "b", "c"]
                    .iter()
                    .map(|name| (*name).to_owned())
                    .collect(),
                max_drained: 1,
            }),
        };
        plan_drain(&state, &drain).expect("the autopilot's shed does not count");

        // health drains a over the autopilot's shed: health's part beside the
        // autopilot's (the autopilot sheds no more of it, but may give its own part back:
        // health's drain stays), and it counts.
        let over = DrainRequest {
            origin: "a".into(),
            fleet_limit: None,
            ..drain
        };
        let drained = plan_drain(&state, &over).unwrap();
        let merged = drained.drains["a"].as_ref().unwrap();
        assert!(!merged.autopilot_only());
        state.drains.insert(
            "a".into(),
            Entry {
                raw: merged.encode().into_bytes(),
                mod_revision: 11,
            },
        );
        match &records_of(&state)["a"] {
            RecordOf::Shared { own, other } => {
                assert_eq!(other, "health");
                // Its give back goes toward health's drain: a stays out of DE.
                assert_eq!(own[0].origins, ["b"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(fleet_limit_counts(&state), ["a"]);
    }
}
