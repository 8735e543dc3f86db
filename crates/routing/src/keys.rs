//! The etcd key layout, in one place for the agent, `dwctl` and the docs.
//!
//! The agents mirror the routing prefix ([`DEFAULT_PREFIX`]): `region/<geo>`,
//! `origin/<id>` and `policy/global` below it. `dwctl` keeps its own records (drains,
//! registered origins) under the control prefix, and the agents report under the nodes
//! prefix; both lie outside the routing prefix, so that no agent mirrors them.

/// The etcd prefix mirrored when a snapshot does not name one.
pub const DEFAULT_PREFIX: &str = "/dw/routing/";

/// Regions, below the routing prefix: `region/<geo>`.
pub const REGION: &str = "region/";

/// Registered origins, below the routing prefix: `origin/<id>` (on a lease).
pub const ORIGIN: &str = "origin/";

/// Staged changes, below the routing prefix: `stage/<id>` (see [`crate::stage`]). They lie
/// inside the prefix so that a node's published revision names the stages it applied too;
/// the agent applies them and never copies a stage key into a snapshot.
pub const STAGE: &str = "stage/";

/// A rollout's progress, below the control prefix: `rollouts/<id>` (outside the routing
/// prefix: recording a step makes no node republish).
pub const ROLLOUTS: &str = "rollouts/";

/// The global policy, below the routing prefix.
pub const POLICY: &str = "policy/global";

/// The default home of dwctl's own records, outside the routing prefix.
pub const DEFAULT_CONTROL_PREFIX: &str = "/dw/control/";

/// Drain records, below the control prefix: `drains/<origin>`.
pub const DRAINS: &str = "drains/";

/// Origins that registered once, below the control prefix: `registered/<origin>`.
pub const REGISTERED: &str = "registered/";

/// Where the agents report (`<nodes prefix><node id>`), outside the routing prefix.
pub const DEFAULT_NODES_PREFIX: &str = "/dw/nodes/";

/// `/dw/nodes/` → `/dw/nodes-seen/`: the home of last-seen records, next to (not inside)
/// the live reports, so that listing live reports does not list them.
pub fn seen_prefix(nodes_prefix: &str) -> String {
    format!("{}-seen/", nodes_prefix.trim_end_matches('/'))
}

/// The end of the etcd key range holding every key that starts with `prefix` (etcd's
/// rule: increment the last byte that is not 0xff and cut after it; all 0xff means "to
/// the end"). Here, pure, so that dwctl's planner (roles' grants) and `dw-etcd`'s reads
/// share it.
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_range_end_follows_etcd() {
        assert_eq!(prefix_range_end(b"/dw/routing/"), b"/dw/routing0");
        assert_eq!(prefix_range_end(b"a\xff"), b"b");
        assert_eq!(prefix_range_end(b"\xff\xff"), b"\0");
    }

    #[test]
    fn seen_records_lie_next_to_the_live_reports() {
        assert_eq!(seen_prefix(DEFAULT_NODES_PREFIX), "/dw/nodes-seen/");
        assert_eq!(seen_prefix("/a/b"), "/a/b-seen/");
        assert!(!seen_prefix(DEFAULT_NODES_PREFIX).starts_with(DEFAULT_NODES_PREFIX));
    }
}
