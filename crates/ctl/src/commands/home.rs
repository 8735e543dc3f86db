//! `origin home`: set or clear an origin's home geos (the ones the autopilot moves last),
//! kept in its capacity record, through the one write path (a plan committed in one
//! guarded transaction, exempt from the capacity guard by type: it moves no load;
//! `--dry-run` previews it; `dwctl history capacity/ORIGIN` shows each value).

use std::collections::BTreeSet;

use crate::cli::HomeArgs;
use crate::context::Context;
use crate::error::{Error, FieldError};
use crate::ops::commit::State;
use crate::ops::one_shot::run_plan;
use crate::ops::run::{ExemptReason, NoLoad, WriteGuard};
use crate::output::{Outcome, Shown};
use crate::plan::capacity::{check_reason, parse_home_geos};
use crate::plan::capacity_change::{Stamp, plan_home};
use crate::plan::clock::{now_rfc3339, operator};
use crate::plan::drain::check_origin_name;

/// Runs `dwctl origin home`.
pub async fn run(context: &Context, args: HomeArgs) -> Result<Outcome, Error> {
    let (by, at) = (operator(), now_rfc3339());
    check_origin_name("origin", &args.origin)?;
    let mut errors: Vec<FieldError> = Vec::new();
    if let Some(reason) = &args.reason
        && let Err(error) = check_reason("reason", reason)
    {
        errors.push(error);
    }
    let home: BTreeSet<String> = match (&args.geos, args.clear) {
        (_, true) => BTreeSet::new(),
        (Some(text), false) => match parse_home_geos("geos", text) {
            Ok(home) => home,
            Err(error) => {
                errors.push(error);
                BTreeSet::new()
            }
        },
        (None, false) => {
            return Err(Error::Usage(
                "say what to change: ORIGIN GEO[,GEO...] or ORIGIN --clear".into(),
            ));
        }
    };
    if !errors.is_empty() {
        return Err(Error::Invalid(errors));
    }
    let title = format!("home geos of {}", Shown(&args.origin));
    let stamp = Stamp {
        by: &by,
        at: &at,
        reason: args.reason.as_deref(),
    };
    let origin = args.origin.as_str();
    let plan = |state: &State| Ok(plan_home(state, origin, &home, stamp)?);
    // Home geos say which geos the autopilot moves last; they move no load themselves.
    let guard = WriteGuard::Exempt(ExemptReason::MovesNoLoad(NoLoad::HomeGeos));
    run_plan(context, &title, args.dry_run, &guard, plan).await
}
