//! `origin capacity`'s planner: set or clear an origin's capacity and the guard's headroom
//! (the records of [`crate::capacity`]), leaving a value already in place alone with a
//! note.

use crate::Error;
use crate::capacity::{Capacity, Headroom, number_json};
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
                changes.capacities.insert(origin.clone(), wanted.clone());
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entry;

    fn capacity(answers_per_s: f64) -> Capacity {
        Capacity {
            answers_per_s,
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
