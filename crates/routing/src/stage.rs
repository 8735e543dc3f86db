//! Staged routing changes: the cohort function and the overlay rule, in one place for the
//! agent (which applies them), `dwctl` (which shows and gates on them), and the tests and
//! the chaos checker (which recompute them). docs/routing.md ("Stages") is the
//! specification; php/Cohort.php's `DwCohort::point()` computes the same point.
//!
//! A stage is one key, `<prefix>stage/<id>`, whose value is a JSON document ([`Stage`]):
//! the staged values of some `region/<geo>` keys and of `policy/global` (a value, or `null`
//! for "absent"), the cohort of nodes that serve them, the revisions of the keys they were
//! made from, and who made it, when and why. A node in the cohort routes from the current
//! values with the stage's values in their place ([`overlay`]); every other node routes
//! from the current values alone.
//!
//! The rules, all of them here:
//! - A node's point in a stage is `xxh3_64(stage_id . "\0" . node_id) % 10000`
//!   ([`cohort_point`]); a cohort of `points` P holds the nodes whose point is below P, so
//!   that a larger cohort holds every node of a smaller one and a node keeps its
//!   membership across restarts. A cohort may also name nodes, and labels (a node is in
//!   when it carries every one); the three are a union.
//! - At most one open stage may touch a key. Should two touch the same key anyway (written
//!   around dwctl), neither stage's value of that key applies anywhere: the key routes from
//!   its current value on every node, and the overlay names the conflict.
//! - A stage value that cannot be read applies nowhere (named in [`Overlay::problems`]).
//! - Stage keys themselves never reach the routers: the effective snapshot holds the
//!   routing keys only, and names the stages applied in [`Snapshot::stages`].
//!
//! ```
//! use std::collections::BTreeMap;
//! use dw_routing::{Snapshot, stage::{self, Node}};
//!
//! let mut current = Snapshot::new(40, "/dw/routing/");
//! current.kvs.insert("/dw/routing/region/DE".into(), r#"{"shard":"eu-1","origins":["fra-a"]}"#.into());
//! current.kvs.insert(
//!     "/dw/routing/stage/de-move".into(),
//!     r#"{"schema":1,"id":"de-move","cohort":{"nodes":["edge-7"]},
//!         "kvs":{"region/DE":"{\"shard\":\"eu-2\",\"origins\":[\"ams-a\"]}"}}"#.into(),
//! );
//! let revisions = BTreeMap::from([("/dw/routing/stage/de-move".to_string(), 39)]);
//! let labels = BTreeMap::new();
//!
//! let mine = stage::overlay(&current, &revisions, Some(&Node { id: "edge-7", labels: &labels }));
//! assert!(mine.snapshot.kvs["/dw/routing/region/DE"].contains("eu-2"));
//! assert_eq!(mine.snapshot.stages[0].id, "de-move");
//! assert!(!mine.snapshot.kvs.contains_key("/dw/routing/stage/de-move"));
//!
//! let other = stage::overlay(&current, &revisions, Some(&Node { id: "edge-8", labels: &labels }));
//! assert!(other.snapshot.kvs["/dw/routing/region/DE"].contains("eu-1"));
//! assert!(other.snapshot.stages.is_empty());
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use xxhash_rust::xxh3::xxh3_64;

use crate::keys::{POLICY, REGION, STAGE};
pub use crate::snapshot::AppliedStage;
use crate::{Error, Snapshot, quoted};

/// The stage record's schema version; a reader refuses any other.
pub const STAGE_SCHEMA: u64 = 1;

/// The number of points a node's cohort position is taken modulo: a cohort of 1 % is 100
/// points.
pub const COHORT_POINTS: u16 = 10_000;

/// The most keys one stage may stage (each is a whole region value in the stage key, and
/// etcd's request limit applies to the stage key as a whole).
pub const MAX_STAGED_KEYS: usize = 10_000;

/// The most nodes a cohort may name, and the most labels it may match on.
pub const MAX_COHORT_NODES: usize = 1_000;

/// The longest stage id: `[a-z0-9]` then up to 62 of `[a-z0-9._-]`.
pub const MAX_STAGE_ID_BYTES: usize = 63;

/// A node as the cohort function sees it: its id and its labels.
#[derive(Debug, Clone, Copy)]
pub struct Node<'a> {
    /// The node id (dw-agent's `--node-id`).
    pub id: &'a str,
    /// The node's labels (dw-agent's `--labels`).
    pub labels: &'a BTreeMap<String, String>,
}

/// A node's point in a stage: `xxh3_64(stage_id . "\0" . node_id) % 10000`.
pub fn cohort_point(stage_id: &str, node_id: &str) -> u16 {
    let mut input = Vec::with_capacity(stage_id.len() + 1 + node_id.len());
    input.extend_from_slice(stage_id.as_bytes());
    input.push(0);
    input.extend_from_slice(node_id.as_bytes());
    (xxh3_64(&input) % u64::from(COHORT_POINTS)) as u16
}

/// Which nodes serve a stage: the union of a share of the fleet, named nodes and labels.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cohort {
    /// Nodes whose [`cohort_point`] is below this (0 to 10000: percent × 100).
    #[serde(default)]
    pub points: u16,
    /// Nodes named by id.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub nodes: BTreeSet<String>,
    /// Nodes carrying every one of these labels (empty: no node by label).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

impl Cohort {
    /// Whether `node` serves stage `stage_id` with this cohort.
    pub fn contains(&self, stage_id: &str, node: &Node<'_>) -> bool {
        (self.points > 0 && cohort_point(stage_id, node.id) < self.points)
            || self.nodes.contains(node.id)
            || (!self.labels.is_empty()
                && self
                    .labels
                    .iter()
                    .all(|(key, value)| node.labels.get(key) == Some(value)))
    }

    /// Whether every node of `self` is also in `wider` (so that widening never drops a
    /// node that already serves the stage).
    pub fn is_within(&self, wider: &Cohort) -> bool {
        self.points <= wider.points
            && self.nodes.is_subset(&wider.nodes)
            && (self.labels.is_empty() || self.labels == wider.labels)
    }

    /// Checks the limits: points at most 10000, at most [`MAX_COHORT_NODES`] nodes and
    /// labels.
    pub fn check(&self) -> Result<(), Error> {
        if self.points > COHORT_POINTS {
            return Err(stage_error(format!(
                "cohort points {} is above {COHORT_POINTS} (100 %)",
                self.points
            )));
        }
        if self.nodes.len() > MAX_COHORT_NODES || self.labels.len() > MAX_COHORT_NODES {
            return Err(stage_error(format!(
                "a cohort names at most {MAX_COHORT_NODES} nodes and {MAX_COHORT_NODES} labels"
            )));
        }
        Ok(())
    }
}

/// One stage, as its key holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// Always [`STAGE_SCHEMA`].
    pub schema: u64,
    /// The stage id; the key is `<prefix>stage/<id>`.
    pub id: String,
    /// Who serves it.
    pub cohort: Cohort,
    /// The staged keys, relative to the prefix (`region/DE`, `policy/global`), each with its
    /// staged value, or `None` for "absent on the cohort".
    pub kvs: BTreeMap<String, Option<String>>,
    /// The `mod_revision` of each staged key when the stage was made (0: the key did not
    /// exist), for promote's guard. A drain that edits the stage records its own revision.
    #[serde(default)]
    pub base: BTreeMap<String, i64>,
    /// Who made it (user@host).
    #[serde(default)]
    pub created_by: String,
    /// When it was made (RFC 3339).
    #[serde(default)]
    pub created_at: String,
    /// Why.
    #[serde(default)]
    pub reason: String,
}

impl Stage {
    /// Reads a stage value. `key_id` is the id its key names: the two must agree.
    pub fn parse(key_id: &str, value: &str) -> Result<Stage, Error> {
        let stage: Stage = serde_json::from_str(value)
            .map_err(|e| stage_error(format!("not a stage record: {e}")))?;
        if stage.schema != STAGE_SCHEMA {
            return Err(stage_error(format!(
                "schema {} is not {STAGE_SCHEMA}",
                stage.schema
            )));
        }
        if stage.id != key_id {
            return Err(stage_error(format!(
                "the record names stage {:?}, its key names {:?}",
                quoted(&stage.id),
                quoted(key_id)
            )));
        }
        stage.check()?;
        Ok(stage)
    }

    /// Checks the id, the cohort and the staged keys (only `region/<geo>` and
    /// `policy/global` may be staged, at most [`MAX_STAGED_KEYS`], at least one).
    pub fn check(&self) -> Result<(), Error> {
        check_stage_id(&self.id)?;
        self.cohort.check()?;
        if self.kvs.is_empty() {
            return Err(stage_error("a stage stages at least one key".into()));
        }
        if self.kvs.len() > MAX_STAGED_KEYS {
            return Err(stage_error(format!(
                "a stage stages at most {MAX_STAGED_KEYS} keys, this one {}",
                self.kvs.len()
            )));
        }
        for key in self.kvs.keys() {
            if !is_stageable(key) {
                return Err(stage_error(format!(
                    "{:?} cannot be staged: only region/<geo> and policy/global can",
                    quoted(key)
                )));
            }
        }
        Ok(())
    }

    /// The record as its key holds it (compact JSON).
    pub fn to_json(&self) -> String {
        // Serialising strings, maps and integers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Whether `key` (relative to the prefix) is one a stage may hold.
pub fn is_stageable(key: &str) -> bool {
    key == POLICY || key.strip_prefix(REGION).is_some_and(|geo| !geo.is_empty())
}

/// Checks a stage id: `[a-z0-9]` then up to 62 of `[a-z0-9._-]`.
pub fn check_stage_id(id: &str) -> Result<(), Error> {
    let bytes = id.as_bytes();
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_STAGE_ID_BYTES
        && (bytes[0].is_ascii_lowercase() || bytes[0].is_ascii_digit())
        && bytes.iter().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(stage_error(format!(
            "stage id {:?} must be 1 to {MAX_STAGE_ID_BYTES} of a-z, 0-9, '.', '_', '-', \
             starting with a letter or digit",
            quoted(id)
        )))
    }
}

/// What [`overlay`] made of one node's view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlay {
    /// The effective snapshot: the routing keys with the node's stages in place, no stage
    /// key, and [`Snapshot::stages`] naming the stages applied.
    pub snapshot: Snapshot,
    /// Stage keys that apply nowhere or only in part, with why (unreadable, or a key two
    /// stages touch).
    pub problems: Vec<(String, String)>,
}

/// The open stages of a snapshot (its `<prefix>stage/` keys), read, in id order; a stage
/// that cannot be read is returned as an error beside its key.
pub fn open_stages(snapshot: &Snapshot) -> Vec<(String, Result<Stage, Error>)> {
    let start = format!("{}{STAGE}", snapshot.prefix);
    snapshot
        .kvs
        .range(start.clone()..)
        .take_while(|(key, _)| key.starts_with(&start))
        .map(|(key, value)| (key.clone(), Stage::parse(&key[start.len()..], value)))
        .collect()
}

/// The overlay rule: what `node` routes from, given the current keys in `current` (stage
/// keys included) and each stage key's `mod_revision` in `stage_revisions`. `None` for a
/// node with no id: it is in no cohort. The result's revision and cluster id are
/// `current`'s.
pub fn overlay(
    current: &Snapshot,
    stage_revisions: &BTreeMap<String, u64>,
    node: Option<&Node<'_>>,
) -> Overlay {
    let stage_start = format!("{}{STAGE}", current.prefix);
    let mut problems = Vec::new();
    let mut stages = Vec::new();
    for (key, stage) in open_stages(current) {
        match stage {
            Ok(stage) => stages.push((key, stage)),
            Err(e) => problems.push((key, format!("{e}; the stage applies nowhere"))),
        }
    }
    // Keys two or more stages touch apply from neither, on every node.
    let mut touched: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (_, stage) in &stages {
        for key in stage.kvs.keys() {
            touched.entry(key).or_default().push(&stage.id);
        }
    }
    let contested: BTreeSet<&str> = touched
        .iter()
        .filter(|(_, ids)| ids.len() > 1)
        .map(|(key, _)| *key)
        .collect();
    for key in &contested {
        problems.push((
            format!("{}{key}", current.prefix),
            format!(
                "staged by {} stages ({}); routes from its current value everywhere",
                touched[key].len(),
                touched[key].join(", ")
            ),
        ));
    }

    let mut snapshot = Snapshot {
        revision: current.revision,
        prefix: current.prefix.clone(),
        cluster_id: current.cluster_id.clone(),
        kvs: current
            .kvs
            .iter()
            .filter(|(key, _)| !key.starts_with(&stage_start))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        stages: Vec::new(),
    };
    let Some(node) = node else {
        return Overlay { snapshot, problems };
    };
    for (key, stage) in &stages {
        if !stage.cohort.contains(&stage.id, node) {
            continue;
        }
        for (relative, value) in &stage.kvs {
            if contested.contains(relative.as_str()) {
                continue;
            }
            let full = format!("{}{relative}", current.prefix);
            match value {
                Some(value) => {
                    snapshot.kvs.insert(full, value.clone());
                }
                None => {
                    snapshot.kvs.remove(&full);
                }
            }
        }
        snapshot.stages.push(AppliedStage {
            id: stage.id.clone(),
            revision: stage_revisions.get(key).copied().unwrap_or(0),
        });
    }
    Overlay { snapshot, problems }
}

fn stage_error(reason: String) -> Error {
    Error::Stage(reason)
}
