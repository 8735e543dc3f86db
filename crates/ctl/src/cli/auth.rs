//! `dwctl auth`'s flags and help.

use std::path::PathBuf;

use clap::Args;

/// The help below `dwctl auth --help`.
pub const AUTH_HELP: &str = "\
Roles (each with a user of the same name; keys under the prefixes given):
  dw-agent-<node>   read <prefix> (prefix); readwrite exactly <nodes-prefix><node> and its
                    seen record <nodes-prefix minus />-seen/<node>   (dw-agent --node-id <node>)
  dw-origin-<id>    readwrite exactly <prefix>origin/<id> and <control>registered/<id>
                    (dwctl origin register <id>)
  dw-rebalance      read <prefix>; readwrite region/, stage/, <control>drains/, registered/;
                    read <control>capacity/ and <control>capacity-headroom
  dw-health         read <prefix>; readwrite region/, stage/, <control>drains/;
                    read <control>capacity/ and <control>capacity-headroom
  dw-autopilot      dw-health's, and readwrite exactly <control>autopilot/leader and
                    <control>autopilot/status
  dw-operator       readwrite <prefix> and <control> (capacities too); read the node reports
  dw-viewer         read <prefix>, <control> and the node reports (status, history, route,
                    traffic, origin list)

A cluster whose roles were made before capacities existed: re-run `dwctl auth --apply` \
(health and rebalance then read the capacities; until then they drain without a prediction).

Without --apply it prints them and touches nothing (no etcd needed). With --apply, as a \
user who may change auth (root), it adds missing roles, grants and users, revokes every \
other grant of these roles and every other role of these users, and revokes the prefix \
grants these roles replace: a write grant on exactly the prefix <nodes-prefix>, its seen \
prefix or <prefix>origin/ in any other role (root excepted). A second run changes nothing. \
Each new user's password is random and written to <password-dir>/<user>.password (mode \
0600, created, never printed); an existing file is kept and its password used. Existing \
users keep their passwords. etcd auth itself is not turned on: `etcdctl auth enable`.

Examples:
  dwctl auth --nodes edge-fra-1,edge-fra-2 --origins fra-a,fra-b
  dwctl auth --nodes edge-fra-1 --origins fra-a --apply --dry-run
  dwctl --user root --password-file /root/etcd-root auth --nodes edge-fra-1 \\
      --origins fra-a --apply --password-dir /root/dw-passwords";

/// `dwctl auth`.
#[derive(Debug, Clone, Args)]
pub struct AuthArgs {
    /// Edge node ids (dw-agent --node-id), comma-separated or repeated: one role each.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub nodes: Vec<String>,
    /// Origin ids (dwctl origin register ID), comma-separated or repeated: one role each.
    #[arg(long, value_name = "ID", value_delimiter = ',')]
    pub origins: Vec<String>,
    /// Make etcd's roles and users match (needs a user that may change auth).
    #[arg(long)]
    pub apply: bool,
    /// With --apply: print what would change, change nothing.
    #[arg(long, requires = "apply")]
    pub dry_run: bool,
    /// Where --apply writes each new user's password (a directory only its owner may
    /// write). Needed when a user is to be created.
    #[arg(long, value_name = "DIR")]
    pub password_dir: Option<PathBuf>,
}
