//! The long-running commands outlive etcd's auth tokens: with `--auth-token-ttl 5` etcd
//! forgets a token after five seconds without use, and `rebalance` and `origin register`
//! (each with the role `dwctl auth` makes for it) must re-authenticate after quiet spells
//! three times that long and go on: put back a deleted key, revoke at SIGTERM, drain,
//! restore; and `health` drains a failing origin and restores it after its own quiet spell.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::probe::health_server;
use crate::common::{CONTROL, Etcd, PREFIX, drain_key, eventually};

const DE: &str = r#"{"shard":"eu-1","origins":["a","b"],"weight":{"a":50,"b":50}}"#;
const QUIET: Duration = Duration::from_secs(16);
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rebalance_and_origin_register_go_on_after_the_auth_token_expired() {
    let etcd = Etcd::start_with_flags(None, &["--auth-token-ttl", "5"]).await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE", DE]).code, 0);
    let passwords = etcd.data_dir.join("passwords");
    std::fs::create_dir(&passwords).unwrap();
    let dir = format!("--password-dir={}", passwords.display());
    let made = etcd.dwctl(&["auth", "--origins", "a", "--apply", &dir]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let options = etcd_client::ConnectOptions::new()
        .with_user("root", "root-pw")
        .with_auto_token_refresh(true);
    let mut root = etcd_client::Client::connect([etcd.endpoint()], Some(options))
        .await
        .unwrap();
    let as_user = |user: &str, args: &[&str]| -> Vec<String> {
        let mut all = vec![
            format!("--user={user}"),
            format!(
                "--password-file={}",
                passwords.join(format!("{user}.password")).display()
            ),
        ];
        all.extend(args.iter().map(|s| s.to_string()));
        all
    };
    let start = |name: &str, args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        Daemon::start(&etcd, name, &args)
    };
    let rebalance = start(
        "rebalance",
        as_user("dw-rebalance", &["rebalance", "--grace", "200ms"]),
    );
    // Registering after rebalance has listed makes it see `a` arrive on its watch.
    eventually(WAIT, "rebalance lists", || async {
        rebalance.log().contains(" live, ").then_some(())
    })
    .await;
    let register_args = as_user("dw-origin-a", &["origin", "register", "a", "--ttl", "3"]);
    let register = start("register-1", register_args.clone());
    let key = format!("{PREFIX}origin/a");
    eventually(WAIT, "rebalance sees a", || async {
        rebalance.log().contains("a registered").then_some(())
    })
    .await;

    // 1. Quiet; then a's key is deleted: register puts it back (a fresh token).
    tokio::time::sleep(QUIET).await;
    root.delete(key.as_str(), None).await.unwrap();
    eventually(WAIT, "register puts a back", || async {
        register.log().contains("re-registered").then_some(())
    })
    .await;
    eventually(WAIT, "a's key is back", || {
        let mut root = root.clone();
        let key = key.clone();
        async move {
            let response = root.get(key, None).await.ok()?;
            (!response.kvs().is_empty()).then_some(())
        }
    })
    .await;

    // 2. Quiet; then register stops: it revokes its lease, rebalance drains a.
    tokio::time::sleep(QUIET).await;
    let log = register.log();
    assert_eq!(register.terminate().await, 0, "{log}");
    eventually(WAIT, "rebalance drains a", || {
        let mut root = root.clone();
        async move {
            let response = root.get(drain_key("a"), None).await.ok()?;
            (!response.kvs().is_empty()).then_some(())
        }
    })
    .await;

    // 3. Quiet; then a registers again: rebalance restores it.
    tokio::time::sleep(QUIET).await;
    let again = start("register-2", register_args);
    eventually(WAIT, "rebalance restores a", || {
        let mut root = root.clone();
        async move {
            let response = root.get(drain_key("a"), None).await.ok()?;
            response.kvs().is_empty().then_some(())
        }
    })
    .await;
    let logs = format!(
        "{}\n{}\n{}",
        rebalance.log(),
        std::fs::read_to_string(etcd.data_dir.join("register-1.log")).unwrap_or_default(),
        again.log()
    );
    assert!(!logs.contains("invalid auth token"), "{logs}");
    assert!(logs.contains("lease revoked"), "{logs}");
    assert!(
        root.get(format!("{CONTROL}registered/a"), None)
            .await
            .unwrap()
            .kvs()
            .len()
            == 1
    );
    assert_eq!(again.terminate().await, 0);
    assert_eq!(rebalance.terminate().await, 0);
}

/// `dwctl health` with the `dw-health` role: its probes pass for a quiet spell longer than
/// the token's TTL (health writes nothing while every origin is healthy), then an origin
/// fails and is drained, recovers and is restored, with no `invalid auth token` on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_drains_and_restores_after_the_auth_token_expired() {
    let etcd = Etcd::start_with_flags(None, &["--auth-token-ttl", "5"]).await;
    assert_eq!(etcd.dwctl(&["region", "set", "DE", DE]).code, 0);
    let passwords = etcd.data_dir.join("passwords");
    std::fs::create_dir(&passwords).unwrap();
    let dir = format!("--password-dir={}", passwords.display());
    let made = etcd.dwctl(&["auth", "--apply", &dir]);
    assert_eq!(made.code, 0, "{}", made.stderr);
    let mut admin = etcd.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let options = etcd_client::ConnectOptions::new()
        .with_user("root", "root-pw")
        .with_auto_token_refresh(true);
    let root = etcd_client::Client::connect([etcd.endpoint()], Some(options))
        .await
        .unwrap();
    let a_healthy = Arc::new(AtomicBool::new(true));
    let a_probe = format!("a={}", health_server(a_healthy.clone()).await);
    let b_probe = format!("b={}", health_server(Arc::new(AtomicBool::new(true))).await);
    let password_file = format!(
        "--password-file={}",
        passwords.join("dw-health.password").display()
    );
    let health = Daemon::start(
        &etcd,
        "health",
        &[
            "--user=dw-health",
            &password_file,
            "health",
            "--interval",
            "0.2",
            "--probe-timeout",
            "1",
            "--fail-after",
            "2",
            "--recover-after",
            "2",
            "--probe",
            &a_probe,
            "--probe",
            &b_probe,
        ],
    );
    let drained = |root: &etcd_client::Client| {
        let mut root = root.clone();
        async move {
            let response = root.get(drain_key("a"), None).await.ok()?;
            Some(!response.kvs().is_empty())
        }
    };

    // Quiet: every probe passes, health writes nothing and its token expires.
    tokio::time::sleep(QUIET).await;
    assert_eq!(drained(&root).await, Some(false), "{}", health.log());

    // a fails: drained with a fresh token.
    a_healthy.store(false, Ordering::SeqCst);
    eventually(WAIT, "health drains a", || async {
        (drained(&root).await == Some(true)).then_some(())
    })
    .await;

    // Quiet again while a stays drained; then a recovers: restored.
    tokio::time::sleep(QUIET).await;
    a_healthy.store(true, Ordering::SeqCst);
    eventually(WAIT, "health restores a", || async {
        (drained(&root).await == Some(false)).then_some(())
    })
    .await;
    let log = health.log();
    assert!(!log.contains("invalid auth token"), "{log}");
    assert_eq!(health.terminate().await, 0, "{log}");
}
