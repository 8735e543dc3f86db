//! The `dw-agent` binary as an operator runs it: flags, signals, exit codes, and what it
//! leaves on disk. Needs `etcd` on PATH: run inside `scripts/devenv exec --`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_a_write_storm_never_leaves_a_torn_file() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot_dir = dir.path().join("shm");
    fs::create_dir(&snapshot_dir).unwrap();
    let snapshot = snapshot_dir.join("dw-routing.json");
    let args = agent_args(&cluster.endpoints(), &snapshot, &[]);
    let stderr = dir.path().join("agent.log");

    let mut agent = AgentProcess::spawn(&args, &stderr);
    eventually("the first snapshot", || async { snapshot.exists() }).await;
    let watcher = FileWatcher::start(&snapshot);
    let storm = Storm::start(client.clone());
    for round in 0..30u64 {
        // Let it publish a few times (or at least try to), then kill it wherever it is.
        let before = read_snapshot(&snapshot).unwrap().revision;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(150 + 37 * (round % 5));
        while tokio::time::Instant::now() < deadline
            && read_snapshot(&snapshot).unwrap().revision == before
        {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(7 * (round % 4))).await;
        signal(agent.child.id(), libc::SIGKILL);
        let _ = agent.child.wait();
        agent = AgentProcess::spawn(&args, &stderr);
    }
    let writes = storm.stop().await;
    assert!(writes > 0);
    let last = converged(&mut client, &snapshot).await;
    let seen = watcher.finish();
    assert!(seen.len() > 1, "the file never changed during the storm");
    assert_each_matches_etcd(&mut client, &seen).await;
    assert_eq!(last.kvs, etcd_state(&mut client, last.revision).await.1);

    // A clean stop leaves the snapshot (and its heartbeat file), and the last agent
    // removed the temp files the killed ones left behind.
    assert!(agent.terminate().success(), "{}", agent.log());
    let mut names: Vec<String> = fs::read_dir(&snapshot_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ".dw-routing.json.lock",
            "dw-routing.json",
            "dw-routing.json.heartbeat"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_down_and_agent_restarted_keeps_the_file_then_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("dw-routing.json");
    let metrics_port = free_port();
    let metrics_flag = format!("--metrics-addr=127.0.0.1:{metrics_port}");
    let args = agent_args(&cluster.endpoints(), &snapshot, &[&metrics_flag]);
    let metrics_addr = format!("127.0.0.1:{metrics_port}").parse().unwrap();

    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent-1.log"));
    converged(&mut client, &snapshot).await;
    eventually("healthy", || async {
        http_get(metrics_addr, "/healthz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    assert!(agent.terminate().success(), "{}", agent.log());

    cluster.members[0].kill();
    let before = fs::read(&snapshot).unwrap();
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent-2.log"));
    eventually("the agent has retried a few times", || async {
        http_get(metrics_addr, "/metrics")
            .await
            .and_then(|(_, text)| metric(&text, "dw_agent_reconnects_total"))
            .is_some_and(|reconnects| reconnects >= 3.0)
    })
    .await;
    let (code, reason) = http_get(metrics_addr, "/healthz").await.unwrap();
    assert_eq!(code, 503, "{reason}");
    assert_eq!(
        fs::read(&snapshot).unwrap(),
        before,
        "the file changed while etcd was down"
    );

    cluster.members[0].restart();
    assert!(cluster.wait_ready().await, "etcd did not come back");
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/FR"), REGION).await;
    let caught_up = converged(&mut client, &snapshot).await;
    assert!(caught_up.kvs.contains_key(&format!("{PREFIX}region/FR")));
    assert!(agent.terminate().success(), "{}", agent.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_endpoints_are_retried_in_turn_without_touching_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("dw-routing.json");
    let old = br#"{"format":1,"revision":7,"kvs":{"/dw/routing/region/DE":"{}"}}"#;
    fs::write(&snapshot, old).unwrap();
    let endpoints = [
        format!("127.0.0.1:{}", free_port()),
        format!("127.0.0.1:{}", free_port()),
    ];
    let metrics_port = free_port();
    let metrics_flag = format!("--metrics-addr=127.0.0.1:{metrics_port}");
    let args = agent_args(&endpoints, &snapshot, &[&metrics_flag]);
    let metrics_addr = format!("127.0.0.1:{metrics_port}").parse().unwrap();
    let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));

    eventually("both endpoints were tried", || async {
        let log = agent.log();
        endpoints
            .iter()
            .all(|e| log.contains(&format!("http://{e}")))
    })
    .await;
    let log = agent.log();
    assert!(log.contains("Connection refused"), "{log}");
    let (code, reason) = http_get(metrics_addr, "/healthz").await.unwrap();
    assert_eq!(code, 503);
    assert!(reason.contains("127.0.0.1"), "{reason}");
    assert!(
        agent.child.try_wait().unwrap().is_none(),
        "gave up instead of retrying"
    );
    assert_eq!(fs::read(&snapshot).unwrap(), old);
    assert!(agent.terminate().success());
    assert_eq!(fs::read(&snapshot).unwrap(), old);
}

#[test]
fn a_bad_certificate_stops_the_agent_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let snapshot = dir.path().join("dw-routing.json");
    let old = br#"{"format":1,"revision":7,"kvs":{}}"#;
    fs::write(&snapshot, old).unwrap();
    let garbage = dir.path().join("ca.pem");
    fs::write(
        &garbage,
        "-----BEGIN CERTIFICATE-----\nnot base64 at all!\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let missing = dir.path().join("nowhere.pem");
    for (cacert, expected) in [(&garbage, "ca.pem"), (&missing, "nowhere.pem")] {
        let args = agent_args(
            &["127.0.0.1:2379".to_owned()],
            &snapshot,
            &[&format!("--cacert={}", cacert.display())],
        );
        let mut agent = AgentProcess::spawn(&args, &dir.path().join("agent.log"));
        let status = agent.wait_exit();
        let log = agent.log();
        assert_eq!(status.code(), Some(1), "{log}");
        assert!(log.contains(expected) && log.contains("--cacert"), "{log}");
        assert_eq!(fs::read(&snapshot).unwrap(), old);
    }
}

#[test]
fn an_unwritable_snapshot_directory_stops_the_agent_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let read_only = dir.path().join("ro");
    fs::create_dir(&read_only).unwrap();
    let snapshot = read_only.join("dw-routing.json");
    let old = br#"{"format":1,"revision":7,"kvs":{}}"#;
    fs::write(&snapshot, old).unwrap();
    fs::set_permissions(&snapshot, fs::Permissions::from_mode(0o644)).unwrap();
    fs::set_permissions(&read_only, fs::Permissions::from_mode(0o555)).unwrap();
    let log_path = dir.path().join("agent.log");
    fs::File::create(&log_path).unwrap();
    fs::set_permissions(&log_path, fs::Permissions::from_mode(0o666)).unwrap();

    let args = agent_args(&["127.0.0.1:2379".to_owned()], &snapshot, &[]);
    // Root ignores directory permissions: drop to nobody for the agent.
    let command = if unsafe { libc::geteuid() } == 0 {
        let mut command = Command::new("setpriv");
        command.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        command.arg(env!("CARGO_BIN_EXE_dw-agent"));
        command
    } else {
        Command::new(env!("CARGO_BIN_EXE_dw-agent"))
    };
    let mut agent = AgentProcess::spawn_with(command, &args, &log_path);
    let status = agent.wait_exit();
    let log = agent.log();
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(
        log.contains(&read_only.display().to_string()) && log.contains("ermission denied"),
        "{log}"
    );
    assert_eq!(fs::read(&snapshot).unwrap(), old);
}

#[test]
fn usage_errors_exit_with_status_2() {
    // No flag is required (--endpoints defaults to a local etcd): an unknown one, and a
    // bad value, are usage errors.
    for (args, named) in [
        (&["--no-such-flag"][..], "--no-such-flag"),
        (&["--stall-timeout", "soon"][..], "--stall-timeout"),
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_dw-agent"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&output.stderr).contains(named),
            "{args:?}"
        );
    }
    let help = Command::new(env!("CARGO_BIN_EXE_dw-agent"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(help.status.success());
    let help = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--endpoints",
        "--prefix",
        "--snapshot",
        "--metrics-addr",
        "--user",
        "--password",
        "--cacert",
        "--cert",
        "--key",
        "--allow-empty",
        "--trusted-owner",
        "DW_AGENT_ENDPOINTS",
    ] {
        assert!(help.contains(flag), "--help lacks {flag}");
    }
}

#[test]
fn environment_variables_stand_in_for_flags() {
    let dir = tempfile::tempdir().unwrap();
    // The snapshot path comes from the environment; its directory is missing, so the
    // agent names it when it refuses to start.
    let snapshot = dir.path().join("from-env/dw-routing.json");
    let output = Command::new(env!("CARGO_BIN_EXE_dw-agent"))
        .env("DW_AGENT_ENDPOINTS", "127.0.0.1:2379")
        .env("DW_AGENT_SNAPSHOT", &snapshot)
        .env("DW_AGENT_METRICS_ADDR", "off")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("from-env"), "{stderr}");
    // The cause is said once, not once per level of the error chain.
    assert_eq!(
        stderr.matches("No such file or directory").count(),
        1,
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_client_certificates_and_a_certificate_from_the_wrong_ca() {
    let dir = tempfile::tempdir().unwrap();
    let tls = TestTls::shared().clone();
    let cluster = Cluster::start_with(dir.path(), 1, Some(tls.clone())).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    let snapshot = dir.path().join("dw-routing.json");
    let old = br#"{"format":1,"revision":1,"kvs":{"/dw/routing/region/XX":"{}"}}"#;
    fs::write(&snapshot, old).unwrap();
    let flags = |ca: &Path| {
        let flags = [
            format!("--cacert={}", ca.display()),
            format!("--cert={}", tls.client_cert.display()),
            format!("--key={}", tls.client_key.display()),
        ];
        agent_args(
            &cluster.endpoints(),
            &snapshot,
            &flags.iter().map(String::as_str).collect::<Vec<_>>(),
        )
    };

    // Members whose certificate the CA bundle does not vouch for: refused, retried, logged.
    let mut wrong = AgentProcess::spawn(&flags(&tls.other_ca), &dir.path().join("wrong.log"));
    eventually("the certificate error is logged twice", || async {
        wrong.log().matches("certificate").count() >= 2
    })
    .await;
    assert!(
        wrong.child.try_wait().unwrap().is_none(),
        "gave up: {}",
        wrong.log()
    );
    assert_eq!(fs::read(&snapshot).unwrap(), old);
    assert!(wrong.terminate().success());

    // The right CA and a client certificate: mirrored over TLS.
    let mut right = AgentProcess::spawn(&flags(&tls.ca), &dir.path().join("right.log"));
    let published = converged(&mut client, &snapshot).await;
    assert!(published.kvs.contains_key(&format!("{PREFIX}region/DE")));
    assert!(right.terminate().success(), "{}", right.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticates_with_a_password_file_and_retries_a_wrong_password() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut admin = cluster.client().await;
    put(&mut admin, &format!("{PREFIX}region/DE"), REGION).await;
    let mut root = enable_auth_with_a_reader(&cluster).await;

    let snapshot = dir.path().join("dw-routing.json");
    let password_file = dir.path().join("password");
    fs::write(&password_file, "wrong\n").unwrap();
    let auth = [
        "--user=agent".to_owned(),
        format!("--password-file={}", password_file.display()),
    ];
    let args = agent_args(
        &cluster.endpoints(),
        &snapshot,
        &auth.iter().map(String::as_str).collect::<Vec<_>>(),
    );

    // A wrong password is retried (it may be fixed on the server) and logged; no file.
    let mut wrong = AgentProcess::spawn(&args, &dir.path().join("wrong.log"));
    eventually("the authentication failure is logged twice", || async {
        wrong.log().matches("authentication failed").count() >= 2
    })
    .await;
    assert!(
        wrong.child.try_wait().unwrap().is_none(),
        "gave up: {}",
        wrong.log()
    );
    assert!(!snapshot.exists());
    assert!(wrong.terminate().success());

    // The right password, from the file, with a role that may only read the prefix.
    fs::write(&password_file, "agent-pw\n").unwrap();
    let mut right = AgentProcess::spawn(&args, &dir.path().join("right.log"));
    converged(&mut root, &snapshot).await;
    put(&mut root, &format!("{PREFIX}region/FR"), REGION).await;
    let published = converged(&mut root, &snapshot).await;
    assert!(published.kvs.contains_key(&format!("{PREFIX}region/FR")));
    assert!(right.terminate().success(), "{}", right.log());
}

/// The agent as uid 65534 (root ignores the sticky bit): `setpriv` when the tests run as
/// root, else the binary itself (the test then plays no other user and says so).
fn agent_as_nobody() -> Option<Command> {
    // SAFETY: geteuid has no failure mode.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to play two users");
        return None;
    }
    let mut command = Command::new("setpriv");
    command.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
    command.arg(env!("CARGO_BIN_EXE_dw-agent"));
    Some(command)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_planted_in_a_sticky_directory_is_reported_naming_its_owner() {
    let Some(command) = agent_as_nobody() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let cluster = Cluster::start(dir.path(), 1).await;
    let mut client = cluster.client().await;
    put(&mut client, &format!("{PREFIX}region/DE"), REGION).await;
    // The documented /dev/shm setup, and uid 1001 got there first.
    let shared = dir.path().join("shm");
    fs::create_dir(&shared).unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o1777)).unwrap();
    let snapshot = shared.join("dw-routing.json");
    fs::write(&snapshot, br#"{"format":1,"revision":1,"kvs":{}}"#).unwrap();
    std::os::unix::fs::chown(&snapshot, Some(1001), Some(1001)).unwrap();
    let log_path = dir.path().join("agent.log");
    fs::File::create(&log_path).unwrap();
    fs::set_permissions(&log_path, fs::Permissions::from_mode(0o666)).unwrap();
    let port = free_port();
    let metrics = format!("--metrics-addr=127.0.0.1:{port}");
    let args = agent_args(
        &cluster.endpoints(),
        &snapshot,
        &[&metrics, "--trusted-owner=65534"],
    );
    let mut agent = AgentProcess::spawn_with(command, &args, &log_path);
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    // Stale, naming the file's owner, and retried with backoff: over several seconds of
    // progress ticks and retries the cause is logged once.
    eventually("healthz names the owner", || async {
        http_get(addr, "/healthz")
            .await
            .is_some_and(|(code, body)| code == 503 && body.contains("owned by uid 1001"))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let log = agent.log();
    assert_eq!(
        log.matches("cannot write the snapshot").count(),
        1,
        "one line per distinct cause:\n{log}"
    );
    assert!(log.contains("is sticky"), "{log}");
    let (_, text) = http_get(addr, "/metrics").await.unwrap();
    let attempts = metric(&text, "dw_agent_snapshot_write_errors_total").unwrap_or(0.0);
    // The backoff (50 ms doubling to 500 ms) allows about 8 attempts in 3 s, not one per
    // progress tick and event.
    assert!(
        (1.0..=20.0).contains(&attempts),
        "{attempts} write attempts"
    );
    // Removed by root: the next retry publishes, and the agent is healthy again.
    fs::remove_file(&snapshot).unwrap();
    eventually("healthy once the file is gone", || async {
        http_get(addr, "/healthz")
            .await
            .is_some_and(|(code, _)| code == 200)
    })
    .await;
    assert!(log_contains(&agent, "the snapshot can be written again"));
    assert!(agent.terminate().success(), "{}", agent.log());
}

fn log_contains(agent: &AgentProcess, text: &str) -> bool {
    agent.log().contains(text)
}
