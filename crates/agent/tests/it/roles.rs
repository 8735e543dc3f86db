//! `dwctl auth` with etcd auth on: the roles it makes let each component do its job (the
//! agent publishes and reports, an origin registers and revokes, rebalance and health
//! drain, the operator drains with --wait, the viewer reads status and history), and etcd
//! refuses each act outside a role (an agent writing routing or another node's report,
//! an origin writing a region or another origin's key, a viewer writing anything).
//! `--apply` twice changes nothing the second time; `--dry-run` writes nothing; password
//! files are 0600. Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::*;
use serde_json::Value;

const NODES: &str = "edge-1,edge-2";
const ORIGINS: &str = "fra-a,fra-b";
const DE: &str = r#"{"shard":"eu-1","origins":["fra-a","fra-b","fra-c"],"weight":{"fra-a":40,"fra-b":30,"fra-c":30}}"#;

/// A long-running dwctl command in this process until the trigger is pulled.
fn daemon(
    endpoints: &[String],
    user: &str,
    passwords: &Path,
    args: &[&str],
) -> (dwctl::ShutdownTrigger, tokio::task::JoinHandle<()>) {
    let mut argv = vec![
        "dwctl".to_owned(),
        format!("--endpoints={}", endpoints.join(",")),
        format!("--user={user}"),
        format!(
            "--password-file={}",
            passwords.join(format!("{user}.password")).display()
        ),
    ];
    argv.extend(args.iter().map(|s| s.to_string()));
    let cli = <dwctl::Cli as clap::Parser>::try_parse_from(&argv).unwrap();
    let (trigger, shutdown) = dwctl::Shutdown::new();
    let task = tokio::spawn(async move {
        dwctl::run_command(cli, shutdown).await.unwrap();
    });
    (trigger, task)
}

/// A client logged in as `user`.
async fn client_as(endpoints: &[String], user: &str, passwords: &Path) -> etcd_client::Client {
    let password = std::fs::read_to_string(passwords.join(format!("{user}.password"))).unwrap();
    let options = etcd_client::ConnectOptions::new().with_user(user, password.trim_end());
    etcd_client::Client::connect(endpoints, Some(options))
        .await
        .unwrap()
}

/// Asserts that etcd refuses `user`'s put of `key` for want of permission.
async fn refused(client: &mut etcd_client::Client, user: &str, key: &str) {
    let error = client
        .put(key, "{}", None)
        .await
        .expect_err(&format!("{user} may not write {key}"));
    assert!(
        error.to_string().contains("permission denied"),
        "{user} writing {key}: {error}"
    );
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    files
}

async fn role_names(client: &mut etcd_client::Client) -> Vec<String> {
    client.role_list().await.unwrap().roles().to_vec()
}

fn lists(region: &Option<(String, i64)>, origin: &str) -> bool {
    region.as_ref().is_some_and(|(value, _)| {
        serde_json::from_str::<Value>(value).unwrap()["origins"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o == origin)
    })
}

async fn get(mut client: etcd_client::Client, key: &str) -> Option<(String, i64)> {
    let response = client.get(key, None).await.unwrap();
    response
        .kvs()
        .first()
        .map(|kv| (String::from_utf8_lossy(kv.value()).into_owned(), kv.lease()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_role_does_its_job_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let endpoints = cluster.endpoints();
    let mut admin = cluster.client().await;
    put(&mut admin, &format!("{PREFIX}region/DE"), DE).await;
    // A role as the docs once had it: a prefix grant on every node's report.
    admin.role_add("edge").await.unwrap();
    admin
        .role_grant_permission(
            "edge",
            etcd_client::Permission::read_write("/dw/nodes/").with_prefix(),
        )
        .await
        .unwrap();
    let passwords = dir.path().join("passwords");
    std::fs::create_dir(&passwords).unwrap();
    let auth = ["auth", "--nodes", NODES, "--origins", ORIGINS];
    let with = |extra: &[&str]| -> Vec<String> {
        auth.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |args: Vec<String>| {
        let endpoints = endpoints.clone();
        async move {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            dwctl_as(&endpoints, None, &args).await
        }
    };

    // Printing needs no etcd.
    let (code, printed) = dwctl_as(&["http://127.0.0.1:1".to_owned()], None, &auth).await;
    assert_eq!(code, 0, "{printed}");
    // Two agents, two origins, and rebalance, health, autopilot, operator, viewer.
    assert_eq!(printed["roles"].as_array().unwrap().len(), 2 + 2 + 5);

    // A dry run writes nothing; a password dir others can write is refused.
    let dir_flag = format!("--password-dir={}", passwords.display());
    let (code, dry) = run(with(&["--apply", "--dry-run"])).await;
    assert_eq!(code, 0, "{dry}");
    assert!(dry["steps"].as_array().unwrap().len() > 8, "{dry}");
    assert_eq!(role_names(&mut admin).await, ["edge"]);
    let (code, _) = run(with(&["--apply"])).await;
    assert_eq!(code, 2, "new users need --password-dir");
    std::fs::set_permissions(&passwords, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (code, error) = run(with(&["--apply", &dir_flag])).await;
    assert_eq!(code, 2, "{error}");
    assert!(error.to_string().contains("writable by others"), "{error}");
    std::fs::set_permissions(&passwords, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(role_names(&mut admin).await, ["edge"]);
    assert!(files(&passwords).is_empty());

    // --apply makes them; each password is in a 0600 file and in no output.
    let (code, applied) = run(with(&["--apply", &dir_flag])).await;
    assert_eq!(code, 0, "{applied}");
    assert_eq!(applied["changed"], true);
    let written = files(&passwords);
    assert_eq!(written.len(), 2 + 2 + 5, "{written:?}");
    for file in &written {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", file.display());
        let password = std::fs::read_to_string(file).unwrap();
        assert!(!applied.to_string().contains(password.trim_end()));
    }
    // The prefix grant the exact-key roles replace is gone.
    let edge = admin.role_get("edge").await.unwrap();
    assert!(edge.permissions().is_empty(), "{:?}", edge.permissions());

    // A second run changes nothing.
    let (code, again) = run(with(&["--apply", &dir_flag])).await;
    assert_eq!(code, 0, "{again}");
    assert_eq!(again["changed"], false, "{again}");
    assert_eq!(again["steps"], Value::Array(Vec::new()), "{again}");
    assert_eq!(files(&passwords), written, "no new password file");

    // Auth on.
    admin.user_add("root", "root-pw", None).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.auth_enable().await.unwrap();
    let options = etcd_client::ConnectOptions::new().with_user("root", "root-pw");
    let mut root = etcd_client::Client::connect(&endpoints, Some(options))
        .await
        .unwrap();

    // The agent publishes and reports with its role.
    let snapshot = dir.path().join("routing.json");
    let password_file = passwords.join("dw-agent-edge-1.password");
    let mut args = agent_args(
        &endpoints,
        &snapshot,
        &[
            "--user=dw-agent-edge-1",
            &format!("--password-file={}", password_file.display()),
        ],
    );
    args.push("--node-id=edge-1".into());
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
    converged(&mut root, &snapshot).await;
    let viewer = Some(("dw-viewer", passwords.as_path()));
    eventually("the viewer sees edge-1 report", || async {
        let (code, status) = dwctl_as(&endpoints, viewer, &["status"]).await;
        code == 0
            && status["nodes"]
                .as_array()
                .is_some_and(|nodes| nodes.iter().any(|node| node["id"] == "edge-1"))
    })
    .await;

    // ... and nothing else.
    let mut edge_1 = client_as(&endpoints, "dw-agent-edge-1", &passwords).await;
    for key in [
        format!("{PREFIX}region/DE"),
        format!("{PREFIX}origin/fra-a"),
        "/dw/nodes/edge-2".to_owned(),
        "/dw/nodes-seen/edge-2".to_owned(),
        "/dw/control/drains/fra-a".to_owned(),
    ] {
        refused(&mut edge_1, "dw-agent-edge-1", &key).await;
    }

    // An origin registers; it may write nothing but its own two keys.
    let (origin_stop, origin_task) = daemon(
        &endpoints,
        "dw-origin-fra-a",
        &passwords,
        &["origin", "register", "fra-a", "--ttl", "5"],
    );
    let origin_key = format!("{PREFIX}origin/fra-a");
    eventually("fra-a registers", || async {
        get(root.clone(), &origin_key).await.is_some()
    })
    .await;
    let mut fra_a = client_as(&endpoints, "dw-origin-fra-a", &passwords).await;
    for key in [
        format!("{PREFIX}region/DE"),
        format!("{PREFIX}origin/fra-b"),
        "/dw/control/registered/fra-b".to_owned(),
        "/dw/nodes/edge-1".to_owned(),
    ] {
        refused(&mut fra_a, "dw-origin-fra-a", &key).await;
    }

    // The viewer reads status, history and origins, and writes nothing.
    let (code, history) = dwctl_as(&endpoints, viewer, &["history", "region/DE"]).await;
    assert_eq!(code, 0, "{history}");
    let (code, listed) = dwctl_as(&endpoints, viewer, &["origin", "list"]).await;
    assert_eq!(code, 0, "{listed}");
    let (code, error) = dwctl_as(&endpoints, viewer, &["region", "set", "FR", DE]).await;
    assert_ne!(code, 0, "{error}");
    assert!(error.to_string().contains("permission denied"), "{error}");
    let mut view = client_as(&endpoints, "dw-viewer", &passwords).await;
    for key in [
        format!("{PREFIX}region/FR"),
        "/dw/control/drains/fra-c".to_owned(),
        "/dw/nodes/edge-9".to_owned(),
        "/dw/nodes-seen/edge-9".to_owned(),
    ] {
        refused(&mut view, "dw-viewer", &key).await;
    }

    // The operator drains, and --wait hears the agent report it.
    let operator = Some(("dw-operator", passwords.as_path()));
    let (code, drained) = dwctl_as(&endpoints, operator, &["drain", "fra-b", "--wait=20s"]).await;
    assert_eq!(code, 0, "{drained}\n{}", agent.log());
    let (code, restored) =
        dwctl_as(&endpoints, operator, &["restore", "fra-b", "--wait=20s"]).await;
    assert_eq!(code, 0, "{restored}");
    let mut operator_client = client_as(&endpoints, "dw-operator", &passwords).await;
    refused(&mut operator_client, "dw-operator", "/dw/nodes/edge-1").await;

    // Health drains an origin that fails its probe (a closed port).
    let closed = free_port();
    let probe = format!("fra-c=http://127.0.0.1:{closed}/");
    let (health_stop, health_task) = daemon(
        &endpoints,
        "dw-health",
        &passwords,
        &[
            "health",
            "--probe",
            &probe,
            "--interval=0.2",
            "--fail-after=1",
            "--max-drained-fraction=1",
        ],
    );
    eventually("health drains fra-c", || async {
        get(root.clone(), "/dw/control/drains/fra-c")
            .await
            .is_some()
    })
    .await;
    health_stop.trigger();
    health_task.await.unwrap();

    // Rebalance drains fra-a once its origin stops (the lease revoked with its role).
    let (rebalance_stop, rebalance_task) = daemon(
        &endpoints,
        "dw-rebalance",
        &passwords,
        &["rebalance", "--grace=200ms"],
    );
    let region_key = format!("{PREFIX}region/DE");
    assert!(lists(&get(root.clone(), &region_key).await, "fra-a"));
    origin_stop.trigger();
    origin_task.await.unwrap();
    assert!(
        get(root.clone(), &origin_key).await.is_none(),
        "the origin revoked its lease"
    );
    eventually("rebalance drains fra-a", || async {
        get(root.clone(), "/dw/control/drains/fra-a")
            .await
            .is_some()
    })
    .await;
    assert!(!lists(&get(root.clone(), &region_key).await, "fra-a"));
    // ... and restores it when it registers again.
    let (origin_stop, origin_task) = daemon(
        &endpoints,
        "dw-origin-fra-a",
        &passwords,
        &["origin", "register", "fra-a", "--ttl", "5"],
    );
    eventually("rebalance restores fra-a", || async {
        get(root.clone(), "/dw/control/drains/fra-a")
            .await
            .is_none()
            && lists(&get(root.clone(), &region_key).await, "fra-a")
    })
    .await;
    origin_stop.trigger();
    origin_task.await.unwrap();
    rebalance_stop.trigger();
    rebalance_task.await.unwrap();

    assert!(agent.terminate().success(), "{}", agent.log());
    let log = agent.log();
    assert!(!log.contains("permission denied"), "{log}");
}
