//! The etcd roles of dw-router's components, as data, and the steps that make etcd's auth
//! match them (`dwctl auth`). Pure: no etcd, no files; dwctl's `ops/auth.rs` reads etcd's
//! roles into [`Current`] and carries out the [`Step`]s.
//!
//! Each component gets exactly what it reads and writes (checked against the code: the
//! agent's `report.rs` and `etcd.rs`, `origin.rs`, `rebalance.rs`, `health.rs`,
//! `state.rs`): a component that writes one key gets that key, not a prefix, so that an
//! edge node cannot touch another node's report and an origin cannot touch another
//! origin's key.

use std::collections::{BTreeMap, BTreeSet};

use dw_routing::keys::{DRAINS, ORIGIN, REGION, REGISTERED, STAGE, seen_prefix};

use crate::Error;
use crate::keys::Layout;

/// The most node ids, and the most origin ids, one run takes (each is a role and a user).
pub const MAX_NAMES: usize = 10_000;
/// The longest node or origin id, in bytes (the agent's `--node-id` limit).
pub const MAX_NAME_BYTES: usize = 128;

/// etcd's permission types, as its API numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Access {
    /// `read` (0).
    Read,
    /// `write` (1).
    Write,
    /// `readwrite` (2).
    ReadWrite,
}

impl Access {
    /// From etcd's number; an unknown one reads as `readwrite` (the widest, so never kept
    /// by mistake as a narrower grant).
    pub fn from_code(code: i32) -> Access {
        match code {
            0 => Access::Read,
            1 => Access::Write,
            _ => Access::ReadWrite,
        }
    }

    /// As etcdctl spells it.
    pub fn name(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::Write => "write",
            Access::ReadWrite => "readwrite",
        }
    }
}

/// One permission: a key (an empty `range_end`) or a range, as etcd stores it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Grant {
    /// The key, or the start of the range.
    pub key: Vec<u8>,
    /// The end of the range (exclusive); empty for one exact key.
    pub range_end: Vec<u8>,
    /// What it allows.
    pub access: Access,
}

impl Grant {
    /// Exactly `key`.
    pub fn exact(access: Access, key: &str) -> Grant {
        Grant {
            key: key.as_bytes().to_vec(),
            range_end: Vec::new(),
            access,
        }
    }

    /// Every key that starts with `prefix`.
    pub fn prefix(access: Access, prefix: &str) -> Grant {
        Grant {
            key: prefix.as_bytes().to_vec(),
            range_end: dw_routing::keys::prefix_range_end(prefix.as_bytes()),
            access,
        }
    }

    /// The same key range (whatever the access).
    pub fn same_range(&self, other: &Grant) -> bool {
        self.key == other.key && self.range_end == other.range_end
    }

    /// Whether it is the prefix grant of `prefix`.
    pub fn is_prefix_of(&self, prefix: &str) -> bool {
        self.same_range(&Grant::prefix(Access::Read, prefix))
    }

    /// `readwrite /dw/nodes/a` or `read /dw/routing/ (prefix)`.
    pub fn describe(&self) -> String {
        let key = String::from_utf8_lossy(&self.key);
        let range = if self.range_end.is_empty() {
            String::new()
        } else if self.range_end == dw_routing::keys::prefix_range_end(&self.key) {
            " (prefix)".to_owned()
        } else {
            format!(" (to {})", String::from_utf8_lossy(&self.range_end))
        };
        format!("{} {key}{range}", self.access.name())
    }
}

/// A role (and its user, of the same name) with what it may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleSpec {
    /// The role's name, and its user's.
    pub name: String,
    /// What runs with it.
    pub runs: String,
    /// Its permissions, sorted.
    pub grants: Vec<Grant>,
}

/// The roles and users etcd has now (only what the plan looks at).
#[derive(Debug, Clone, Default)]
pub struct Current {
    /// Every role with its permissions.
    pub roles: BTreeMap<String, Vec<Grant>>,
    /// Users, with their roles (those of the users a plan manages; other users may be
    /// listed without their roles).
    pub users: BTreeMap<String, Vec<String>>,
}

/// One change to etcd's auth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// `role add`.
    AddRole(String),
    /// `role grant-permission` (also changes the access of a grant on the same range).
    Grant(String, Grant),
    /// `role revoke-permission`, with why.
    Revoke(String, Grant, &'static str),
    /// `user add`, with a new password.
    AddUser(String),
    /// `user grant-role`.
    GrantRole(String, String),
    /// `user revoke-role`.
    RevokeRole(String, String),
}

impl Step {
    /// One line for the terminal (names are escaped by the caller's `Shown`).
    pub fn describe(&self) -> String {
        match self {
            Step::AddRole(role) => format!("add role {role}"),
            Step::Grant(role, grant) => format!("grant {role}: {}", grant.describe()),
            Step::Revoke(role, grant, why) => {
                format!("revoke {role}: {} ({why})", grant.describe())
            }
            Step::AddUser(user) => format!("add user {user} (new password to a file)"),
            Step::GrantRole(user, role) => format!("grant user {user} role {role}"),
            Step::RevokeRole(user, role) => format!("revoke user {user} role {role}"),
        }
    }
}

/// Checks a node or origin id for `dwctl auth`: 1 to [`MAX_NAME_BYTES`] bytes of letters,
/// digits, `.`, `_` and `-` (it names a role, a user and a password file).
pub fn check_name(flag: &str, name: &str) -> Result<(), Error> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(Error::Usage(format!(
            "{flag} {name:?} must be 1 to {MAX_NAME_BYTES} bytes long"
        )));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(Error::Usage(format!(
            "{flag} {name:?} contains {bad:?}: use letters, digits, '.', '_' and '-'"
        )));
    }
    Ok(())
}

fn check_names(flag: &str, names: &[String]) -> Result<BTreeSet<String>, Error> {
    if names.len() > MAX_NAMES {
        return Err(Error::Usage(format!(
            "{flag}: {} ids given, at most {MAX_NAMES} per run",
            names.len()
        )));
    }
    for name in names {
        check_name(flag, name)?;
    }
    Ok(names.iter().cloned().collect())
}

/// The roles of every component: one per node, one per origin, and the four shared ones.
pub fn wanted_roles(
    layout: &Layout,
    nodes: &[String],
    origins: &[String],
) -> Result<Vec<RoleSpec>, Error> {
    use Access::{Read, ReadWrite};
    let nodes = check_names("--nodes", nodes)?;
    let origins = check_names("--origins", origins)?;
    let seen = seen_prefix(&layout.nodes);
    let routing = || Grant::prefix(Read, &layout.prefix);
    let role = |name: String, runs: String, mut grants: Vec<Grant>| {
        grants.sort();
        RoleSpec { name, runs, grants }
    };
    let mut roles = Vec::new();
    for node in &nodes {
        roles.push(role(
            format!("dw-agent-{node}"),
            format!("dw-agent --node-id {node}"),
            vec![
                routing(),
                Grant::exact(ReadWrite, &format!("{}{node}", layout.nodes)),
                Grant::exact(ReadWrite, &format!("{seen}{node}")),
            ],
        ));
    }
    for origin in &origins {
        roles.push(role(
            format!("dw-origin-{origin}"),
            format!("dwctl origin register {origin}"),
            vec![
                Grant::exact(ReadWrite, &layout.origin(origin)),
                Grant::exact(ReadWrite, &layout.registration(origin)),
            ],
        ));
    }
    let automation = |registered: bool| {
        let mut grants = vec![
            routing(),
            Grant::prefix(ReadWrite, &format!("{}{REGION}", layout.prefix)),
            Grant::prefix(ReadWrite, &format!("{}{STAGE}", layout.prefix)),
            Grant::prefix(ReadWrite, &format!("{}{DRAINS}", layout.control)),
            // The capacities and the guard's headroom: read to predict (and record) the
            // load an automatic drain puts on the other origins; never written.
            Grant::prefix(Read, &layout.capacities()),
            Grant::exact(Read, &layout.capacity_headroom()),
        ];
        if registered {
            grants.push(Grant::prefix(
                ReadWrite,
                &format!("{}{REGISTERED}", layout.control),
            ));
        }
        grants
    };
    roles.push(role(
        "dw-rebalance".into(),
        "dwctl rebalance".into(),
        automation(true),
    ));
    roles.push(role(
        "dw-health".into(),
        "dwctl health".into(),
        automation(false),
    ));
    // The autopilot writes what health writes, its leader key and its status.
    let mut autopilot = automation(false);
    autopilot.push(Grant::exact(ReadWrite, &layout.autopilot_leader()));
    autopilot.push(Grant::exact(ReadWrite, &layout.autopilot_status()));
    roles.push(role(
        "dw-autopilot".into(),
        "dwctl autopilot".into(),
        autopilot,
    ));
    roles.push(role(
        "dw-operator".into(),
        "dwctl for people: every command but auth".into(),
        vec![
            Grant::prefix(ReadWrite, &layout.prefix),
            Grant::prefix(ReadWrite, &layout.control),
            Grant::prefix(Read, &layout.nodes),
            Grant::prefix(Read, &seen),
        ],
    ));
    roles.push(role(
        "dw-viewer".into(),
        "dwctl status, history, route, traffic, region get/list, origin list".into(),
        vec![
            routing(),
            Grant::prefix(Read, &layout.control),
            Grant::prefix(Read, &layout.nodes),
            Grant::prefix(Read, &seen),
        ],
    ));
    Ok(roles)
}

/// The prefixes whose write grants the exact-key roles replace: node reports, seen
/// records, origin keys.
pub fn replaced_prefixes(layout: &Layout) -> Vec<String> {
    vec![
        layout.nodes.clone(),
        seen_prefix(&layout.nodes),
        format!("{}{ORIGIN}", layout.prefix),
    ]
}

/// What makes `current` match `wanted`, in an order that never leaves a user with more
/// than its role allows: roles and grants first, then revocations, then users.
pub fn plan(wanted: &[RoleSpec], current: &Current, replaced: &[String]) -> Vec<Step> {
    let mut steps = Vec::new();
    let managed: BTreeSet<&str> = wanted.iter().map(|role| role.name.as_str()).collect();
    for role in wanted {
        let have = current.roles.get(&role.name);
        if have.is_none() {
            steps.push(Step::AddRole(role.name.clone()));
        }
        let have = have.map(Vec::as_slice).unwrap_or_default();
        for grant in &role.grants {
            if !have.contains(grant) {
                steps.push(Step::Grant(role.name.clone(), grant.clone()));
            }
        }
        for grant in have {
            // A grant on a wanted range with another access is replaced by the grant
            // above (etcd changes it in place), not revoked.
            if !role.grants.iter().any(|wanted| wanted.same_range(grant)) {
                steps.push(Step::Revoke(
                    role.name.clone(),
                    grant.clone(),
                    "not needed by this role",
                ));
            }
        }
    }
    for (name, grants) in &current.roles {
        if name == "root" || managed.contains(name.as_str()) {
            continue;
        }
        for grant in grants {
            let writes = grant.access != Access::Read;
            if writes && replaced.iter().any(|prefix| grant.is_prefix_of(prefix)) {
                steps.push(Step::Revoke(
                    name.clone(),
                    grant.clone(),
                    "a prefix grant the exact-key roles replace",
                ));
            }
        }
    }
    for role in wanted {
        match current.users.get(&role.name) {
            None => {
                steps.push(Step::AddUser(role.name.clone()));
                steps.push(Step::GrantRole(role.name.clone(), role.name.clone()));
            }
            Some(roles) => {
                if !roles.contains(&role.name) {
                    steps.push(Step::GrantRole(role.name.clone(), role.name.clone()));
                }
                for other in roles.iter().filter(|other| **other != role.name) {
                    steps.push(Step::RevokeRole(role.name.clone(), other.clone()));
                }
            }
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> Layout {
        Layout::new("/dw/routing/", "/dw/control/").unwrap()
    }

    #[test]
    fn an_agent_gets_exactly_its_two_keys() {
        let roles = wanted_roles(&layout(), &["a".into()], &[]).unwrap();
        let agent = &roles[0];
        assert_eq!(agent.name, "dw-agent-a");
        let described: Vec<String> = agent.grants.iter().map(Grant::describe).collect();
        assert_eq!(
            described,
            [
                "readwrite /dw/nodes-seen/a",
                "readwrite /dw/nodes/a",
                "read /dw/routing/ (prefix)"
            ]
        );
    }

    #[test]
    fn automation_reads_the_capacities_and_only_the_operator_writes_them() {
        let roles = wanted_roles(&layout(), &[], &[]).unwrap();
        let role = |name: &str| roles.iter().find(|role| role.name == name).unwrap();
        for name in ["dw-health", "dw-rebalance"] {
            let described: Vec<String> = role(name).grants.iter().map(Grant::describe).collect();
            assert!(
                described.contains(&"read /dw/control/capacity/ (prefix)".to_string())
                    && described.contains(&"read /dw/control/capacity-headroom".to_string()),
                "{name}: {described:?}"
            );
            assert!(
                !described
                    .iter()
                    .any(|grant| grant.contains("capacity") && grant.starts_with("readwrite"))
            );
        }
        let operator: Vec<String> = role("dw-operator")
            .grants
            .iter()
            .map(Grant::describe)
            .collect();
        assert!(operator.contains(&"readwrite /dw/control/ (prefix)".to_string()));
        let viewer: Vec<String> = role("dw-viewer")
            .grants
            .iter()
            .map(Grant::describe)
            .collect();
        assert!(viewer.contains(&"read /dw/control/ (prefix)".to_string()));
    }

    #[test]
    fn names_are_checked_at_their_limits() {
        let long = "x".repeat(MAX_NAME_BYTES);
        assert!(wanted_roles(&layout(), std::slice::from_ref(&long), &[]).is_ok());
        let longer = format!("{long}x");
        assert!(wanted_roles(&layout(), &[], &[longer]).is_err());
        assert!(wanted_roles(&layout(), &["a/b".into()], &[]).is_err());
        assert!(wanted_roles(&layout(), &["".into()], &[]).is_err());
        let many: Vec<String> = (0..MAX_NAMES).map(|i| format!("n{i}")).collect();
        assert_eq!(
            wanted_roles(&layout(), &many, &[]).unwrap().len(),
            MAX_NAMES + 5
        );
        let too_many: Vec<String> = (0..=MAX_NAMES).map(|i| format!("n{i}")).collect();
        let refused = wanted_roles(&layout(), &too_many, &[]).unwrap_err();
        assert!(refused.to_string().contains("at most 10000"), "{refused}");
    }

    #[test]
    fn a_plan_of_what_exists_is_empty_and_extra_grants_are_revoked() {
        let layout = layout();
        let wanted = wanted_roles(&layout, &["a".into()], &["o".into()]).unwrap();
        let replaced = replaced_prefixes(&layout);
        let mut current = Current::default();
        for role in &wanted {
            current.roles.insert(role.name.clone(), role.grants.clone());
            current
                .users
                .insert(role.name.clone(), vec![role.name.clone()]);
        }
        current.roles.insert(
            "root".into(),
            vec![Grant::prefix(Access::ReadWrite, "/dw/nodes/")],
        );
        assert_eq!(plan(&wanted, &current, &replaced), []);

        let legacy = Grant::prefix(Access::ReadWrite, "/dw/nodes/");
        let wide = Grant::prefix(Access::ReadWrite, "/dw/");
        current
            .roles
            .insert("edge".into(), vec![legacy.clone(), wide.clone()]);
        current
            .roles
            .get_mut("dw-agent-a")
            .unwrap()
            .push(legacy.clone());
        current
            .users
            .get_mut("dw-origin-o")
            .unwrap()
            .push("edge".into());
        let steps = plan(&wanted, &current, &replaced);
        assert_eq!(
            steps,
            [
                Step::Revoke(
                    "dw-agent-a".into(),
                    legacy.clone(),
                    "not needed by this role"
                ),
                Step::Revoke(
                    "edge".into(),
                    legacy,
                    "a prefix grant the exact-key roles replace"
                ),
                Step::RevokeRole("dw-origin-o".into(), "edge".into()),
            ]
        );
    }
}
