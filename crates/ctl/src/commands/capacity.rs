//! `origin capacity`: set or clear an origin's capacity, or the capacity guard's headroom,
//! through the one write path (a plan committed in one guarded transaction; `--dry-run`
//! previews it; history and rollback as for every key).

use crate::cli::CapacityArgs;
use crate::context::Context;
use crate::error::{Error, FieldError};
use crate::ops::commit::{Changes, State};
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard, run_plan};
use crate::output::{Outcome, Shown};
use crate::plan::capacity::{
    Capacity, Headroom, check_answers_per_s, check_headroom, check_reason, number_json,
    parse_number,
};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::check_origin_name;

/// Runs `dwctl origin capacity`.
pub async fn run(context: &Context, args: CapacityArgs) -> Result<Outcome, Error> {
    let (by, at) = (operator(), now_rfc3339());
    let mut errors: Vec<FieldError> = Vec::new();
    if let Some(reason) = &args.reason
        && let Err(error) = check_reason("reason", reason)
    {
        errors.push(error);
    }
    // origin → the record to write (None: clear).
    let mut capacity: Option<(String, Option<Capacity>)> = None;
    if let Some(origin) = &args.origin {
        check_origin_name("origin", origin)?;
        if args.clear {
            capacity = Some((origin.clone(), None));
        } else if let Some(text) = &args.answers_per_s {
            match parse_number("answers_per_s", text)
                .and_then(|number| check_answers_per_s("answers_per_s", number))
            {
                Ok(answers_per_s) => {
                    capacity = Some((
                        origin.clone(),
                        Some(Capacity {
                            answers_per_s,
                            by: by.clone(),
                            at: at.clone(),
                            reason: args.reason.clone(),
                        }),
                    ))
                }
                Err(error) => errors.push(error),
            }
        }
    }
    let mut headroom: Option<Option<Headroom>> = None;
    if args.clear_headroom {
        headroom = Some(None);
    } else if let Some(text) = &args.headroom {
        match parse_number("headroom", text).and_then(|number| check_headroom("headroom", number)) {
            Ok(share) => {
                headroom = Some(Some(Headroom {
                    headroom: share,
                    by: by.clone(),
                    at: at.clone(),
                    reason: args.reason.clone(),
                }))
            }
            Err(error) => errors.push(error),
        }
    }
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    if capacity.is_none() && headroom.is_none() {
        return Err(Error::Usage(
            "say what to change: ORIGIN ANSWERS_PER_S, ORIGIN --clear, --headroom SHARE or \
             --clear-headroom"
                .into(),
        ));
    }
    let title = match (&capacity, &headroom) {
        (Some((origin, _)), None) => format!("capacity of {}", Shown(origin)),
        (None, _) => "capacity headroom".to_string(),
        (Some((origin, _)), Some(_)) => {
            format!("capacity of {} and headroom", Shown(origin))
        }
    };
    let mut client = context.etcd.connect().await?;
    let plan = |state: &State| plan_capacity(state, capacity.as_ref(), headroom.as_ref());
    // Capacity records are the guard's inputs, not routing: they move no load.
    let guard = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Capacities));
    run_plan(context, &mut client, &title, args.dry_run, &guard, plan).await
}

/// The changes that set (or clear) `capacity` and `headroom`; a value already in place is
/// left alone with a note.
fn plan_capacity(
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
