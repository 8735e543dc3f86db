//! `dwctl rollback KEY --to-revision N`: a key put back to its value at a past revision,
//! planned like every other write of it. Which keys may be rolled back ([`RollbackKey::of`]:
//! routing keys and capacities; the records other commands own are refused with the
//! command to use instead), the past value checked as a value written today
//! ([`Rollback::new`]), and the change it makes on the state read ([`Rollback::plan`]).
//! dwctl's `ops::history` reads the past value and commits the plan.

use crate::capacity::{Capacity, Headroom};
use crate::drain::check_origin_name;
use crate::error::{Error, FieldError};
use crate::keys::Layout;
use crate::model::{Changes, State};
use crate::shown::Shown;
use crate::value::{PolicyValue, RegionValue};

/// A key `rollback` writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackKey {
    /// `region/<geo>`.
    Region(String),
    /// `policy/global`.
    Policy,
    /// `capacity/<origin>` (under the control prefix).
    Capacity(String),
    /// `capacity-headroom` (under the control prefix).
    Headroom,
}

impl RollbackKey {
    /// Which key `key` (a full key, [`Layout::resolve`]d) is; or, for any other key, why
    /// `rollback` does not write it and what to use instead (a usage error's message).
    /// Only routing keys and capacities are rolled back: they go through the planner,
    /// which keeps open stages and drain records in step. A record written verbatim around
    /// the planners (a stage, a drain record, a rollout's progress) would leave those out
    /// of step.
    pub fn of(layout: &Layout, key: &str) -> Result<RollbackKey, String> {
        if let Some(geo) = key.strip_prefix(&layout.regions()) {
            return Ok(RollbackKey::Region(geo.to_owned()));
        }
        if let Some(origin) = key.strip_prefix(&layout.capacities()) {
            return Ok(RollbackKey::Capacity(origin.to_owned()));
        }
        if key == layout.capacity_headroom() {
            return Ok(RollbackKey::Headroom);
        }
        if key == layout.policy() {
            return Ok(RollbackKey::Policy);
        }
        Err(refused(layout, key))
    }
}

/// Why `rollback` does not write `key`, and what to use instead.
fn refused(layout: &Layout, key: &str) -> String {
    let instead = if key.starts_with(&layout.stages()) {
        "a stage is changed with `dwctl stage widen`, `dwctl stage promote` or `dwctl stage \
         abort` (and made again with `dwctl stage create`)"
    } else if key.starts_with(&layout.drains()) {
        "a drain record is changed with `dwctl drain`, `dwctl restore` or `dwctl drain \
         --repair`"
    } else if key.starts_with(&layout.rollout("")) {
        "a rollout's progress is kept by `dwctl rollout` (`dwctl rollout resume ID` goes on, \
         `dwctl stage abort ID` ends it)"
    } else if key.starts_with(&layout.registrations()) || key.starts_with(&layout.origins()) {
        "an origin's registration is kept by `dwctl origin register`"
    } else {
        "write it with the command that owns it"
    };
    format!(
        "rollback writes routing keys (region/<geo> and policy/global) and capacities \
         (capacity/<origin>, capacity-headroom) only, through the same checks as every other \
         write; {} is not one: {instead}",
        Shown(key)
    )
}

/// The value a rollback writes: the key's value at the past revision, checked as a value
/// written today (`None`: the key did not exist then).
#[derive(Debug, Clone, PartialEq)]
enum PastValue {
    Region(String, Option<RegionValue>),
    Policy(Option<PolicyValue>),
    Capacity(String, Option<Capacity>),
    Headroom(Option<Headroom>),
}

/// A rollback of one key to its value at `revision`, ready to plan on the state read.
#[derive(Debug, Clone, PartialEq)]
pub struct Rollback {
    revision: i64,
    value: PastValue,
}

impl Rollback {
    /// The rollback of `key` to `past`, its value at `revision` (`None`: it did not exist
    /// then). A past value that no longer validates is refused with its errors said of
    /// that revision (`value at revision N.weight`). A capacity record is stamped with who
    /// rolls it back (`by`) and when (`at`), the reason naming the revision.
    pub fn new(
        key: RollbackKey,
        revision: i64,
        past: Option<&[u8]>,
        by: &str,
        at: &str,
    ) -> Result<Rollback, Error> {
        let at_revision = format!("value at revision {revision}");
        let invalid = |errors: Vec<FieldError>| {
            Error::Invalid(
                errors
                    .into_iter()
                    .map(|error| error.within(&at_revision))
                    .collect(),
            )
        };
        let reason = Some(format!("rollback to revision {revision}"));
        let value = match key {
            RollbackKey::Region(geo) => PastValue::Region(
                geo,
                past.map(RegionValue::for_write)
                    .transpose()
                    .map_err(invalid)?,
            ),
            RollbackKey::Policy => PastValue::Policy(
                past.map(PolicyValue::for_write)
                    .transpose()
                    .map_err(invalid)?,
            ),
            RollbackKey::Capacity(origin) => {
                check_origin_name("origin", &origin)?;
                let record = past
                    .map(|raw| Capacity::parse(&origin, raw))
                    .transpose()
                    .map_err(|error| invalid(vec![error]))?
                    .map(|record| Capacity {
                        by: by.to_owned(),
                        at: at.to_owned(),
                        reason: reason.clone(),
                        ..record
                    });
                PastValue::Capacity(origin, record)
            }
            RollbackKey::Headroom => PastValue::Headroom(
                past.map(Headroom::parse)
                    .transpose()
                    .map_err(|error| invalid(vec![error]))?
                    .map(|record| Headroom {
                        by: by.to_owned(),
                        at: at.to_owned(),
                        reason,
                        ..record
                    }),
            ),
        };
        Ok(Rollback { revision, value })
    }

    /// What the rollback changes on `state`: the past value written, or the key deleted
    /// when it did not exist then (nothing when it does not exist now either). The policy
    /// is never deleted: without it the readers' defaults apply, so a policy that did not
    /// exist at the revision is refused.
    pub fn plan(&self, state: &State) -> Result<Changes, Error> {
        let mut changes = Changes::default();
        match &self.value {
            PastValue::Region(geo, value) => {
                if value.is_some() || state.regions.contains_key(geo) {
                    changes.regions.insert(geo.clone(), value.clone());
                }
            }
            PastValue::Policy(Some(policy)) => changes.policy = Some(policy.clone()),
            PastValue::Policy(None) if state.policy.is_some() => {
                return Err(Error::Failed(format!(
                    "policy/global did not exist at revision {}, and dwctl never deletes it \
                     (without it the readers' defaults apply); write the policy you want \
                     with `dwctl policy set`",
                    self.revision
                )));
            }
            PastValue::Policy(None) => {}
            PastValue::Capacity(origin, record) => {
                if let Some(why) = &state.capacities_unreadable {
                    return Err(Error::Failed(why.clone()));
                }
                if record.is_some() || state.capacities.contains_key(origin) {
                    changes.capacities.insert(origin.clone(), record.clone());
                }
            }
            PastValue::Headroom(record) => {
                if let Some(why) = &state.capacities_unreadable {
                    return Err(Error::Failed(why.clone()));
                }
                if record.is_some() || state.headroom.is_some() {
                    changes.headroom = Some(record.clone());
                }
            }
        }
        Ok(changes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Entry;

    const DE: &[u8] = br#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":60,"b":40}}"#;
    const POLICY: &[u8] = br#"{"default":"DE"}"#;

    fn layout() -> Layout {
        Layout::new("/dw/routing/", "/dw/control/").unwrap()
    }

    fn entry(raw: &[u8]) -> Entry {
        Entry {
            raw: raw.to_vec(),
            mod_revision: 3,
        }
    }

    fn rollback(key: &str, past: Option<&[u8]>) -> Result<Rollback, Error> {
        let key = RollbackKey::of(&layout(), key).unwrap();
        Rollback::new(key, 7, past, "alice", "2026-01-01T00:00:00Z")
    }

    #[test]
    fn only_routing_keys_and_capacities_are_rolled_back() {
        let layout = layout();
        let of = |key: &str| RollbackKey::of(&layout, key);
        assert_eq!(
            of("/dw/routing/region/DE"),
            Ok(RollbackKey::Region("DE".into()))
        );
        assert_eq!(of("/dw/routing/policy/global"), Ok(RollbackKey::Policy));
        assert_eq!(
            of(&layout.capacity("fra-a")),
            Ok(RollbackKey::Capacity("fra-a".into()))
        );
        assert_eq!(of(&layout.capacity_headroom()), Ok(RollbackKey::Headroom));
        let refused = of(&layout.drain("fra-a")).unwrap_err();
        assert!(refused.contains("`dwctl drain --repair`"), "{refused}");
        let refused = of(&layout.stage("s1")).unwrap_err();
        assert!(refused.contains("`dwctl stage abort`"), "{refused}");
        let refused = of(&layout.rollout("r1")).unwrap_err();
        assert!(refused.contains("`dwctl rollout resume ID`"), "{refused}");
        let refused = of("/elsewhere/\u{1b}[2J").unwrap_err();
        assert!(
            refused.contains("\\u{1b}[2J is not one: write it with the command that owns it"),
            "{refused}"
        );
    }

    #[test]
    fn a_region_is_written_back_or_deleted_when_it_did_not_exist() {
        let mut state = State::default();
        let changes = rollback("/dw/routing/region/DE", Some(DE))
            .unwrap()
            .plan(&state)
            .unwrap();
        let value = changes.regions["DE"].as_ref().unwrap();
        assert_eq!(value.origins, ["a", "b"]);
        // Absent then, absent now: nothing to change.
        let absent = rollback("/dw/routing/region/DE", None).unwrap();
        assert!(absent.plan(&state).unwrap().is_empty());
        // Absent then, present now: deleted.
        state.regions.insert("DE".into(), entry(DE));
        assert_eq!(absent.plan(&state).unwrap().regions["DE"], None);
    }

    #[test]
    fn a_past_value_that_no_longer_validates_is_said_of_its_revision() {
        let error = rollback("/dw/routing/region/DE", Some(b"{\"shard\":1}")).unwrap_err();
        let Error::Invalid(fields) = error else {
            panic!("{error:?}")
        };
        assert!(
            fields
                .iter()
                .all(|field| field.field.starts_with("value at revision 7")),
            "{fields:?}"
        );
        let error = rollback(&layout().capacity("fra-a"), Some(b"nope")).unwrap_err();
        assert!(
            matches!(&error, Error::Invalid(fields) if fields[0].field.starts_with("value at revision 7")),
            "{error:?}"
        );
    }

    #[test]
    fn the_policy_is_written_back_but_never_deleted() {
        let mut state = State::default();
        let written = rollback("/dw/routing/policy/global", Some(POLICY))
            .unwrap()
            .plan(&state)
            .unwrap();
        assert!(written.policy.is_some());
        let absent = rollback("/dw/routing/policy/global", None).unwrap();
        assert!(absent.plan(&state).unwrap().is_empty());
        state.policy = Some(entry(POLICY));
        let refused = absent.plan(&state).unwrap_err().to_string();
        assert!(
            refused.contains("did not exist at revision 7, and dwctl never deletes it"),
            "{refused}"
        );
    }

    #[test]
    fn a_capacity_is_stamped_with_who_rolled_it_back() {
        let key = layout().capacity("fra-a");
        let past = br#"{"answers_per_s":500,"by":"bob","at":"2025-01-01T00:00:00Z"}"#;
        let mut state = State::default();
        let changes = rollback(&key, Some(past)).unwrap().plan(&state).unwrap();
        let record = changes.capacities["fra-a"].as_ref().unwrap();
        assert_eq!(record.answers_per_s, 500.0);
        assert_eq!(record.by, "alice");
        assert_eq!(record.reason.as_deref(), Some("rollback to revision 7"));
        // Absent then: deleted only when present now.
        let absent = rollback(&key, None).unwrap();
        assert!(absent.plan(&state).unwrap().is_empty());
        state.capacities.insert("fra-a".into(), entry(past));
        assert_eq!(absent.plan(&state).unwrap().capacities["fra-a"], None);
        // Capacities that cannot be read are not written over.
        state.capacities_unreadable = Some("capacity/x does not parse".into());
        assert_eq!(
            absent.plan(&state).unwrap_err(),
            Error::Failed("capacity/x does not parse".into())
        );
        // An origin name that is not one is refused before anything is planned.
        let error = Rollback::new(RollbackKey::Capacity(String::new()), 7, None, "a", "t");
        assert!(matches!(error, Err(Error::Invalid(_))), "{error:?}");
    }

    #[test]
    fn the_headroom_is_written_back_or_deleted() {
        let key = layout().capacity_headroom();
        let past = br#"{"headroom":0.7}"#;
        let mut state = State::default();
        let changes = rollback(&key, Some(past)).unwrap().plan(&state).unwrap();
        let record = changes.headroom.clone().flatten().unwrap();
        assert_eq!(record.by, "alice");
        let absent = rollback(&key, None).unwrap();
        assert!(absent.plan(&state).unwrap().is_empty());
        state.headroom = Some(entry(past));
        assert_eq!(absent.plan(&state).unwrap().headroom, Some(None));
    }
}
