//! What etcd and the snapshot file hold: writes, reads at a revision, and waiting until
//! the two agree.

use std::collections::BTreeMap;
use std::fs;
use std::future::Future;
use std::path::Path;
use std::time::{Duration, Instant};

use dw_routing::Snapshot;
use etcd_client::{Client, GetOptions};

use super::{Cluster, EVENTUALLY, PREFIX};

/// Writes `key` and returns the revision of the write.
pub async fn put(client: &mut Client, key: &str, value: impl Into<Vec<u8>>) -> u64 {
    let response = client.put(key, value, None).await.unwrap();
    response.header().unwrap().revision() as u64
}

pub async fn delete(client: &mut Client, key: &str) -> u64 {
    let response = client.delete(key, None).await.unwrap();
    response.header().unwrap().revision() as u64
}

/// The prefix as etcd holds it, at `revision` (0 for the latest), with the revision read.
/// Retries for a while: a member of the client's may be down or still starting.
pub async fn etcd_state(client: &mut Client, revision: u64) -> (u64, BTreeMap<String, String>) {
    let mut options = GetOptions::new().with_prefix();
    if revision > 0 {
        options = options.with_revision(revision as i64);
    }
    let deadline = Instant::now() + EVENTUALLY;
    let response = loop {
        let get = client.get(PREFIX, Some(options.clone()));
        match tokio::time::timeout(Duration::from_secs(2), get).await {
            Ok(Ok(response)) => break response,
            Ok(Err(e)) => assert!(Instant::now() < deadline, "cannot read etcd: {e}"),
            Err(_) => assert!(Instant::now() < deadline, "cannot read etcd: timeout"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let kvs = response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_owned(),
                kv.value_str().unwrap().to_owned(),
            )
        })
        .collect();
    (response.header().unwrap().revision() as u64, kvs)
}

pub fn read_snapshot(path: &Path) -> Option<Snapshot> {
    let bytes = fs::read(path).ok()?;
    Some(Snapshot::parse(&bytes).unwrap_or_else(|e| {
        panic!(
            "{} does not parse: {e}: {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        )
    }))
}

/// Polls `check` every 20 ms until it returns true, or panics after [`EVENTUALLY`]
/// (`dw_etcd_testkit::eventually`, the polling wait dwctl's tests share).
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    dw_etcd_testkit::eventually(EVENTUALLY, Duration::from_millis(20), what, || {
        let done = check();
        async move { done.await.then_some(()) }
    })
    .await
}

/// Waits until the snapshot file holds exactly what etcd holds now (after writes stop).
pub async fn converged(client: &mut Client, snapshot: &Path) -> Snapshot {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let (_, kvs) = etcd_state(client, 0).await;
        if let Some(published) = read_snapshot(snapshot)
            && published.kvs == kvs
        {
            return published;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until the snapshot equals etcd"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Turns authentication on with two users: `root` (password `root-pw`, every right) and
/// `agent` (password `agent-pw`, which may only read the prefix). Returns a root client.
pub async fn enable_auth_with_a_reader(cluster: &Cluster) -> Client {
    let mut admin = cluster.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("reader").await.unwrap();
    admin
        .role_grant_permission(
            "reader",
            etcd_client::Permission::read(PREFIX).with_prefix(),
        )
        .await
        .unwrap();
    admin.user_add("agent", "agent-pw", None).await.unwrap();
    admin.user_grant_role("agent", "reader").await.unwrap();
    admin.auth_enable().await.unwrap();
    let options = etcd_client::ConnectOptions::new().with_user("root", "root-pw");
    Client::connect(cluster.endpoints(), Some(options))
        .await
        .unwrap()
}
