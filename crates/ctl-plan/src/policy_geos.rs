//! The geos a policy names (`default`, `failover`) that no region key serves: `apply` and
//! `policy set` say so in a note, because every country without a key of its own would
//! then get the next geo of the list, and past the last one the readers' fail-open route
//! (`dw_router.fallback_shard` / `dw_router.fallback_origin`). A warning, not a refusal:
//! the keys may legitimately come in a later change (docs/dwctl.md, "apply").

use crate::model::{Changes, State};
use crate::value::PolicyValue;

/// The policy's geos, `default` first then `failover` in order, with the defaults of
/// `dw_routing::Policy` where a field is absent.
fn policy_geos(policy: Option<&PolicyValue>) -> Vec<String> {
    let defaults = dw_routing::Policy::default();
    let field = |name: &str| policy.and_then(|policy| policy.fields.get(name));
    let default = field("default")
        .and_then(|value| value.as_str())
        .map_or(defaults.default, str::to_owned);
    let failover = field("failover")
        .and_then(|value| value.as_array())
        .map(|geos| {
            geos.iter()
                .filter_map(|geo| geo.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or(defaults.failover);
    std::iter::once(default).chain(failover).collect()
}

/// The note for the policy in force after `changes` are applied to `state`, when a geo it
/// names has no valid region key then; `None` when every one has.
pub fn unkeyed_policy_geos_note(state: &State, changes: &Changes) -> Option<String> {
    let stored = state
        .policy
        .as_ref()
        .and_then(|entry| PolicyValue::from_stored(&entry.raw).ok());
    let policy = changes.policy.as_ref().or(stored.as_ref());
    let has_key = |geo: &str| match changes.regions.get(geo) {
        Some(change) => change.is_some(),
        None => matches!(state.region(geo), Some(Ok(_))),
    };
    unkeyed_note(&policy_geos(policy), has_key)
}

/// The note for `geos` (default first) given which have a key.
fn unkeyed_note(geos: &[String], has_key: impl Fn(&str) -> bool) -> Option<String> {
    let missing: Vec<String> = geos
        .iter()
        .enumerate()
        .filter(|(_, geo)| !has_key(geo))
        .map(|(index, geo)| {
            let role = if index == 0 { "default" } else { "failover" };
            format!("{role} {geo}")
        })
        .collect();
    if missing.is_empty() {
        return None;
    }
    let consequence = if missing.len() == geos.len() {
        "none of them has one, so a country without a key of its own gets the readers' \
         fail-open route (dw_router.fallback_shard, dw_router.fallback_origin)"
    } else {
        "a country without a key of its own gets the first of them that has one"
    };
    Some(format!(
        "warning: the policy names geos with no region key: {}; {consequence}",
        missing.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn geos(list: &[&str]) -> Vec<String> {
        list.iter().map(|geo| geo.to_string()).collect()
    }

    #[test]
    fn names_each_missing_geo_and_says_when_all_fail_open() {
        let keyed = |geo: &str| geo == "US";
        assert_eq!(
            unkeyed_note(&geos(&["US", "GB"]), keyed).as_deref(),
            Some(
                "warning: the policy names geos with no region key: failover GB; a country \
             without a key of its own gets the first of them that has one"
            )
        );
        let note = unkeyed_note(&geos(&["DE", "GB"]), keyed).expect("both missing");
        assert!(
            note.contains("default DE, failover GB; none of them"),
            "{note}"
        );
        assert!(note.contains("fail-open"), "{note}");
        assert_eq!(unkeyed_note(&geos(&["US"]), keyed), None);
        assert_eq!(
            unkeyed_note(&geos(&["continent/EU"]), |g| g == "continent/EU"),
            None
        );
    }

    #[test]
    fn absent_fields_take_the_readers_defaults() {
        assert_eq!(policy_geos(None), geos(&["US"]));
        let policy = PolicyValue::for_write(br#"{"failover":["GB"]}"#).expect("valid");
        assert_eq!(policy_geos(Some(&policy)), geos(&["US", "GB"]));
        let policy =
            PolicyValue::for_write(br#"{"default":"DE","failover":["GB","US"]}"#).expect("valid");
        assert_eq!(policy_geos(Some(&policy)), geos(&["DE", "GB", "US"]));
    }
}
