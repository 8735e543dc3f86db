//! Origins that notice: `origin register` puts its key back when anyone else deletes it or
//! moves it to another lease, and `rebalance` drains an origin only after its key has been
//! absent for the grace period and the lease its registration record names has ended,
//! never restoring on a put on a lease that record does not name.

use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::{CONTROL, Etcd, PREFIX, drain_key, eventually, listed_weights, region_key};
use etcd_client::{PutOptions, Txn, TxnOp};
use serde_json::json;

const DE: &str = r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#;
const WAIT: Duration = Duration::from_secs(20);

fn origin_key(id: &str) -> String {
    format!("{PREFIX}origin/{id}")
}

async fn lease_of(etcd: &Etcd, key: &str) -> Option<i64> {
    let response = etcd.client().await.get(key, None).await.ok()?;
    response.kvs().first().map(|kv| kv.lease())
}

async fn lists(etcd: &Etcd, origin: &str) -> bool {
    etcd.get_json(&region_key("DE"))
        .await
        .is_some_and(|region| {
            listed_weights(&region)
                .iter()
                .any(|(name, _)| name == origin)
        })
}

/// Waits until `daemon`'s log holds `text` `count` times.
async fn logged(daemon: &Daemon, text: &str, count: usize) {
    eventually(WAIT, text, || async {
        (daemon.log().matches(text).count() >= count).then_some(())
    })
    .await;
}

/// Registers `id` as `origin register` does, on a new lease: key and record naming it.
async fn register_by_hand(etcd: &Etcd, id: &str) -> i64 {
    let mut client = etcd.client().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    let txn = Txn::new().and_then(vec![
        TxnOp::put(
            origin_key(id),
            "{}",
            Some(PutOptions::new().with_lease(lease)),
        ),
        TxnOp::put(
            format!("{CONTROL}registered/{id}"),
            json!({"origin": id, "registered": "now", "lease": lease}).to_string(),
            None,
        ),
    ]);
    client.txn(txn).await.unwrap();
    lease
}

/// Puts `id`'s key on a lease of the caller's own (as another origin with a prefix grant
/// could), returning that lease.
async fn hijack(etcd: &Etcd, id: &str) -> i64 {
    let mut client = etcd.client().await;
    let lease = client.lease_grant(60, None).await.unwrap().id();
    client
        .put(
            origin_key(id),
            "{}",
            Some(PutOptions::new().with_lease(lease)),
        )
        .await
        .unwrap();
    lease
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_origin_key_is_put_back_at_once() {
    let etcd = Etcd::start().await;
    let register = Daemon::start(
        &etcd,
        "register",
        &["origin", "register", "a", "--ttl", "10"],
    );
    let key = origin_key("a");
    let lease = eventually(WAIT, "a registers", || lease_of(&etcd, &key)).await;
    let record = etcd
        .get_json(&format!("{CONTROL}registered/a"))
        .await
        .unwrap();
    assert_eq!(record["lease"], lease, "the record names the lease");

    let deleted = etcd
        .client()
        .await
        .delete(key.as_str(), None)
        .await
        .unwrap();
    let at = deleted.header().unwrap().revision();
    let back = eventually(WAIT, "a's key is back", || lease_of(&etcd, &key)).await;
    assert_eq!(back, lease, "on its own lease");
    logged(&register, "key-changed", 1).await;
    let log = register.log();
    assert!(
        log.contains(&format!("was deleted at revision {at}")),
        "{log}"
    );
    assert_eq!(register.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_put_on_a_foreign_lease_and_revoked_drains_nothing() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE", DE]).code, 0);
    let rebalance = Daemon::start(&etcd, "rebalance", &["rebalance", "--grace", "1s"]);
    logged(&rebalance, " live, ", 1).await;
    let register = Daemon::start(
        &etcd,
        "register",
        &["origin", "register", "a", "--ttl", "10"],
    );
    let key = origin_key("a");
    let lease = eventually(WAIT, "a registers", || lease_of(&etcd, &key)).await;
    logged(&rebalance, "a registered", 1).await;

    // Another origin puts a's key on its own lease, then revokes that lease.
    let foreign = hijack(&etcd, "a").await;
    etcd.client().await.lease_revoke(foreign).await.unwrap();

    logged(&register, "key-changed", 1).await;
    let back = eventually(WAIT, "a's key is back on its lease", || async {
        lease_of(&etcd, &key).await.filter(|back| *back == lease)
    })
    .await;
    assert_eq!(back, lease);
    // rebalance saw the change, and that a came back within the grace period.
    logged(&rebalance, "is back within the grace period", 1).await;
    assert!(
        etcd.get(&drain_key("a")).await.is_none(),
        "{}",
        rebalance.log()
    );
    assert!(lists(&etcd, "a").await);
    assert_eq!(register.terminate().await, 0);
    assert_eq!(rebalance.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_waits_for_the_grace_period_and_trusts_only_the_named_lease() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE", DE]).code, 0);
    let rebalance = Daemon::start(&etcd, "rebalance", &["rebalance", "--grace", "3s"]);
    logged(&rebalance, " live, ", 1).await;
    let first = register_by_hand(&etcd, "a").await;
    logged(&rebalance, "a registered", 1).await;

    // Gone (lease ended) and back on a new lease within the grace period: no drain.
    etcd.client().await.lease_revoke(first).await.unwrap();
    let second = register_by_hand(&etcd, "a").await;
    logged(&rebalance, "is back within the grace period", 1).await;
    assert!(
        etcd.get(&drain_key("a")).await.is_none(),
        "{}",
        rebalance.log()
    );

    // Gone for good: drained once the grace period has passed.
    etcd.client().await.lease_revoke(second).await.unwrap();
    eventually(WAIT, "a is drained", || async {
        etcd.get(&drain_key("a")).await.map(|_| ())
    })
    .await;
    assert!(!lists(&etcd, "a").await);

    // A put on a lease the record does not name restores nothing.
    hijack(&etcd, "a").await;
    logged(&rebalance, "which its registration record does not name", 1).await;
    // And a real registration after it still restores (so the put above was seen).
    register_by_hand(&etcd, "b").await;
    logged(&rebalance, "b registered", 1).await;
    assert!(
        etcd.get(&drain_key("a")).await.is_some(),
        "not restored on a foreign lease: {}",
        rebalance.log()
    );
    assert!(!lists(&etcd, "a").await);
    assert_eq!(rebalance.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_deleted_while_its_named_lease_lives_is_held_until_that_lease_ends() {
    let etcd = Etcd::start().await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE", DE]).code, 0);
    let rebalance = Daemon::start(&etcd, "rebalance", &["rebalance", "--grace", "500ms"]);
    logged(&rebalance, " live, ", 1).await;
    let lease = register_by_hand(&etcd, "a").await;
    logged(&rebalance, "a registered", 1).await;

    // Deleted by someone else; the lease its record names lives on: not drained.
    etcd.client()
        .await
        .delete(origin_key("a"), None)
        .await
        .unwrap();
    logged(&rebalance, "which its registration record names, lives", 1).await;
    assert!(
        etcd.get(&drain_key("a")).await.is_none(),
        "{}",
        rebalance.log()
    );
    assert!(lists(&etcd, "a").await);

    // That lease ends: drained after the next grace period, and "held" was said once.
    etcd.client().await.lease_revoke(lease).await.unwrap();
    eventually(WAIT, "a is drained", || async {
        etcd.get(&drain_key("a")).await.map(|_| ())
    })
    .await;
    assert!(!lists(&etcd, "a").await);
    let log = rebalance.log();
    assert_eq!(log.matches("held:").count(), 1, "{log}");
    assert_eq!(rebalance.terminate().await, 0);
}
