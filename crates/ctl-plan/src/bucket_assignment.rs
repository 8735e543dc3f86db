//! Visitor buckets' assignments as dwctl commits them (docs/routing.md, "Buckets"; issue
//! 41): with `policy/global`'s `buckets: N` set, every region value dwctl writes carries
//! the assignment of its N buckets to its listed origins in its `buckets` field, computed
//! from the assignment the routers use now by `dw_routing::buckets`'s minimal-move rule.
//!
//! [`assign_buckets`] is the one place this happens: dwctl's `ops::commit` runs it on every
//! plan (set, apply, drain, restore, shed, spill, rollback, stage actions, automatic
//! drains), after the planner and again after the follow-ups, so no planner computes an
//! assignment itself and none can forget to. It is idempotent: an assignment is always
//! computed from what was read (`State`), never from the value being written.
//!
//! The rules:
//!
//! - **Off** (no `buckets`, or 0, in the policy in effect): nothing is written, values are
//!   byte for byte what the planner made.
//! - **The base** of a region's new assignment is the one the routers use for its current
//!   value ([`live_assignment`]): its `buckets` field when it decodes for N and the value's
//!   origins, else the default of its weights (a value without one "adopts the default
//!   first"). A new region, or one replacing an invalid value, starts from the assignment
//!   it carries if that decodes (a restore recreating a deleted key), else the default.
//! - **The next assignment** is `reassign_by_name(base, current origins, new origins, new
//!   weights)`: the buckets moved are exactly the sum of the origins' decreases, from
//!   origins whose count falls to origins whose count rises.
//! - **A change of N** ([`rescale`]): bucket `b` below both the old and the new N keeps its
//!   origin where the new counts allow (a visitor's cookie keeps its bucket when it is
//!   still below N), the rest is placed by the same rule; every region is rewritten in the
//!   change's transaction, guarded on every region. Turned on from off, nothing is
//!   rewritten: the readers' default for N is what dwctl would write.
//! - **Staged values** get the assignment their promote will write: computed from the
//!   current value (after the change), so a cohort node's visitors do not move again at
//!   promote. A stage of `policy/global` that changes N stages every region rescaled.
//! - A `buckets` field given in a value (by `region set`, `apply`, `rollback`) is replaced:
//!   dwctl owns it, and says so in a note when the given one differs.

use std::collections::BTreeMap;

use dw_routing::buckets::{
    Assignment, BucketCount, MAX_ASSIGNED_ORIGINS, effective_assignment, reassign_by_name,
};
use dw_routing::stage::Stage;
use serde_json::Value;

use crate::Error;
use crate::model::{Changes, State};
use crate::shown::escape as shown;
use crate::stage::{key_revision, open_stages};
use crate::value::{PolicyValue, RegionValue};

/// The field of a region value that holds its assignment, and of the policy that holds N.
pub const BUCKETS_FIELD: &str = "buckets";

/// The key a stage stages the policy under.
const POLICY_KEY: &str = "policy/global";

/// The N `policy` asks for ([`PolicyValue::buckets`]) as a plan's error.
pub fn policy_buckets(policy: &PolicyValue) -> Result<Option<BucketCount>, Error> {
    policy
        .buckets()
        .map_err(|error| Error::Invalid(vec![error]))
}

/// The N of the policy `state` holds: `None` when there is no policy, when it is invalid
/// (the readers use the defaults then) or when buckets are off.
pub fn state_buckets(state: &State) -> Option<BucketCount> {
    match state.policy() {
        Some(Ok(policy)) => policy_buckets(&policy).ok().flatten(),
        _ => None,
    }
}

/// The N in effect once `changes` are written: the new policy's, else `state`'s.
pub fn buckets_after(state: &State, changes: &Changes) -> Result<Option<BucketCount>, Error> {
    match &changes.policy {
        Some(policy) => policy_buckets(policy),
        None => Ok(state_buckets(state)),
    }
}

/// The listed origins' weights, in list order (what the apportionment reads).
fn listed_weights(value: &RegionValue) -> Vec<u32> {
    value
        .origins
        .iter()
        .map(|origin| value.weight_of(origin))
        .collect()
}

/// The `buckets` text a value carries, if it is a string.
pub fn stored_text(value: &RegionValue) -> Option<&str> {
    value.extra.get(BUCKETS_FIELD).and_then(Value::as_str)
}

/// The assignment the routers use for `value` at N: `dw_routing`'s
/// `effective_assignment`, the one the extension, the twin and `dwctl route` use (its
/// `buckets` field when it decodes for N and its origins, moved to the apportionment of its
/// weights when its counts are off them; else the default of its listed weights).
pub fn live_assignment(value: &RegionValue, n: BucketCount) -> Result<Assignment, Error> {
    let stored = value.extra.get(BUCKETS_FIELD).map(|field| match field {
        Value::String(text) => Ok(text.as_str()),
        _ => Err("not a string"),
    });
    effective_assignment(stored, &listed_weights(value), n)
        .map(|(assignment, _)| assignment)
        .map_err(routing_error)
}

/// `live` (for N = `live.buckets()`, indexing `origins`) carried over to `n` and then to
/// `after`'s origins and weights: each bucket below both Ns keeps its origin by name, the
/// others are placed by the minimal-move rule (docs/routing.md, "Buckets").
pub fn rescale(
    live: &Assignment,
    origins: &[String],
    n: BucketCount,
    after: &RegionValue,
) -> Result<Assignment, Error> {
    // The buckets past the old N belong to a placeholder origin no list names (an origin
    // is a non-empty string), so the rule frees them like those of a removed origin. Its
    // index is the one after the last origin's: it needs fewer than 65,536 origins.
    let placeholder = u16::try_from(origins.len())
        .ok()
        .filter(|index| usize::from(*index) < MAX_ASSIGNED_ORIGINS)
        .ok_or_else(|| {
            Error::invalid(
                "origins",
                format!(
                    "lists {} origins; a change of N carries over at most {}",
                    origins.len(),
                    MAX_ASSIGNED_ORIGINS - 1
                ),
            )
        })?;
    let mut owners = live.owners();
    owners.resize(usize::from(n.get()), placeholder);
    let text = encode_owners(&owners);
    let mut names: Vec<String> = origins.to_vec();
    names.push(String::new());
    let widened = Assignment::decode(&text, n, names.len()).map_err(routing_error)?;
    reassign_by_name(&widened, &names, &after.origins, &listed_weights(after))
        .map_err(routing_error)
}

/// The text form of one owner per bucket (the runs, `ORIGIN:COUNT`).
fn encode_owners(owners: &[u16]) -> String {
    let mut runs: Vec<(u16, usize)> = Vec::new();
    for &owner in owners {
        match runs.last_mut() {
            Some((origin, count)) if *origin == owner => *count += 1,
            _ => runs.push((owner, 1)),
        }
    }
    runs.iter()
        .map(|(origin, count)| format!("{origin}:{count}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The assignment `after` gets at `n`, from `base` (the value the routers use now and the
/// N they use it at; `None` for a new region: from the one `after` carries if it decodes,
/// else its default).
pub fn next_assignment(
    base: Option<(&RegionValue, BucketCount)>,
    after: &RegionValue,
    n: BucketCount,
) -> Result<Assignment, Error> {
    // A base the routers have no assignment for (more origins than one indexes), or one
    // too large to carry over to another N, counts as none.
    let base = base.filter(|(before, base_n)| {
        before.origins.len() < MAX_ASSIGNED_ORIGINS
            || (*base_n == n && before.origins.len() == MAX_ASSIGNED_ORIGINS)
    });
    let Some((before, base_n)) = base else {
        // A new key: from the assignment `after` carries (a restore of a deleted key
        // recreates its value), else its default.
        let own = live_assignment(after, n)?;
        return reassign_by_name(&own, &after.origins, &after.origins, &listed_weights(after))
            .map_err(routing_error);
    };
    let live = live_assignment(before, base_n)?;
    if base_n == n {
        reassign_by_name(
            &live,
            &before.origins,
            &after.origins,
            &listed_weights(after),
        )
        .map_err(routing_error)
    } else {
        rescale(&live, &before.origins, n, after)
    }
}

/// Whether `value` can have an assignment: at most [`MAX_ASSIGNED_ORIGINS`] listed
/// origins (the routers ignore a bucket in a region of more: its visitors answer as
/// plain). One that cannot is written without a `buckets` field.
fn assignable(value: &mut RegionValue) -> bool {
    if value.origins.len() <= MAX_ASSIGNED_ORIGINS {
        return true;
    }
    value.extra.remove(BUCKETS_FIELD);
    false
}

/// `value` with `assignment` in its `buckets` field; whether the field changed.
fn set_assignment(value: &mut RegionValue, assignment: &Assignment) -> bool {
    let text = assignment.encode();
    if stored_text(value) == Some(text.as_str()) {
        return false;
    }
    value
        .extra
        .insert(BUCKETS_FIELD.to_owned(), Value::String(text));
    true
}

/// Writes the assignment of every region value `changes` write or stage (see the module's
/// rules). Run on every plan by dwctl's `ops::commit`, before the capacity guard (so that
/// the prediction reads the assignment committed) and again after the follow-ups.
pub fn assign_buckets(state: &State, changes: &mut Changes) -> Result<(), Error> {
    let before_n = state_buckets(state);
    let after_n = buckets_after(state, changes)?;
    if let Some(n) = after_n {
        // Turned on from off: the base is the value as the readers will take it at N.
        let base_n = before_n.unwrap_or(n);
        let mut notes = Vec::new();
        for (geo, value) in changes.regions.iter_mut() {
            let Some(value) = value else { continue };
            if !assignable(value) {
                continue;
            }
            let base = match state.region(geo) {
                Some(Ok(before)) => Some(before),
                _ => None,
            };
            let given = stored_text(value).map(str::to_owned);
            let next = next_assignment(base.as_ref().map(|before| (before, base_n)), value, n)
                .map_err(|error| in_region(geo, error))?;
            let carried = base.as_ref().and_then(|before| stored_text(before));
            if set_assignment(value, &next)
                && let Some(given) = given
                && Some(given.as_str()) != carried
            {
                notes.push(format!(
                    "region/{}: the `buckets` given ({}) is replaced by the assignment dwctl \
                     computes ({next}): dwctl owns that field",
                    shown(geo),
                    shown(&given)
                ));
            }
        }
        changes.notes.extend(notes);
        if let Some(old_n) = before_n
            && old_n != n
        {
            refuse_with_staged_regions(state, changes, "a change of `buckets`")?;
            rescale_all(state, changes, old_n, n)?;
        }
        // The assignment depends on N: a change of N since the read fails the write.
        if !changes.regions.is_empty() {
            changes.guard_policy = true;
        }
    }
    assign_staged(state, changes, after_n)
}

/// Every valid region `changes` leave alone, rewritten for N going from `old_n` to `n`.
fn rescale_all(
    state: &State,
    changes: &mut Changes,
    old_n: BucketCount,
    n: BucketCount,
) -> Result<(), Error> {
    for (geo, current) in state.valid_regions() {
        if changes.regions.contains_key(&geo) {
            continue;
        }
        let mut after = current.clone();
        if !assignable(&mut after) {
            continue;
        }
        let next = next_assignment(Some((&current, old_n)), &after, n)
            .map_err(|error| in_region(&geo, error))?;
        set_assignment(&mut after, &next);
        changes.regions.insert(geo, Some(after));
    }
    // Decided from every region read: one written meanwhile must not keep the old N's.
    changes.guard_regions = true;
    changes.notes.push(format!(
        "`buckets` goes from {} to {}: every region's assignment is rewritten for it in this \
         transaction (each bucket below both keeps its origin where the counts allow)",
        old_n.get(),
        n.get()
    ));
    Ok(())
}

/// Refuses `what` while an open stage (other than those `changes` delete) stages region
/// values: their assignments were computed for the N in effect.
fn refuse_with_staged_regions(state: &State, changes: &Changes, what: &str) -> Result<(), Error> {
    for (id, stage) in open_stages(state) {
        let Ok(stage) = stage else { continue };
        if matches!(changes.stages.get(&id), Some(None)) {
            continue;
        }
        let stage = match changes.stages.get(&id) {
            Some(Some(edited)) => edited.clone(),
            _ => stage,
        };
        if stage.kvs.keys().any(|key| key.starts_with("region/")) {
            return Err(Error::Failed(format!(
                "{what} rewrites every region's assignment, and stage {} stages region \
                 values computed for the current `buckets`: promote or abort it first \
                 (nothing written)",
                shown(&id)
            )));
        }
    }
    Ok(())
}

/// The staged region values of every stage `changes` write, given the assignment their
/// promote will write (and, for a stage of the policy that changes N, every region).
fn assign_staged(
    state: &State,
    changes: &mut Changes,
    after_n: Option<BucketCount>,
) -> Result<(), Error> {
    let ids: Vec<String> = changes
        .stages
        .iter()
        .filter(|(_, stage)| stage.is_some())
        .map(|(id, _)| id.clone())
        .collect();
    for id in ids {
        let Some(Some(mut stage)) = changes.stages.get(&id).cloned() else {
            continue;
        };
        let staged_n = match stage.kvs.get(POLICY_KEY) {
            Some(Some(raw)) => {
                let policy = PolicyValue::from_stored(raw.as_bytes()).map_err(|error| {
                    Error::Failed(format!("staged policy/global is invalid: {error}"))
                })?;
                policy_buckets(&policy)?
            }
            _ => after_n,
        };
        let Some(n) = staged_n else { continue };
        let base_n = after_n.unwrap_or(n);
        if after_n.is_some_and(|current| current != n) {
            add_rescaled_regions(state, changes, &id, &mut stage)?;
        }
        let mut edited = false;
        let keys: Vec<String> = stage.kvs.keys().cloned().collect();
        for key in keys {
            let Some(geo) = key.strip_prefix("region/") else {
                continue;
            };
            let Some(Some(raw)) = stage.kvs.get(&key) else {
                continue;
            };
            let mut staged = RegionValue::from_stored(raw.as_bytes()).map_err(|error| {
                Error::Failed(format!("staged {} is invalid: {error}", shown(&key)))
            })?;
            if !assignable(&mut staged) {
                continue;
            }
            let current = match changes.regions.get(geo) {
                Some(written) => written.clone(),
                None => state.region(geo).and_then(Result::ok),
            };
            let next = next_assignment(current.as_ref().map(|value| (value, base_n)), &staged, n)
                .map_err(|error| in_region(geo, error))?;
            if set_assignment(&mut staged, &next) {
                stage.kvs.insert(
                    key.clone(),
                    Some(staged.encode(&crate::clock::now_rfc3339())),
                );
                edited = true;
            }
        }
        if edited {
            changes.stages.insert(id, Some(stage));
        }
    }
    Ok(())
}

/// A stage of `policy/global` that changes N stages every current region as well (each
/// rescaled by [`assign_staged`]), so that its cohort routes by the assignments its
/// promote will write; refused when another open stage stages a region.
fn add_rescaled_regions(
    state: &State,
    changes: &mut Changes,
    id: &str,
    stage: &mut Stage,
) -> Result<(), Error> {
    let others = State {
        stages: state
            .stages
            .iter()
            .filter(|(other, _)| other.as_str() != id)
            .map(|(other, entry)| (other.clone(), entry.clone()))
            .collect::<BTreeMap<_, _>>(),
        ..State::default()
    };
    refuse_with_staged_regions(&others, changes, "a stage of `buckets`")?;
    let mut added = 0usize;
    for (geo, current) in state.valid_regions() {
        let key = format!("region/{geo}");
        if stage.kvs.contains_key(&key) {
            continue;
        }
        let current = match changes.regions.get(&geo) {
            Some(Some(written)) => written.clone(),
            Some(None) => continue,
            None => current,
        };
        stage.kvs.insert(
            key.clone(),
            Some(current.encode(&crate::clock::now_rfc3339())),
        );
        stage
            .base
            .insert(key, key_revision(state, &format!("region/{geo}")));
        added += 1;
    }
    if added > 0 {
        changes.guard_regions = true;
        changes.notes.push(format!(
            "stage {}: changes `buckets`, so it stages {added} region(s) too, each with its \
             assignment rescaled for the staged N",
            shown(id)
        ));
        stage
            .check()
            .map_err(|e| Error::invalid("stage", e.to_string()))?;
    }
    Ok(())
}

fn in_region(geo: &str, error: Error) -> Error {
    match error {
        Error::Invalid(fields) => Error::Invalid(
            fields
                .into_iter()
                .map(|field| field.within(&format!("region/{geo}")))
                .collect(),
        ),
        other => other,
    }
}

fn routing_error(error: dw_routing::Error) -> Error {
    match error {
        dw_routing::Error::Region { field, reason }
        | dw_routing::Error::Policy { field, reason } => Error::invalid(field, reason),
        other => Error::Failed(other.to_string()),
    }
}

#[cfg(test)]
mod tests;
