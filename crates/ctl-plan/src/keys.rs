//! Where dwctl's keys live: the prefixes given on the command line, and the key of each
//! kind of record under them (the kinds themselves are spelled in `dw_routing::keys`).

pub use dw_routing::keys::{DEFAULT_CONTROL_PREFIX, DEFAULT_NODES_PREFIX};
use dw_routing::keys::{DRAINS, ORIGIN, POLICY, REGION, REGISTERED, ROLLOUTS, STAGE};

use crate::Error;

/// What etcd's `--max-request-bytes` is by default (1.5 MiB): dwctl's default for its own
/// `--max-request-bytes`, since a client cannot read the server's setting.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1536 * 1024;

/// Audit records under the control prefix.
const AUDIT: &str = "audit/";
/// Origin capacities, below the control prefix: `capacity/<origin>`.
pub const CAPACITY: &str = "capacity/";
/// The capacity guard's headroom, below the control prefix (one key, beside `capacity/`).
pub const CAPACITY_HEADROOM: &str = "capacity-headroom";
/// Stage audit records, below the control prefix: `stages/<id>`.
pub const STAGE_AUDIT: &str = "stages/";

/// The key layout: the agents' prefix (regions, policy, origins) and dwctl's control
/// prefix (drain records, registered origins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub prefix: String,
    pub control: String,
    /// Node reports (`/dw/nodes/`), outside `prefix`.
    pub nodes: String,
    /// The largest transaction dwctl sends (`--max-request-bytes`): every write is
    /// checked against it before it is sent.
    pub max_request_bytes: usize,
}

impl Layout {
    /// Both prefixes, each ending in exactly one `/`.
    pub fn new(prefix: &str, control: &str) -> Result<Layout, Error> {
        let normalise = |flag: &str, value: &str| {
            if value.is_empty() {
                return Err(Error::Usage(format!("{flag} must not be empty")));
            }
            Ok(format!("{}/", value.trim_end_matches('/')))
        };
        let layout = Layout {
            prefix: normalise("--prefix", prefix)?,
            control: normalise("--control-prefix", control)?,
            nodes: DEFAULT_NODES_PREFIX.to_owned(),
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
        };
        if layout.prefix.starts_with(&layout.control) || layout.control.starts_with(&layout.prefix)
        {
            return Err(Error::Usage(
                "--control-prefix must lie outside --prefix, or every agent would mirror dwctl's records".into(),
            ));
        }
        Ok(layout)
    }

    /// The same layout with node reports under `nodes`, which must lie outside the prefix.
    pub fn with_nodes(mut self, nodes: &str) -> Result<Layout, Error> {
        if nodes.is_empty() {
            return Err(Error::Usage("--nodes-prefix must not be empty".into()));
        }
        let nodes = format!("{}/", nodes.trim_end_matches('/'));
        if nodes.starts_with(&self.prefix) || self.prefix.starts_with(&nodes) {
            return Err(Error::Usage(
                "--nodes-prefix must lie outside --prefix".into(),
            ));
        }
        self.nodes = nodes;
        Ok(self)
    }

    /// The same layout with writes bounded by `bytes` (`--max-request-bytes`).
    pub fn with_max_request_bytes(mut self, bytes: usize) -> Layout {
        self.max_request_bytes = bytes;
        self
    }

    pub fn regions(&self) -> String {
        format!("{}{REGION}", self.prefix)
    }
    pub fn region(&self, geo: &str) -> String {
        format!("{}{REGION}{geo}", self.prefix)
    }
    pub fn policy(&self) -> String {
        format!("{}{POLICY}", self.prefix)
    }
    pub fn origins(&self) -> String {
        format!("{}{ORIGIN}", self.prefix)
    }
    pub fn origin(&self, id: &str) -> String {
        format!("{}{ORIGIN}{id}", self.prefix)
    }
    pub fn drains(&self) -> String {
        format!("{}{DRAINS}", self.control)
    }
    pub fn drain(&self, origin: &str) -> String {
        format!("{}{DRAINS}{origin}", self.control)
    }
    /// Audit records (drain repairs; stage actions later), beside the drain records.
    pub fn audits(&self) -> String {
        format!("{}{AUDIT}", self.control)
    }
    pub fn stages(&self) -> String {
        format!("{}{STAGE}", self.prefix)
    }
    pub fn stage(&self, id: &str) -> String {
        format!("{}{STAGE}{id}", self.prefix)
    }
    /// The audit record of stage `id`'s actions, beside the drain records (each action
    /// rewrites it, so `dwctl history` lists them all).
    pub fn stage_audit(&self, id: &str) -> String {
        format!("{}{STAGE_AUDIT}{id}", self.control)
    }
    pub fn rollout(&self, id: &str) -> String {
        format!("{}{ROLLOUTS}{id}", self.control)
    }
    pub fn registrations(&self) -> String {
        format!("{}{REGISTERED}", self.control)
    }
    pub fn registration(&self, origin: &str) -> String {
        format!("{}{REGISTERED}{origin}", self.control)
    }

    /// Origin capacities (`<control>capacity/`), never under the agents' prefix.
    pub fn capacities(&self) -> String {
        format!("{}{CAPACITY}", self.control)
    }
    pub fn capacity(&self, origin: &str) -> String {
        format!("{}{CAPACITY}{origin}", self.control)
    }
    /// The autopilot's leader key (`dwctl autopilot`'s election, docs/autopilot.md).
    pub fn autopilot_leader(&self) -> String {
        format!("{}autopilot/leader", self.control)
    }

    /// The leading autopilot's status (what it holds, `autopilot::status`), on its lease.
    pub fn autopilot_status(&self) -> String {
        format!("{}autopilot/status", self.control)
    }
    pub fn capacity_headroom(&self) -> String {
        format!("{}{CAPACITY_HEADROOM}", self.control)
    }

    /// A key named on the command line: absolute when it starts with `/`; `capacity/<origin>`
    /// and `capacity-headroom` relative to the control prefix (they live there only);
    /// anything else relative to the prefix (`region/DE`).
    pub fn resolve(&self, key: &str) -> String {
        if key.starts_with('/') {
            key.to_string()
        } else if key.starts_with(CAPACITY) || key == CAPACITY_HEADROOM {
            format!("{}{key}", self.control)
        } else {
            format!("{}{key}", self.prefix)
        }
    }
}

/// `key` without `prefix`, when it is valid UTF-8 and starts with it.
pub fn strip<'a>(key: &'a [u8], prefix: &str) -> Option<&'a str> {
    std::str::from_utf8(key).ok()?.strip_prefix(prefix)
}
