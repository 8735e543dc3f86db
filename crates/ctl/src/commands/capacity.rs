//! `origin capacity`: set or clear an origin's capacity, or the capacity guard's headroom,
//! through the one write path (a plan committed in one guarded transaction; `--dry-run`
//! previews it; history and rollback as for every key).

use crate::cli::CapacityArgs;
use crate::context::Context;
use crate::error::{Error, FieldError};
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan;
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard};
use crate::output::{Outcome, Shown};
use crate::plan::capacity::{
    Capacity, Headroom, check_answers_per_s, check_headroom, check_reason, parse_number,
};
use crate::plan::capacity_change::plan_capacity;
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
                            // plan_capacity keeps the home geos in place.
                            home: Default::default(),
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
    let plan = |state: &State| Ok(plan_capacity(state, capacity.as_ref(), headroom.as_ref())?);
    // Capacity records are the guard's inputs, not routing: they move no load.
    let guard = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::Capacities));
    run_plan(context, &title, args.dry_run, &guard, plan).await
}
