//! Reading the routing state at one revision, and writing changes to it in one guarded
//! transaction, retried on conflict.
//!
//! Every mutating command follows the same cycle: [`read_state`] takes regions, policy and
//! drain records at one revision (in pages, each key's `mod_revision` as of that revision); a pure plan function turns that state into [`Changes`]; [`commit`]
//! writes them in one transaction whose guards compare every written key to the revision
//! that was read (`create_revision == 0` for a key that did not exist). A concurrent writer
//! fails the guards and [`transact`] starts over from a fresh read, after a jittered,
//! growing pause, a bounded number of times.

use std::collections::BTreeMap;
use std::time::Duration;

use etcd_client::{Client, Compare, CompareOp, GetOptions, KeyValue, PutOptions, Txn, TxnOp};

pub use crate::context::RetryPolicy;
use crate::error::{Error, FieldError};
use crate::plan::bucket_assignment::assign_buckets;
pub use crate::plan::drain::reconcile_drain_records;
pub use crate::plan::keys::DEFAULT_MAX_REQUEST_BYTES;
use crate::plan::keys::{Layout, strip};
pub use crate::plan::model::{Changes, Entry, State};
use crate::plan::stage::{carry_base, reconcile_stages};

/// Reads regions, policy and drain records at one revision: the regions in pages (the
/// first fixes the revision), then the policy and the drain records at that revision, so
/// that no single response holds the whole prefix (100,000 regions are about 10 MB) and a
/// guard on "no region changed since `revision`" covers every region read.
pub async fn read_state(client: &mut Client, layout: &Layout) -> Result<State, Error> {
    let mut kv = dw_etcd::kv_client(client);
    let regions = dw_etcd::read_prefix_pages(
        &mut kv,
        layout.regions().as_bytes(),
        None,
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await?;
    let revision = regions.revision;
    let policy = kv
        .get(
            layout.policy(),
            Some(GetOptions::new().with_revision(revision)),
        )
        .await?;
    let drains = dw_etcd::read_prefix_pages(
        &mut kv,
        layout.drains().as_bytes(),
        Some(revision),
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await?;
    let stages = dw_etcd::read_prefix_pages(
        &mut kv,
        layout.stages().as_bytes(),
        Some(revision),
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await?;
    let capacities = read_capacities(&mut kv, layout, Some(revision)).await?;
    let by_name = |kvs: &[KeyValue], prefix: String| {
        kvs.iter()
            .filter_map(|kv| {
                let name = strip(kv.key(), &prefix)?;
                (!name.is_empty()).then(|| (name.to_string(), entry(kv)))
            })
            .collect::<BTreeMap<_, _>>()
    };
    Ok(State {
        revision,
        regions: by_name(&regions.kvs, layout.regions()),
        policy: policy.kvs().first().map(entry),
        drains: by_name(&drains.kvs, layout.drains()),
        stages: by_name(&stages.kvs, layout.stages()),
        capacities: capacities
            .as_ref()
            .map(|(kvs, _)| by_name(kvs, layout.capacities()))
            .unwrap_or_default(),
        headroom: capacities
            .as_ref()
            .ok()
            .and_then(|(_, headroom)| headroom.as_ref().map(entry)),
        capacities_unreadable: capacities.err(),
    })
}

/// A key's value and `mod_revision`, as the plans read them.
fn entry(kv: &KeyValue) -> Entry {
    Entry {
        raw: kv.value().to_vec(),
        mod_revision: kv.mod_revision(),
    }
}

/// The capacity records and the headroom record at `revision`. A role without the grant
/// (made by a `dwctl auth` before capacities existed) gets the inner `Err` saying so
/// instead of a failed command: every routing change goes ahead without capacities, as
/// before them. Any other failure is the command's.
pub async fn read_capacities(
    kv: &mut etcd_client::KvClient,
    layout: &Layout,
    revision: Option<i64>,
) -> Result<Result<(Vec<KeyValue>, Option<KeyValue>), String>, Error> {
    let refused = format!(
        "this user's role cannot read the capacities under {} (permission denied): re-run \
         `dwctl auth --apply` to grant it",
        layout.capacities()
    );
    let capacities = match dw_etcd::read_prefix_pages(
        kv,
        layout.capacities().as_bytes(),
        revision,
        dw_etcd::DEFAULT_PAGE_KEYS,
    )
    .await
    {
        Ok(pages) => pages.kvs,
        Err(error) if dw_etcd::is_permission_denied(&error) => return Ok(Err(refused)),
        Err(error) => return Err(error.into()),
    };
    let headroom = match kv
        .get(
            layout.capacity_headroom(),
            revision.map(|revision| GetOptions::new().with_revision(revision)),
        )
        .await
    {
        Ok(response) => response.kvs().first().cloned(),
        Err(error) if dw_etcd::is_permission_denied(&error) => return Ok(Err(refused)),
        Err(error) => return Err(error.into()),
    };
    Ok(Ok((capacities, headroom)))
}

/// The largest value dwctl writes to one key: 1 MiB (1,048,576 bytes), checked on the
/// encoded value of every write (set, apply, rollback, drain, restore), so that one value
/// plus its guard and a drain record fits etcd's default request limit of 1.5 MiB.
pub const MAX_VALUE_BYTES: usize = 1024 * 1024;

/// Bytes counted for the request's fixed part (etcd's raft request header, the user
/// name) on top of its compares and operations.
const REQUEST_OVERHEAD_BYTES: usize = 256;
/// Bytes counted for the framing of one compare or operation (tags, lengths, varints)
/// besides its key, range end and value: more than protobuf spends, so the estimate is an
/// upper bound.
const ITEM_OVERHEAD_BYTES: usize = 40;

/// A transaction ready to send, with the size etcd will see (an upper bound).
struct PlannedTxn {
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
    bytes: usize,
    /// Each key written: the value put (`None`: deleted) and the `mod_revision` it had when
    /// read (0: absent), so that a write whose outcome is unknown can be settled.
    written: Vec<Written>,
}

/// One key of a transaction, as [`settle`] reads it back.
#[derive(Debug, Clone)]
struct Written {
    key: String,
    value: Option<String>,
    read_mod_revision: i64,
}

/// Builds the guarded transaction of `changes` and checks it against the limits: every
/// value at most [`MAX_VALUE_BYTES`], the whole request at most `layout.max_request_bytes`
/// (a validation error, exit 4, before anything is sent, also for a dry run).
fn plan_txn(
    layout: &Layout,
    state: &State,
    changes: &Changes,
    updated: &str,
    fences: &[Fence],
) -> Result<PlannedTxn, Error> {
    let mut planned = PlannedTxn {
        compares: Vec::new(),
        ops: Vec::new(),
        bytes: REQUEST_OVERHEAD_BYTES,
        written: Vec::new(),
    };
    let mut too_large = Vec::new();
    let guard = |planned: &mut PlannedTxn, key: String, entry: Option<&Entry>| {
        planned.bytes += key.len() + ITEM_OVERHEAD_BYTES;
        planned.written.push(Written {
            key: key.clone(),
            value: None,
            read_mod_revision: entry.map_or(0, |entry| entry.mod_revision),
        });
        planned.compares.push(match entry {
            Some(entry) => Compare::mod_revision(key, CompareOp::Equal, entry.mod_revision),
            None => Compare::create_revision(key, CompareOp::Equal, 0),
        });
    };
    let mut put = |planned: &mut PlannedTxn, key: String, value: String| {
        if value.len() > MAX_VALUE_BYTES {
            too_large.push(FieldError::new(
                key.clone(),
                format!(
                    "the value is {} bytes; the largest value dwctl writes is {MAX_VALUE_BYTES} \
                     bytes (1 MiB)",
                    value.len()
                ),
            ));
        }
        planned.bytes += key.len() + value.len() + ITEM_OVERHEAD_BYTES;
        // The guard of a key comes before its put; an audit key has none (it is new).
        match planned.written.last_mut() {
            Some(last) if last.key == key && last.value.is_none() => {
                last.value = Some(value.clone())
            }
            _ => planned.written.push(Written {
                key: key.clone(),
                value: Some(value.clone()),
                read_mod_revision: 0,
            }),
        }
        planned.ops.push(TxnOp::put(key, value, None));
    };
    let delete = |planned: &mut PlannedTxn, key: String| {
        planned.bytes += key.len() + ITEM_OVERHEAD_BYTES;
        planned.ops.push(TxnOp::delete(key, None));
    };
    for (geo, value) in &changes.regions {
        let key = layout.region(geo);
        guard(&mut planned, key.clone(), state.regions.get(geo));
        match value {
            Some(value) => put(&mut planned, key, value.encode(updated)),
            None => delete(&mut planned, key),
        }
    }
    if let Some(policy) = &changes.policy {
        guard(&mut planned, layout.policy(), state.policy.as_ref());
        put(&mut planned, layout.policy(), policy.encode(updated));
    } else if changes.guard_policy {
        let key = layout.policy();
        planned.bytes += key.len() + ITEM_OVERHEAD_BYTES;
        planned.compares.push(match &state.policy {
            Some(entry) => Compare::mod_revision(key, CompareOp::Equal, entry.mod_revision),
            None => Compare::create_revision(key, CompareOp::Equal, 0),
        });
    }
    for (origin, record) in &changes.drains {
        let key = layout.drain(origin);
        guard(&mut planned, key.clone(), state.drains.get(origin));
        match record {
            Some(record) => put(&mut planned, key, record.encode()),
            None => delete(&mut planned, key),
        }
    }
    for (id, stage) in &changes.stages {
        let key = layout.stage(id);
        guard(&mut planned, key.clone(), state.stages.get(id));
        match stage {
            Some(stage) => {
                let carried = carry_base(state, stage, state.stages.get(id));
                put(&mut planned, key, carried.to_json());
            }
            None => delete(&mut planned, key),
        }
    }
    for (origin, capacity) in &changes.capacities {
        let key = layout.capacity(origin);
        guard(&mut planned, key.clone(), state.capacities.get(origin));
        match capacity {
            Some(capacity) => put(&mut planned, key, capacity.encode()),
            None => delete(&mut planned, key),
        }
    }
    if let Some(headroom) = &changes.headroom {
        let key = layout.capacity_headroom();
        guard(&mut planned, key.clone(), state.headroom.as_ref());
        match headroom {
            Some(headroom) => put(&mut planned, key, headroom.encode()),
            None => delete(&mut planned, key),
        }
    }
    for (key, revision) in &changes.guards {
        planned.bytes += key.len() + ITEM_OVERHEAD_BYTES;
        planned.compares.push(if *revision == 0 {
            Compare::create_revision(key.as_str(), CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key.as_str(), CompareOp::Equal, *revision)
        });
    }
    for (origin, mod_revision) in &changes.forget_registrations {
        let key = layout.registration(origin);
        let read = Entry {
            raw: Vec::new(),
            mod_revision: *mod_revision,
        };
        guard(&mut planned, key.clone(), Some(&read));
        delete(&mut planned, key);
    }
    for fence in fences {
        planned.bytes += fence.key.len() + ITEM_OVERHEAD_BYTES;
        planned.compares.push(fence.compare());
    }
    for (key, value) in &changes.audit {
        put(&mut planned, key.clone(), value.clone());
    }
    for (prefix, wanted) in [
        (layout.regions(), changes.guard_regions),
        (layout.drains(), changes.guard_drains),
        (layout.stages(), changes.guard_stages),
    ] {
        if wanted {
            planned.bytes += 2 * prefix.len() + ITEM_OVERHEAD_BYTES;
            planned.compares.push(
                Compare::mod_revision(prefix, CompareOp::Less, state.revision + 1).with_prefix(),
            );
        }
    }
    if !too_large.is_empty() {
        return Err(Error::Invalid(too_large));
    }
    if planned.bytes > layout.max_request_bytes {
        let keys = planned.ops.len();
        return Err(Error::invalid(
            "request",
            format!(
                "the transaction would be about {} bytes ({keys} keys written), more than \
                 --max-request-bytes {} (etcd refuses requests over its --max-request-bytes, \
                 1.5 MiB by default); nothing was sent. Change fewer regions at once (drain \
                 with --region), make the values smaller, or, if the etcd cluster allows more, \
                 raise --max-request-bytes to match it",
                planned.bytes, layout.max_request_bytes
            ),
        ));
    }
    Ok(planned)
}

/// The size [`commit`] would send for `changes`, checked against the limits (what a dry
/// run reports).
pub fn request_bytes(layout: &Layout, state: &State, changes: &Changes) -> Result<usize, Error> {
    if changes.is_empty() {
        return Ok(0);
    }
    plan_txn(
        layout,
        state,
        changes,
        &crate::plan::clock::now_rfc3339(),
        &[],
    )
    .map(|planned| planned.bytes)
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
    let planned = plan_txn(layout, state, changes, updated, &[])?;
    send(client, planned, changes).await
}

/// Sends a planned transaction: the revision it landed at, `None` when a guard failed.
async fn send(
    client: &mut Client,
    planned: PlannedTxn,
    changes: &Changes,
) -> Result<Option<i64>, Error> {
    let response = client
        .txn(Txn::new().when(planned.compares).and_then(planned.ops))
        .await
        .map_err(|error| explain_txn_error(error, changes, planned.bytes))?;
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

fn explain_txn_error(error: etcd_client::Error, changes: &Changes, bytes: usize) -> Error {
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
    } else if text.contains("request is too large") || text.contains("larger than max") {
        Error::Failed(format!(
            "etcd refused a transaction of about {bytes} bytes ({text}): its \
             --max-request-bytes is lower than dwctl's --max-request-bytes; lower dwctl's to \
             match (nothing was written)"
        ))
    } else {
        Error::Etcd(error)
    }
}

/// Attempts at least this many times when etcd is unavailable (whatever `--retries`
/// says): with pauses of [`UNAVAILABLE_PAUSE`] x 1, 2, 4, 4 between them, about 3 s, more
/// than an election of etcd's default timings takes (1 s election timeout).
pub const UNAVAILABLE_ATTEMPTS: u32 = 5;

/// The first pause after etcd was unavailable; it doubles, up to 4 times this.
pub const UNAVAILABLE_PAUSE: Duration = Duration::from_millis(250);

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

/// A check every commit of a plan (and its dry run) passes on every attempt, right after
/// the plan and before the follow-ups (stage and drain-record reconciliation) and the size
/// check, so that what a check adds (`--allow-overload`'s audit record) is followed up and
/// counted like the rest. It may refuse the changes with an error of its own kind, which
/// the command reports (and exits with) as it is: nothing is sent. A check can carry
/// context (the capacity guard, [`crate::ops::run::Predictor`], holds the traffic it
/// read); a closure `FnMut(&State, &mut Changes) -> Result<(), Error>` is one too. It runs
/// on a plan with nothing to write as well (and should let it through), so that what it
/// remembers of an attempt is always the last attempt's. `Send`: commands run on a worker.
pub trait PreCommitCheck: Send {
    /// Judges `changes` planned on `state`: `Err` refuses them; `Ok` lets them through,
    /// possibly with a note or an audit record added.
    fn check(&mut self, state: &State, changes: &mut Changes) -> Result<(), Error>;
}

impl<F> PreCommitCheck for F
where
    F: FnMut(&State, &mut Changes) -> Result<(), Error> + Send,
{
    fn check(&mut self, state: &State, changes: &mut Changes) -> Result<(), Error> {
        self(state, changes)
    }
}

/// Read, plan, commit; on conflict start over, up to `retry.attempts` times. The plan
/// is a pure function of the state, so each attempt works on what it actually read.
/// No [`PreCommitCheck`] runs ([`transact_checked`] takes them).
pub async fn transact<F>(
    client: &mut Client,
    layout: &Layout,
    retry: &RetryPolicy,
    updated: &str,
    plan: F,
) -> Result<Committed, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    transact_checked(client, layout, retry, updated, &mut [], plan).await
}

/// [`transact`], with every attempt's changes passing each of `checks` in order
/// ([`PreCommitCheck`]).
pub async fn transact_checked<F>(
    client: &mut Client,
    layout: &Layout,
    retry: &RetryPolicy,
    updated: &str,
    checks: &mut [&mut dyn PreCommitCheck],
    plan: F,
) -> Result<Committed, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    transact_fenced(client, layout, retry, updated, &[], checks, plan).await
}

/// A compare the caller adds to every attempt's transaction, beside the plan's own guards:
/// a key that must still be as the caller holds it. The load-feedback loop fences its writes
/// on its leader key, so that a leader that lost its lease (and its key) writes nothing.
/// A fence, once it fails, never holds again: the write fails with [`Error::Fenced`]
/// instead of being retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    key: String,
    create_revision: i64,
}

impl Fence {
    /// The leader key `key` as a campaign created it, at `create_revision` (etcd's
    /// election: the key exists while the leader's lease lives; a new leader's key has a
    /// later create revision).
    pub fn leader(key: impl Into<String>, create_revision: i64) -> Fence {
        Fence {
            key: key.into(),
            create_revision,
        }
    }

    /// The key fenced on.
    pub fn key(&self) -> &str {
        &self.key
    }

    fn compare(&self) -> Compare {
        Compare::create_revision(self.key.as_str(), CompareOp::Equal, self.create_revision)
    }

    /// Whether the fence holds, by the key's `create_revision` now (`None`: absent).
    fn holds(&self, create_revision: Option<i64>) -> bool {
        create_revision == Some(self.create_revision)
    }
}

/// Takes the leader key `key` for `identity` on `lease` when it is absent (compare: its
/// `create_revision` is 0), in one transaction: `Ok(fence)` at the revision that created
/// it, or `Err(holder)`, the identity the key holds (empty when it could not be read).
/// The one place a campaign writes (a leader election, `daemons/autopilot/election.rs`).
pub async fn take_leader_key(
    client: &mut Client,
    key: &str,
    identity: &str,
    lease: i64,
) -> Result<Result<Fence, String>, Error> {
    let response = client
        .txn(
            Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key,
                    identity,
                    Some(PutOptions::new().with_lease(lease)),
                )])
                .or_else([TxnOp::get(key, None)]),
        )
        .await?;
    if response.succeeded() {
        let revision = response.header().map_or(0, |header| header.revision());
        return Ok(Ok(Fence::leader(key, revision)));
    }
    let holder = response
        .op_responses()
        .into_iter()
        .find_map(|op| match op {
            etcd_client::TxnOpResponse::Get(get) => get
                .kvs()
                .first()
                .map(|kv| String::from_utf8_lossy(kv.value()).into_owned()),
            _ => None,
        })
        .unwrap_or_default();
    Ok(Err(holder))
}

/// Puts `value` at `key` on `lease`, fenced on `fence` (the leader key as the campaign
/// created it), in one transaction: the leading autopilot's status
/// (`daemons/autopilot.rs`), which lives and dies with the leader's lease. `Err(Fenced)`
/// when the fence no longer holds: another instance leads, nothing was written.
pub async fn put_on_lease_fenced(
    client: &mut Client,
    fence: &Fence,
    key: &str,
    value: &str,
    lease: i64,
) -> Result<i64, Error> {
    let response = client
        .txn(Txn::new().when([fence.compare()]).and_then([TxnOp::put(
            key,
            value,
            Some(PutOptions::new().with_lease(lease)),
        )]))
        .await?;
    if !response.succeeded() {
        return Err(Error::Fenced(format!(
            "{} is no longer the key this instance created",
            fence.key
        )));
    }
    Ok(response.header().map_or(0, |header| header.revision()))
}

/// The first of `fences` that no longer holds, read linearizably; `None`: all hold.
async fn broken_fence<'f>(
    client: &mut Client,
    fences: &'f [Fence],
) -> Result<Option<&'f Fence>, Error> {
    for fence in fences {
        let response = client.get(fence.key.as_str(), None).await?;
        let created = response.kvs().first().map(KeyValue::create_revision);
        if !fence.holds(created) {
            return Ok(Some(fence));
        }
    }
    Ok(None)
}

/// [`transact_checked`], each attempt's transaction also compared on `fences` (the
/// caller's, [`Fence`]). The one builder of every transaction stays [`plan_txn`].
pub async fn transact_fenced<F>(
    client: &mut Client,
    layout: &Layout,
    retry: &RetryPolicy,
    updated: &str,
    fences: &[Fence],
    checks: &mut [&mut dyn PreCommitCheck],
    mut plan: F,
) -> Result<Committed, Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let attempts = retry.attempts.max(1);
    let mut unavailable = Unavailable::default();
    // A write sent whose outcome is unknown (the member failed before answering): settled
    // by reading its keys back before anything is planned again.
    let mut unsettled: Option<(State, Changes, Vec<Written>)> = None;
    let mut attempt = 0;
    loop {
        attempt += 1;
        if let Some((state, changes, written)) = unsettled.take() {
            match settle(client, &written).await {
                Ok(Settled::Applied(revision)) => {
                    return Ok(Committed {
                        revision: Some(revision),
                        state,
                        changes,
                        attempts: attempt - 1,
                    });
                }
                Ok(Settled::NotApplied) => {}
                Ok(Settled::Unknown(why)) => return Err(unavailable.outcome_unknown(&why)),
                Err(error) => {
                    unsettled = Some((state, changes, written));
                    unavailable.retry_after(error, client, retry).await?;
                    continue;
                }
            }
        }
        let (state, changes) = match preview_checked(client, layout, checks, &mut plan).await {
            Ok(read) => read,
            Err(error) => {
                unavailable.retry_after(error, client, retry).await?;
                continue;
            }
        };
        if changes.is_empty() {
            return Ok(Committed {
                revision: None,
                state,
                changes,
                attempts: attempt,
            });
        }
        let planned = plan_txn(layout, &state, &changes, updated, fences)?;
        let written = planned.written.clone();
        match send(client, planned, &changes).await {
            Ok(Some(revision)) => {
                return Ok(Committed {
                    revision: Some(revision),
                    state,
                    changes,
                    attempts: attempt,
                });
            }
            Ok(None) => {
                // A guard failed: a concurrent writer, or a fence that no longer holds
                // (which no retry can mend).
                if let Some(fence) = broken_fence(client, fences).await? {
                    return Err(Error::Fenced(format!(
                        "{} no longer holds as this writer's fence (its leader key was \
                         deleted or taken over); nothing was written",
                        fence.key()
                    )));
                }
            }
            Err(error) => {
                let sent = unavailable.retry_after(error, client, retry).await;
                unsettled = Some((state, changes, written));
                if let Err(error) = sent {
                    // Out of attempts with the outcome unknown: say so.
                    return Err(match error {
                        Error::Etcd(_) | Error::EtcdUnavailable { .. } => {
                            unavailable.outcome_unknown(&error.to_string())
                        }
                        other => other,
                    });
                }
                continue;
            }
        }
        if attempt >= attempts {
            return Err(Error::Conflict { attempts });
        }
        tokio::time::sleep(retry.pause(attempt)).await;
    }
}

/// How [`transact`] rides out an unavailable etcd: it counts the failures, pauses, and
/// connects again (to a member that answers and knows a leader) before the next attempt.
#[derive(Default)]
struct Unavailable {
    failures: u32,
    /// The member the last failure came from, when known.
    member: Option<String>,
    last: Option<String>,
}

impl Unavailable {
    /// Returns the error unless it is etcd's unavailability with attempts left; then pauses
    /// and reconnects (a failed reconnect is the next failure's business).
    async fn retry_after(
        &mut self,
        error: Error,
        client: &mut Client,
        retry: &RetryPolicy,
    ) -> Result<(), Error> {
        let Error::Etcd(source) = &error else {
            return Err(error);
        };
        if !dw_etcd::is_retryable(source) {
            return Err(error);
        }
        self.failures += 1;
        self.last = Some(error.to_string());
        if self.failures >= retry.attempts.max(UNAVAILABLE_ATTEMPTS) {
            return Err(self.exhausted());
        }
        let doubled = 1u32 << (self.failures - 1).min(2);
        tokio::time::sleep(UNAVAILABLE_PAUSE * doubled).await;
        if let Some(options) = &retry.reconnect {
            match options.connect_member().await {
                Ok((fresh, member)) => {
                    *client = fresh;
                    self.member = Some(member);
                }
                Err(error) => {
                    self.member = error.endpoint().map(str::to_owned);
                    self.last = Some(error.to_string());
                }
            }
        }
        Ok(())
    }

    fn exhausted(&self) -> Error {
        Error::EtcdUnavailable {
            attempts: self.failures,
            member: self.member.clone(),
            last: self.last.clone().unwrap_or_else(|| "no answer".into()),
        }
    }

    fn outcome_unknown(&self, why: &str) -> Error {
        Error::OutcomeUnknown {
            why: why.to_owned(),
        }
    }
}

/// What reading back the keys of a write whose answer was lost says about it.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    /// Every key holds what the write put (deleted ones are gone), all at this revision.
    Applied(i64),
    /// Every key is as it was read before the write: it did not land (and cannot later: a
    /// linearizable read on the current leader follows every entry an older one proposed).
    NotApplied,
    /// Something else changed the keys: whether this write landed first is not known.
    Unknown(String),
}

/// Reads the keys of `written` back in one linearizable transaction and settles the write.
async fn settle(client: &mut Client, written: &[Written]) -> Result<Settled, Error> {
    let gets: Vec<TxnOp> = written
        .iter()
        .map(|w| TxnOp::get(w.key.as_str(), None))
        .collect();
    let response = client.txn(Txn::new().and_then(gets)).await?;
    let mut current = Vec::with_capacity(written.len());
    for op in response.op_responses() {
        if let etcd_client::TxnOpResponse::Get(get) = op {
            current.push(
                get.kvs()
                    .first()
                    .map(|kv| (kv.value().to_vec(), kv.mod_revision())),
            );
        }
    }
    Ok(settled(written, &current))
}

/// [`settle`]'s decision, from each key's value and `mod_revision` now (`None`: absent).
fn settled(written: &[Written], current: &[Option<(Vec<u8>, i64)>]) -> Settled {
    if current.len() != written.len() {
        return Settled::Unknown("etcd answered the read-back partly".into());
    }
    let untouched = written.iter().zip(current).all(|(w, now)| match now {
        None => w.read_mod_revision == 0,
        Some((_, revision)) => *revision == w.read_mod_revision,
    });
    if untouched {
        return Settled::NotApplied;
    }
    let mut landed_at = None;
    for (w, now) in written.iter().zip(current) {
        match (&w.value, now) {
            (None, None) => {}
            (Some(value), Some((bytes, revision))) if bytes == value.as_bytes() => {
                if landed_at.is_some_and(|at| at != *revision) {
                    return Settled::Unknown(format!("{:?} changed again since", w.key));
                }
                landed_at = Some(*revision);
            }
            _ => {
                return Settled::Unknown(format!("{:?} was changed by another writer", w.key));
            }
        }
    }
    match landed_at {
        Some(revision) => Settled::Applied(revision),
        None => Settled::Unknown(
            "it only deleted keys, which are gone; at which revision is not known".into(),
        ),
    }
}

/// Reads and plans without writing (`--dry-run`): what [`transact`] would write, refused
/// as it would refuse it.
pub async fn preview<F>(
    client: &mut Client,
    layout: &Layout,
    plan: &mut F,
) -> Result<(State, Changes), Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    preview_checked(client, layout, &mut [], plan).await
}

/// [`preview`] through `checks`, as [`transact_checked`] runs them: a dry run refuses
/// what the commit would refuse.
pub async fn preview_checked<F>(
    client: &mut Client,
    layout: &Layout,
    checks: &mut [&mut dyn PreCommitCheck],
    plan: &mut F,
) -> Result<(State, Changes), Error>
where
    F: FnMut(&State) -> Result<Changes, Error>,
{
    let state = read_state(client, layout).await?;
    let mut changes = plan(&state)?;
    // The assignments first, so that the capacity guard predicts what is committed; again
    // after the follow-ups, which may edit staged values (it is idempotent).
    assign_buckets(&state, &mut changes)?;
    for check in checks.iter_mut() {
        check.check(&state, &mut changes)?;
    }
    reconcile_drain_records(&state, &mut changes)?;
    reconcile_stages(&state, &mut changes)?;
    assign_buckets(&state, &mut changes)?;
    // A dry run refuses what the commit would refuse, before anything is sent.
    request_bytes(layout, &state, &changes)?;
    Ok((state, changes))
}

/// A write outside a plan (a record that is not routing: a registration, its marker, a
/// rollout's progress, a drain record's repair with its audit record), built here so that
/// every etcd transaction of dwctl is built in this module: guards, then puts and deletes,
/// in one transaction. [`write`] sends it.
#[derive(Debug, Clone, Default)]
pub struct RecordWrite {
    compares: Vec<Compare>,
    ops: Vec<TxnOp>,
}

impl RecordWrite {
    /// A write with no guard and no operation yet.
    pub fn new() -> RecordWrite {
        RecordWrite::default()
    }

    /// Guard: `key` still has `mod_revision` (0: `key` does not exist).
    pub fn guard(mut self, key: &str, mod_revision: i64) -> RecordWrite {
        self.compares.push(if mod_revision == 0 {
            Compare::create_revision(key, CompareOp::Equal, 0)
        } else {
            Compare::mod_revision(key, CompareOp::Equal, mod_revision)
        });
        self
    }

    /// Puts `value` at `key`.
    pub fn put(mut self, key: &str, value: String) -> RecordWrite {
        self.ops.push(TxnOp::put(key, value, None));
        self
    }

    /// Puts `value` at `key` on `lease` (the key goes when the lease ends).
    pub fn put_on_lease(mut self, key: &str, value: String, lease: i64) -> RecordWrite {
        self.ops.push(TxnOp::put(
            key,
            value,
            Some(PutOptions::new().with_lease(lease)),
        ));
        self
    }

    /// Deletes `key`.
    pub fn delete(mut self, key: &str) -> RecordWrite {
        self.ops.push(TxnOp::delete(key, None));
        self
    }
}

/// Sends `write` in one transaction: the revision it committed at, or `None` when a guard
/// failed (nothing written).
pub async fn write(client: &mut Client, write: RecordWrite) -> Result<Option<i64>, Error> {
    let response = client
        .txn(Txn::new().when(write.compares).and_then(write.ops))
        .await?;
    if !response.succeeded() {
        return Ok(None);
    }
    Ok(Some(
        response.header().map_or(0, |header| header.revision()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::value::RegionValue;

    fn layout(max: usize) -> Layout {
        Layout::new("/dw/routing/", "/dw/control/")
            .unwrap()
            .with_max_request_bytes(max)
    }

    fn with_shard(bytes: usize) -> Changes {
        let value = RegionValue {
            shard: "s".repeat(bytes),
            origins: vec!["a".into()],
            weight: [("a".to_string(), 100)].into(),
            extra: Default::default(),
        };
        Changes {
            regions: [("DE".to_string(), Some(value))].into(),
            ..Changes::default()
        }
    }

    #[test]
    fn values_are_refused_past_one_mebibyte_exactly() {
        let state = State::default();
        let overhead = with_shard(0).regions["DE"]
            .as_ref()
            .unwrap()
            .encode("t")
            .len();
        let big = layout(4 * MAX_VALUE_BYTES);
        let at_limit = with_shard(MAX_VALUE_BYTES - overhead);
        assert!(plan_txn(&big, &state, &at_limit, "t", &[]).is_ok());
        let past = with_shard(MAX_VALUE_BYTES - overhead + 1);
        let Err(Error::Invalid(errors)) = plan_txn(&big, &state, &past, "t", &[]) else {
            panic!("a value of 1 MiB + 1 byte must be refused");
        };
        assert_eq!(errors[0].field, "/dw/routing/region/DE");
    }

    #[test]
    fn the_request_size_is_an_upper_bound_checked_at_its_edge() {
        let state = State::default();
        let changes = with_shard(1000);
        let bytes = plan_txn(&layout(1 << 20), &state, &changes, "t", &[])
            .unwrap()
            .bytes;
        assert!(request_bytes(&layout(1 << 20), &state, &changes).unwrap() >= bytes);
        // Key, value and framing: more than the payload, not much more.
        assert!(bytes > 1000 && bytes < 1000 + 512, "{bytes}");
        assert!(plan_txn(&layout(bytes), &state, &changes, "t", &[]).is_ok());
        let Err(Error::Invalid(errors)) = plan_txn(&layout(bytes - 1), &state, &changes, "t", &[])
        else {
            panic!("one byte over the limit must be refused");
        };
        assert_eq!(errors[0].field, "request");
        assert!(errors[0].reason.contains("--max-request-bytes"));
        assert_eq!(
            request_bytes(&layout(10), &state, &Changes::default()).unwrap(),
            0
        );
    }

    #[test]
    fn a_write_with_a_lost_answer_is_settled_by_its_keys() {
        // The guarded region existed at revision 5; the audit key is new.
        let mut state = State {
            revision: 9,
            ..State::default()
        };
        state.regions.insert(
            "DE".into(),
            Entry {
                raw: b"old".to_vec(),
                mod_revision: 5,
            },
        );
        let mut changes = with_shard(3);
        changes
            .audit
            .insert("/dw/control/audit/1".into(), "{\"by\":\"me\"}".into());
        let planned = plan_txn(&layout(1 << 20), &state, &changes, "now", &[]).unwrap();
        let written = planned.written;
        assert_eq!(written.len(), 2, "{written:?}");
        assert_eq!(written[0].read_mod_revision, 5);
        assert!(written[0].value.is_some() && written[1].value.is_some());
        let value = |i: usize| written[i].value.clone().unwrap().into_bytes();

        // As read: not applied.
        let untouched = [Some((b"old".to_vec(), 5)), None];
        assert_eq!(settled(&written, &untouched), Settled::NotApplied);
        // Both keys as written, at one revision: applied there.
        let landed = [Some((value(0), 12)), Some((value(1), 12))];
        assert_eq!(settled(&written, &landed), Settled::Applied(12));
        // Another writer's value: unknown.
        let other = [Some((b"theirs".to_vec(), 12)), None];
        assert!(matches!(settled(&written, &other), Settled::Unknown(_)));
        // Ours, then changed again (two revisions): unknown.
        let again = [Some((value(0), 12)), Some((value(1), 13))];
        assert!(matches!(settled(&written, &again), Settled::Unknown(_)));
        // A partial answer: unknown.
        assert!(matches!(
            settled(&written, &untouched[..1]),
            Settled::Unknown(_)
        ));
    }

    #[test]
    fn a_bucketed_write_is_guarded_on_the_policy_it_was_computed_for() {
        let state = State {
            policy: Some(Entry {
                raw: br#"{"buckets":4}"#.to_vec(),
                mod_revision: 7,
            }),
            ..State::default()
        };
        let mut changes = with_shard(3);
        let plain = plan_txn(&layout(1 << 20), &state, &changes, "t", &[]).unwrap();
        changes.guard_policy = true;
        let guarded = plan_txn(&layout(1 << 20), &state, &changes, "t", &[]).unwrap();
        assert_eq!(guarded.compares.len(), plain.compares.len() + 1);
        assert!(guarded.bytes > plain.bytes);
        // A change that writes the policy guards it once, as its own key.
        changes.policy = Some(crate::plan::value::PolicyValue::for_write(b"{}").unwrap());
        let writing = plan_txn(&layout(1 << 20), &state, &changes, "t", &[]).unwrap();
        assert_eq!(writing.compares.len(), plain.compares.len() + 1);
    }

    #[test]
    fn a_deleting_write_is_settled_without_a_revision() {
        let mut state = State::default();
        state.regions.insert(
            "DE".into(),
            Entry {
                raw: b"old".to_vec(),
                mod_revision: 5,
            },
        );
        let changes = Changes {
            regions: [("DE".to_string(), None)].into(),
            ..Changes::default()
        };
        let written = plan_txn(&layout(1 << 20), &state, &changes, "now", &[])
            .unwrap()
            .written;
        assert_eq!(
            settled(&written, &[Some((b"x".to_vec(), 5))]),
            Settled::NotApplied
        );
        assert!(matches!(settled(&written, &[None]), Settled::Unknown(_)));
    }
}
