//! Reading the routing state at one revision, and writing changes to it in one guarded
//! transaction, retried on conflict.
//!
//! Every mutating command follows the same cycle: [`read_state`] takes regions, policy and
//! drain records in one read-only transaction (one revision, each key's `mod_revision` from
//! that same response); a pure plan function turns that state into [`Changes`]; [`commit`]
//! writes them in one transaction whose guards compare every written key to the revision
//! that was read (`create_revision == 0` for a key that did not exist). A concurrent writer
//! fails the guards and [`transact`] starts over from a fresh read, after a jittered,
//! growing pause, a bounded number of times.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse};

use crate::error::{Error, FieldError};
use crate::etcd::{Layout, strip};
use crate::record::DrainRecord;
use crate::stages::{StageEdits, reconcile_stages};
use crate::value::{PolicyValue, RegionValue};
use dw_routing::stage::Stage;

/// A key's raw value and the revision it was last modified at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The value as stored.
    pub raw: Vec<u8>,
    /// The revision of its last change (what a guarded write compares).
    pub mod_revision: i64,
}

impl Entry {
    fn from_kv(kv: &KeyValue) -> Entry {
        Entry {
            raw: kv.value().to_vec(),
            mod_revision: kv.mod_revision(),
        }
    }
}

/// Regions, policy and drain records as of one etcd revision.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// The revision everything was read at.
    pub revision: i64,
    /// geo → value. Keys whose geo is not UTF-8 are left out: no command can name them.
    pub regions: BTreeMap<String, Entry>,
    /// `policy/global`, when it exists.
    pub policy: Option<Entry>,
    /// origin → drain record.
    pub drains: BTreeMap<String, Entry>,
    /// stage id → the stage key (`<prefix>stage/<id>`).
    pub stages: BTreeMap<String, Entry>,
}

impl State {
    /// The region's value, if the key exists: `Err` when the readers would reject it.
    pub fn region(&self, geo: &str) -> Option<Result<RegionValue, FieldError>> {
        self.regions
            .get(geo)
            .map(|entry| RegionValue::from_stored(&entry.raw))
    }

    /// The valid regions, by geo.
    pub fn valid_regions(&self) -> BTreeMap<String, RegionValue> {
        self.regions
            .iter()
            .filter_map(|(geo, entry)| {
                RegionValue::from_stored(&entry.raw)
                    .ok()
                    .map(|value| (geo.clone(), value))
            })
            .collect()
    }

    /// The policy's value, if the key exists: `Err` when the readers would reject it.
    pub fn policy(&self) -> Option<Result<PolicyValue, FieldError>> {
        self.policy
            .as_ref()
            .map(|entry| PolicyValue::from_stored(&entry.raw))
    }

    /// The drain record of `origin`, if there is one.
    pub fn drain_record(&self, origin: &str) -> Result<Option<DrainRecord>, Error> {
        self.drains
            .get(origin)
            .map(|entry| DrainRecord::parse(origin, &entry.raw))
            .transpose()
    }
}

/// What a command wants written.
#[derive(Debug, Clone, Default)]
pub struct Changes {
    /// geo → new value, or `None` to delete the key.
    pub regions: BTreeMap<String, Option<RegionValue>>,
    /// The new policy, when it changes (it is never deleted).
    pub policy: Option<PolicyValue>,
    /// origin → new drain record, or `None` to delete it.
    pub drains: BTreeMap<String, Option<DrainRecord>>,
    /// Also guard that no drain record appeared since the read (a fleet-wide limit on the
    /// number of drained origins depends on it).
    pub guard_drains: bool,
    /// Also guard that no region changed since the read: a drain or restore decides from
    /// every region it read, also those it leaves alone (one that gained the origin
    /// meanwhile must not be skipped).
    pub guard_regions: bool,
    /// stage id → new stage record, or `None` to delete the stage key.
    pub stages: BTreeMap<String, Option<Stage>>,
    /// Unguarded puts beside the change (stage audit records under the control prefix).
    pub audit: BTreeMap<String, String>,
    /// Extra guards: full key → the `mod_revision` it must still have (0: absent).
    pub guards: BTreeMap<String, i64>,
    /// Also guard that no stage key changed since the read.
    pub guard_stages: bool,
    /// How open stages follow this change (see `crate::stages`).
    pub stage_edits: StageEdits,
    /// What the operator should know about the plan (skipped regions, renormalisations).
    pub notes: Vec<String>,
}

impl Changes {
    /// Nothing to write (notes aside).
    pub fn is_empty(&self) -> bool {
        self.regions.is_empty()
            && self.policy.is_none()
            && self.drains.is_empty()
            && self.stages.is_empty()
    }
}

/// Reads regions, policy and drain records in one transaction, at one revision.
pub async fn read_state(client: &mut Client, layout: &Layout) -> Result<State, Error> {
    let prefix = || Some(GetOptions::new().with_prefix());
    let txn = Txn::new().and_then(vec![
        TxnOp::get(layout.regions(), prefix()),
        TxnOp::get(layout.policy(), None),
        TxnOp::get(layout.drains(), prefix()),
        TxnOp::get(layout.stages(), prefix()),
    ]);
    let response = client.txn(txn).await?;
    let revision = response
        .header()
        .map(|header| header.revision())
        .unwrap_or(0);
    let mut ranges = response.op_responses().into_iter().map(|op| match op {
        TxnOpResponse::Get(get) => get.kvs().to_vec(),
        _ => Vec::new(),
    });
    let regions = ranges.next().unwrap_or_default();
    let policy = ranges.next().unwrap_or_default();
    let drains = ranges.next().unwrap_or_default();
    let stages = ranges.next().unwrap_or_default();
    let by_name = |kvs: Vec<KeyValue>, prefix: String| {
        kvs.iter()
            .filter_map(|kv| {
                let name = strip(kv.key(), &prefix)?;
                (!name.is_empty()).then(|| (name.to_string(), Entry::from_kv(kv)))
            })
            .collect::<BTreeMap<_, _>>()
    };
    Ok(State {
        revision,
        regions: by_name(regions, layout.regions()),
        policy: policy.first().map(Entry::from_kv),
        drains: by_name(drains, layout.drains()),
        stages: by_name(stages, layout.stages()),
    })
}

/// Keeps drain records true to the regions they name.
///
/// A drain record says "this origin was taken out of these regions". When a write puts the
/// origin back into one of them (a `set`, an `apply`, a `rollback`), the operator has
/// overridden the drain there: that region leaves the record, in the same transaction, and
/// a record left with no region is deleted. So at every revision, no region named in a
/// drain record lists the drained origin.
pub fn reconcile_drain_records(state: &State, changes: &mut Changes) -> Result<(), Error> {
    let touched: BTreeSet<&String> = changes.regions.keys().collect();
    let mut candidates: BTreeMap<String, DrainRecord> = BTreeMap::new();
    for origin in state.drains.keys() {
        if changes.drains.contains_key(origin) {
            continue;
        }
        if let Some(record) = state.drain_record(origin)?
            && record.regions.keys().any(|geo| touched.contains(geo))
        {
            candidates.insert(origin.clone(), record);
        }
    }
    for (origin, record) in &changes.drains {
        if let Some(record) = record {
            candidates.insert(origin.clone(), record.clone());
        }
    }
    for (origin, mut record) in candidates {
        let before = record.regions.len();
        record.regions.retain(|geo, _| {
            let lists = match changes.regions.get(geo) {
                Some(new_value) => new_value.as_ref().is_some_and(|value| value.lists(&origin)),
                None => matches!(state.region(geo), Some(Ok(value)) if value.lists(&origin)),
            };
            if lists {
                changes.notes.push(format!(
                    "region {geo} lists {origin} again: it leaves {origin}'s drain record"
                ));
            }
            !lists
        });
        if record.regions.len() != before {
            let update = (!record.regions.is_empty()).then_some(record);
            changes.drains.insert(origin, update);
        }
    }
    Ok(())
}

/// Writes `changes` in one transaction guarded on the revisions in `state`. Returns the
/// revision the write landed at, or `None` when a guard failed (a concurrent change).
pub async fn commit(
    client: &mut Client,
    layout: &Layout,
    state: &State,
    changes: &Changes,
    updated: &str,
) -> Result<Option<i64>, Error> {
    let mut compares = Vec::new();
    let mut ops = Vec::new();
    let mut guard = |key: String, entry: Option<&Entry>| match entry {
        Some(entry) => compares.push(Compare::mod_revision(
            key,
            CompareOp::Equal,
            entry.mod_revision,
        )),
        None => compares.push(Compare::create_revision(key, CompareOp::Equal, 0)),
    };
    for (geo, value) in &changes.regions {
        let key = layout.region(geo);
        let entry = state.regions.get(geo);
        guard(key.clone(), entry);
        match value {
            Some(value) => ops.push(TxnOp::put(key, value.encode(updated), None)),
            None => ops.push(TxnOp::delete(key, None)),
        }
    }
    if let Some(policy) = &changes.policy {
        guard(layout.policy(), state.policy.as_ref());
        ops.push(TxnOp::put(layout.policy(), policy.encode(updated), None));
    }
    for (origin, record) in &changes.drains {
        let key = layout.drain(origin);
        guard(key.clone(), state.drains.get(origin));
        match record {
            Some(record) => ops.push(TxnOp::put(key, record.encode(), None)),
            None => ops.push(TxnOp::delete(key, None)),
        }
    }
    for (id, stage) in &changes.stages {
        let key = layout.stage(id);
        guard(key.clone(), state.stages.get(id));
        match stage {
            Some(stage) => ops.push(TxnOp::put(key, stage.to_json(), None)),
            None => ops.push(TxnOp::delete(key, None)),
        }
    }
    for (key, revision) in &changes.guards {
        if *revision == 0 {
            compares.push(Compare::create_revision(key.as_str(), CompareOp::Equal, 0));
        } else {
            compares.push(Compare::mod_revision(
                key.as_str(),
                CompareOp::Equal,
                *revision,
            ));
        }
    }
    for (key, value) in &changes.audit {
        ops.push(TxnOp::put(key.as_str(), value.as_str(), None));
    }
    if changes.guard_stages {
        compares.push(
            Compare::mod_revision(layout.stages(), CompareOp::Less, state.revision + 1)
                .with_prefix(),
        );
    }
    if changes.guard_regions {
        compares.push(
            Compare::mod_revision(layout.regions(), CompareOp::Less, state.revision + 1)
                .with_prefix(),
        );
    }
    if changes.guard_drains {
        compares.push(
            Compare::mod_revision(layout.drains(), CompareOp::Less, state.revision + 1)
                .with_prefix(),
        );
    }
    let response = client
        .txn(Txn::new().when(compares).and_then(ops))
        .await
        .map_err(|error| explain_txn_error(error, changes))?;
    if response.succeeded() {
        Ok(Some(
            response
                .header()
                .map(|header| header.revision())
                .unwrap_or(0),
        ))
    } else {
        Ok(None)
    }
}

fn explain_txn_error(error: etcd_client::Error, changes: &Changes) -> Error {
    let text = error.to_string();
    if text.contains("too many operations in txn") {
        let keys = changes.regions.len()
            + changes.drains.len()
            + changes.stages.len()
            + usize::from(changes.policy.is_some());
        Error::Failed(format!(
            "etcd refused a transaction of {keys} keys ({text}); raise etcd's --max-txn-ops \
             so that one change can cover every region"
        ))
    } else {
        Error::Etcd(error)
    }
}

/// How often and how patiently a guarded write is retried.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// How many times to try before exit code 3.
    pub attempts: u32,
    /// The first pause's bound.
    pub base: Duration,
    /// The largest pause's bound.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 10,
            base: Duration::from_millis(20),
            cap: Duration::from_secs(1),
        }
    }
}

impl RetryPolicy {
    /// "Full jitter": a random pause up to an exponentially growing bound, so that writers
    /// that collided once do not collide again in lockstep.
    pub fn pause(&self, attempt: u32) -> Duration {
        let bound = self
            .base
            .saturating_mul(1u32 << attempt.min(16))
            .min(self.cap);
        bound.mul_f64(fastrand::f64())
    }
}

/// The result of [`transact`].
#[derive(Debug, Clone)]
pub struct Committed {
    /// The revision the write landed at; `None` when the plan had nothing to write.
    pub revision: Option<i64>,
    /// The state the successful plan was made from.
    pub state: State,
    /// What the successful plan wrote.
    pub changes: Changes,
    /// How many attempts it took (0 for a dry run).
    pub attempts: u32,
}

/// Read, plan, commit; on conflict start over, up to `retry.attempts` times. The plan
/// is a pure function of the state, so each attempt works on what it actually read.
pub async fn transact<F>(
    client: &mut Client,
    layout: &Layout,
    retry: &RetryPolicy,
    updated: &str,
    mut plan: F,
) -> Result<Committed, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let attempts = retry.attempts.max(1);
    for attempt in 1..=attempts {
        let (state, changes) = preview(client, layout, &mut plan).await?;
        if changes.is_empty() {
            return Ok(Committed {
                revision: None,
                state,
                changes,
                attempts: attempt,
            });
        }
        if let Some(revision) = commit(client, layout, &state, &changes, updated).await? {
            return Ok(Committed {
                revision: Some(revision),
                state,
                changes,
                attempts: attempt,
            });
        }
        if attempt < attempts {
            tokio::time::sleep(retry.pause(attempt)).await;
        }
    }
    Err(Error::Conflict { attempts })
}

/// Reads and plans without writing (`--dry-run`).
pub async fn preview<F>(
    client: &mut Client,
    layout: &Layout,
    plan: &mut F,
) -> Result<(State, Changes), Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let state = read_state(client, layout).await?;
    let mut changes = plan(&state)?;
    reconcile_drain_records(&state, &mut changes)?;
    reconcile_stages(&state, &mut changes)?;
    Ok((state, changes))
}
