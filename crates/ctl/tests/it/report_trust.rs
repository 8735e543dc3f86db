//! Whether `dwctl status` and `--wait` believe a node report: a report must live on the
//! lease it and its seen record name; a report that vanished while that lease lives is
//! `missing`, not `gone`. The reports here are written by the test, as a forger (or a
//! careless operator) would, against real etcd.

use crate::common::fleet::agent_report;
use crate::common::{DE, Etcd};
use etcd_client::PutOptions;
use serde_json::Value;

/// A well-formed report (from the type); only where it is put, and on which lease, is
/// forged.
fn report(node: &str, revision: i64, lease: i64) -> String {
    agent_report(node, lease, revision, "ok").to_json()
}

async fn lease(etcd: &Etcd, ttl: i64) -> i64 {
    etcd.client()
        .await
        .lease_grant(ttl, None)
        .await
        .unwrap()
        .id()
}

async fn put_on(etcd: &Etcd, key: &str, value: &str, lease: i64) {
    let options = (lease != 0).then(|| PutOptions::new().with_lease(lease));
    etcd.client().await.put(key, value, options).await.unwrap();
}

fn node<'v>(status: &'v Value, id: &str) -> &'v Value {
    status["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"] == id))
        .unwrap_or_else(|| panic!("{id} is not in {status}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_off_their_lease_are_not_believed() {
    let etcd = Etcd::start().await;
    crate::common::seed(&etcd, &[("DE", DE)]).await;
    let high = 999_999;

    // An honest node: both keys name the lease the live key is on.
    let (live, seen) = (lease(&etcd, 60).await, lease(&etcd, 600).await);
    put_on(
        &etcd,
        "/dw/nodes/honest",
        &report("honest", high, live),
        live,
    )
    .await;
    put_on(
        &etcd,
        "/dw/nodes-seen/honest",
        &report("honest", high, live),
        seen,
    )
    .await;
    let (code, status, stderr) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 0, "{status} {stderr}");
    assert_eq!(node(&status, "honest")["state"], "ok");

    // A forged report on no lease would count as live for ever.
    put_on(&etcd, "/dw/nodes/forged", &report("forged", high, 0), 0).await;
    let (code, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 5, "{status}");
    let forged = node(&status, "forged");
    assert_eq!(forged["state"], "untrusted", "{status}");
    assert!(
        forged["reason"].as_str().unwrap().contains("no lease"),
        "{status}"
    );
    assert_eq!(status["current"], 1);
    // The same forgery without a lease field at all (`{"revision":999999,"state":"ok"}`).
    put_on(
        &etcd,
        "/dw/nodes/forged",
        r#"{"revision":999999,"state":"ok"}"#,
        0,
    )
    .await;
    let (code, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 5, "{status}");
    assert_eq!(node(&status, "forged")["state"], "untrusted");
    etcd.client()
        .await
        .delete("/dw/nodes/forged", None)
        .await
        .unwrap();

    // A forger's report on a lease of its own: the seen record names another lease.
    let (victim_live, victim_seen) = (lease(&etcd, 60).await, lease(&etcd, 600).await);
    let own = lease(&etcd, 60).await;
    put_on(
        &etcd,
        "/dw/nodes-seen/victim",
        &report("victim", 1, victim_live),
        victim_seen,
    )
    .await;
    put_on(&etcd, "/dw/nodes/victim", &report("victim", high, own), own).await;
    let (code, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 5, "{status}");
    let victim = node(&status, "victim");
    assert_eq!(victim["state"], "untrusted", "{status}");
    assert!(
        victim["reason"].as_str().unwrap().contains("seen record"),
        "{status}"
    );
    // --wait does not count it either.
    let waited = etcd.dwctl(&["region", "set", "FR", DE, "--wait=1s"]);
    assert_eq!(waited.code, 5, "{}", waited.stdout);
    assert!(
        waited.stdout.contains("lagging victim"),
        "{}",
        waited.stdout
    );

    // Its report deleted while the lease its seen record names lives: missing, lagging.
    etcd.client()
        .await
        .delete("/dw/nodes/victim", None)
        .await
        .unwrap();
    let (code, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 5, "{status}");
    let victim = node(&status, "victim");
    assert_eq!(victim["state"], "missing", "{status}");
    assert_eq!(victim["live"], true);
    let text = etcd.dwctl(&["status"]);
    assert!(text.stdout.contains("missing ("), "{}", text.stdout);

    // Once that lease is gone (a clean stop revokes it), the node is gone and holds
    // nothing up.
    etcd.client().await.lease_revoke(victim_live).await.unwrap();
    let (code, status, _) = etcd.dwctl_json(&["status"]);
    assert_eq!(code, 0, "{status}");
    assert_eq!(node(&status, "victim")["state"], "gone");
}
