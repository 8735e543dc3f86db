//! Sessions that outlive etcd's auth tokens: etcd started with `--auth-token-ttl 5`
//! forgets a simple token after five seconds without use. The agent (publishing and
//! reporting) and dwctl's long-running commands must re-authenticate and go on after a
//! quiet spell three times that long. Needs `etcd` on PATH: run inside
//! `scripts/devenv exec --`.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::support::*;
use serde_json::Value;

/// etcd forgets a token unused for this many seconds.
const TOKEN_TTL: &str = "5";
/// The quiet spell: three token lifetimes without a request from the agent.
const QUIET: Duration = Duration::from_secs(16);

async fn dwctl_as_root(endpoints: &[String], args: &[&str]) -> (u8, Value) {
    let mut argv = vec![
        "dwctl".to_owned(),
        format!("--endpoints={}", endpoints.join(",")),
        "--user=root".to_owned(),
        "--password=root-pw".to_owned(),
        "--output=json".to_owned(),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    let cli = <dwctl::Cli as clap::Parser>::try_parse_from(&argv).unwrap();
    let (_trigger, shutdown) = dwctl::Shutdown::new();
    match dwctl::run_command(cli, shutdown).await {
        Ok(outcome) => (0, outcome.json),
        Err(dwctl::Error::Lagging(outcome)) => (dwctl::EXIT_LAGGING, outcome.json),
        Err(error) => (error.exit_code(), Value::String(error.to_string())),
    }
}

/// Root, and an `agent` user that may read the routing prefix and write its own report.
async fn enable_auth(cluster: &Cluster, node: &str) -> etcd_client::Client {
    let mut admin = cluster.client().await;
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("edge").await.unwrap();
    for permission in [
        etcd_client::Permission::read(PREFIX).with_prefix(),
        etcd_client::Permission::read_write(format!("/dw/nodes/{node}")),
        etcd_client::Permission::read_write(format!("/dw/nodes-seen/{node}")),
    ] {
        admin
            .role_grant_permission("edge", permission)
            .await
            .unwrap();
    }
    admin.user_add("agent", "agent-pw", None).await.unwrap();
    admin.user_grant_role("agent", "edge").await.unwrap();
    admin.auth_enable().await.unwrap();
    let options = etcd_client::ConnectOptions::new().with_user("root", "root-pw");
    etcd_client::Client::connect(cluster.endpoints(), Some(options))
        .await
        .unwrap()
}

fn node_revision(status: &Value, id: &str) -> Option<u64> {
    status["nodes"].as_array()?.iter().find(|n| n["id"] == id)?["revision"].as_u64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_go_on_after_the_auth_token_expired() {
    let dir = tempfile::tempdir().unwrap();
    let cluster =
        Cluster::start_with_flags(dir.path(), 1, None, &["--auth-token-ttl", TOKEN_TTL]).await;
    let endpoints = cluster.endpoints();
    let mut admin = cluster.client().await;
    put(&mut admin, &format!("{PREFIX}region/DE"), REGION).await;
    let mut root = enable_auth(&cluster, "edge-1").await;

    let password_file = dir.path().join("password");
    std::fs::write(&password_file, "agent-pw\n").unwrap();
    let snapshot = dir.path().join("routing.json");
    let mut args = agent_args(
        &endpoints,
        &snapshot,
        &[
            "--user=agent",
            &format!("--password-file={}", password_file.display()),
        ],
    );
    args.push("--node-id=edge-1".into());
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    converged(&mut root, &snapshot).await;
    eventually("the first report is written", || async {
        node_revision(&dwctl_as_root(&endpoints, &["status"]).await.1, "edge-1").is_some()
    })
    .await;

    // Quiet: the agent makes no request that would keep its token alive (lease
    // keep-alives do not), so etcd forgets it.
    tokio::time::sleep(QUIET).await;
    let started = Instant::now();
    let (code, written) =
        dwctl_as_root(&endpoints, &["region", "set", "FR", REGION, "--wait=20s"]).await;
    assert_eq!(
        code,
        0,
        "--wait after the quiet: {written}\n{}",
        agent.log()
    );
    let revision = written["revision"].as_u64().unwrap_or(0);
    let (code, status) = dwctl_as_root(&endpoints, &["status"]).await;
    assert_eq!(code, 0, "{status}");
    assert!(node_revision(&status, "edge-1").is_some_and(|r| r >= revision));
    eprintln!("reported again {:?} after the quiet", started.elapsed());
    let log = agent.log();
    assert!(!log.contains("invalid auth token"), "{log}");

    // And once more, a second token lifetime later.
    tokio::time::sleep(QUIET).await;
    let (code, written) =
        dwctl_as_root(&endpoints, &["region", "set", "GB", REGION, "--wait=20s"]).await;
    assert_eq!(code, 0, "second quiet: {written}\n{}", agent.log());
    assert!(agent.terminate().success(), "{}", agent.log());
    // The clean stop revoked the report's lease with a refreshed token.
    let log = agent.log();
    assert!(log.contains("lease revoked"), "{log}");
    let _ = Path::new("");
}
