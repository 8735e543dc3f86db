//! `origin capacity`'s planner: set or clear an origin's capacity and the guard's headroom
//! (the records of [`crate::capacity`]), leaving a value already in place alone with a
//! note; and `origin home`'s: set or clear the home geos kept in the capacity record.

use std::collections::BTreeSet;

use crate::Error;
use crate::capacity::{Capacity, Headroom, home_text, number_json};
use crate::model::{Changes, State};
use crate::shown::Shown;

/// The changes that set (or clear, `None`) `capacity` (origin → record) and `headroom`; a
/// value already in place is left alone with a note. Refused when the capacities could
/// not be read (the role lacks the grant).
pub fn plan_capacity(
    state: &State,
    capacity: Option<&(String, Option<Capacity>)>,
    headroom: Option<&Option<Headroom>>,
) -> Result<Changes, Error> {
    if let Some(why) = &state.capacities_unreadable {
        return Err(Error::Failed(why.clone()));
    }
    let mut changes = Changes::default();
    if let Some((origin, wanted)) = capacity {
        let current = state.capacity(origin);
        match (wanted, &current) {
            (Some(wanted), Some(Ok(current))) if current.answers_per_s == wanted.answers_per_s => {
                changes.notes.push(format!(
                    "{} already has a capacity of {} answers/s",
                    Shown(origin),
                    number_json(wanted.answers_per_s)
                ))
            }
            (None, None) => changes
                .notes
                .push(format!("{} has no capacity to clear", Shown(origin))),
            _ => {
                // A new capacity keeps the home geos in place (`origin home` sets them);
                // a clear deletes the record, home geos and all, and says so.
                let mut wanted = wanted.clone();
                if let Some(Ok(current)) = &current {
                    match &mut wanted {
                        Some(wanted) => wanted.home = current.home.clone(),
                        None if !current.home.is_empty() => changes.notes.push(format!(
                            "{}'s home geos ({}) go with its capacity",
                            Shown(origin),
                            Shown(&home_text(&current.home))
                        )),
                        None => {}
                    }
                }
                changes.capacities.insert(origin.clone(), wanted);
            }
        }
    }
    if let Some(wanted) = headroom {
        match (wanted, state.headroom_record()) {
            (Some(wanted), Some(Ok(current))) if current.headroom == wanted.headroom => {
                changes.notes.push(format!(
                    "the headroom is {} already",
                    number_json(wanted.headroom)
                ))
            }
            (None, None) => changes
                .notes
                .push("no headroom is set (the default applies already)".into()),
            _ => changes.headroom = Some(wanted.clone()),
        }
    }
    Ok(changes)
}

/// Who writes a record, when, and why (the stamps of every capacity record).
#[derive(Debug, Clone, Copy)]
pub struct Stamp<'a> {
    /// `user@host`.
    pub by: &'a str,
    /// RFC 3339 UTC.
    pub at: &'a str,
    /// Why, when given.
    pub reason: Option<&'a str>,
}

/// The change that sets `origin`'s home geos to `home` (empty: clears them) in its capacity
/// record, stamped with `stamp`; the same home geos already in place are left alone with a
/// note. Refused when the capacities could not be read, when the origin has no capacity
/// (home geos matter only to the autopilot, which acts on origins with a capacity) or when
/// its record is malformed (`dwctl origin capacity` writes a good one first).
pub fn plan_home(
    state: &State,
    origin: &str,
    home: &BTreeSet<String>,
    stamp: Stamp<'_>,
) -> Result<Changes, Error> {
    if let Some(why) = &state.capacities_unreadable {
        return Err(Error::Failed(why.clone()));
    }
    let mut changes = Changes::default();
    let current = match state.capacity(origin) {
        None => {
            return Err(Error::Failed(format!(
                "{} has no capacity: set one first (`dwctl origin capacity {} N`); home geos \
                 matter only to the autopilot, which relieves origins with a capacity",
                Shown(origin),
                Shown(origin)
            )));
        }
        Some(Err(error)) => {
            return Err(Error::Failed(format!(
                "{}'s capacity record is malformed ({}): write a good one first (`dwctl \
                 origin capacity`)",
                Shown(origin),
                Shown(&error.to_string())
            )));
        }
        Some(Ok(current)) => current,
    };
    if &current.home == home {
        changes.notes.push(if home.is_empty() {
            format!("{} has no home geos to clear", Shown(origin))
        } else {
            format!(
                "{}'s home geos are {} already",
                Shown(origin),
                Shown(&home_text(home))
            )
        });
        return Ok(changes);
    }
    changes.capacities.insert(
        origin.to_owned(),
        Some(Capacity {
            home: home.clone(),
            by: stamp.by.to_owned(),
            at: stamp.at.to_owned(),
            reason: stamp.reason.map(str::to_owned),
            ..current
        }),
    );
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entry;

    fn capacity(answers_per_s: f64) -> Capacity {
        Capacity {
            answers_per_s,
            home: Default::default(),
            by: "alice".into(),
            at: "2026-12-06T00:00:00Z".into(),
            reason: None,
        }
    }

    fn headroom(share: f64) -> Headroom {
        Headroom {
            headroom: share,
            by: "alice".into(),
            at: "2026-12-06T00:00:00Z".into(),
            reason: None,
        }
    }

    /// fra-a at 1000 answers/s, the headroom at 0.7.
    fn state() -> State {
        let mut state = State::default();
        state.capacities.insert(
            "fra-a".into(),
            Entry {
                raw: capacity(1000.0).encode().into_bytes(),
                mod_revision: 3,
            },
        );
        state.headroom = Some(Entry {
            raw: headroom(0.7).encode().into_bytes(),
            mod_revision: 4,
        });
        state
    }

    #[test]
    fn a_new_or_changed_capacity_is_written_and_a_clear_deletes_it() {
        let state = state();
        let set = ("fra-b".to_string(), Some(capacity(500.0)));
        let changes = plan_capacity(&state, Some(&set), None).unwrap();
        assert_eq!(changes.capacities["fra-b"], Some(capacity(500.0)));
        assert!(changes.notes.is_empty() && changes.headroom.is_none());
        let changed = ("fra-a".to_string(), Some(capacity(1200.0)));
        let changes = plan_capacity(&state, Some(&changed), None).unwrap();
        assert_eq!(changes.capacities["fra-a"], Some(capacity(1200.0)));
        let clear = ("fra-a".to_string(), None);
        let changes = plan_capacity(&state, Some(&clear), Some(&None)).unwrap();
        assert_eq!(changes.capacities["fra-a"], None);
        assert_eq!(changes.headroom, Some(None));
    }

    #[test]
    fn a_value_already_in_place_is_left_alone_with_a_note() {
        let state = state();
        let same = ("fra-a".to_string(), Some(capacity(1000.0)));
        let changes = plan_capacity(&state, Some(&same), Some(&Some(headroom(0.7)))).unwrap();
        assert!(changes.is_empty(), "{changes:?}");
        assert_eq!(
            changes.notes,
            [
                "fra-a already has a capacity of 1000 answers/s",
                "the headroom is 0.7 already"
            ]
        );
        let nothing = plan_capacity(
            &State::default(),
            Some(&("fra-b".to_string(), None)),
            Some(&None),
        )
        .unwrap();
        assert!(nothing.is_empty());
        assert_eq!(
            nothing.notes,
            [
                "fra-b has no capacity to clear",
                "no headroom is set (the default applies already)"
            ]
        );
    }

    fn geos(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|geo| geo.to_string()).collect()
    }

    const STAMP: Stamp<'static> = Stamp {
        by: "bob",
        at: "2026-12-07T00:00:00Z",
        reason: Some("CHG-9"),
    };

    #[test]
    fn home_geos_are_written_into_the_capacity_record_and_kept_by_a_new_capacity() {
        let state = state();
        let changes = plan_home(&state, "fra-a", &geos(&["DE", "AT"]), STAMP).unwrap();
        let written = changes.capacities["fra-a"].clone().unwrap();
        assert_eq!(written.home, geos(&["AT", "DE"]));
        assert_eq!(written.answers_per_s, 1000.0);
        assert_eq!(
            (written.by.as_str(), written.reason.as_deref()),
            ("bob", Some("CHG-9"))
        );
        assert_eq!(
            written.encode(),
            r#"{"answers_per_s":1000,"by":"bob","at":"2026-12-07T00:00:00Z","reason":"CHG-9","home":["AT","DE"]}"#
        );
        // With the home geos stored, a new capacity keeps them; a clear says they go.
        let mut stored = state.clone();
        stored.capacities.get_mut("fra-a").unwrap().raw = written.encode().into_bytes();
        let changed = ("fra-a".to_string(), Some(capacity(1200.0)));
        let changes = plan_capacity(&stored, Some(&changed), None).unwrap();
        let kept = changes.capacities["fra-a"].clone().unwrap();
        assert_eq!(
            (kept.answers_per_s, kept.home),
            (1200.0, geos(&["AT", "DE"]))
        );
        let clear = ("fra-a".to_string(), None);
        let changes = plan_capacity(&stored, Some(&clear), None).unwrap();
        assert_eq!(changes.capacities["fra-a"], None);
        assert_eq!(
            changes.notes,
            ["fra-a's home geos (AT,DE) go with its capacity"]
        );
        // Clearing the home geos rewrites the record without them; the same set is a note.
        let changes = plan_home(&stored, "fra-a", &BTreeSet::new(), STAMP).unwrap();
        assert!(
            changes.capacities["fra-a"]
                .as_ref()
                .unwrap()
                .home
                .is_empty()
        );
        let same = plan_home(&stored, "fra-a", &geos(&["DE", "AT"]), STAMP).unwrap();
        assert!(same.is_empty());
        assert_eq!(same.notes, ["fra-a's home geos are AT,DE already"]);
        let none = plan_home(&state, "fra-a", &BTreeSet::new(), STAMP).unwrap();
        assert_eq!(none.notes, ["fra-a has no home geos to clear"]);
    }

    #[test]
    fn home_geos_need_a_good_capacity_record() {
        let mut state = state();
        let refused = plan_home(&state, "fra-b", &geos(&["DE"]), STAMP).unwrap_err();
        assert!(
            refused.to_string().contains("fra-b has no capacity"),
            "{refused}"
        );
        state.capacities.get_mut("fra-a").unwrap().raw = b"garbage".to_vec();
        let refused = plan_home(&state, "fra-a", &geos(&["DE"]), STAMP).unwrap_err();
        assert!(refused.to_string().contains("malformed"), "{refused}");
    }

    #[test]
    fn unreadable_capacities_refuse_the_change() {
        let state = State {
            capacities_unreadable: Some("permission denied".into()),
            ..State::default()
        };
        let set = ("fra-a".to_string(), Some(capacity(1.0)));
        assert_eq!(
            plan_capacity(&state, Some(&set), None).unwrap_err(),
            Error::Failed("permission denied".into())
        );
    }
}
