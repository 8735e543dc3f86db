//! How dwctl reaches etcd: with authentication, with mutual TLS, and past an endpoint that
//! is down.

use std::time::Duration;

use crate::common::{Etcd, TestTls, eventually};

const DE: &str = r#"{"shard":"eu-1","origins":["a"],"weight":{"a":100}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password() {
    let etcd = Etcd::start().await;
    etcd.etcdctl(&["user", "add", "root:s3cret", "--interactive=false"]);
    etcd.etcdctl(&["auth", "enable"]);

    let anonymous = etcd.dwctl(&["region", "set", "DE", DE]);
    assert_eq!(anonymous.code, 1, "{}", anonymous.stderr);
    let wrong = etcd.dwctl(&["--user", "root", "--password", "nope", "region", "list"]);
    assert_eq!(wrong.code, 1, "{}", wrong.stderr);
    let half = etcd.dwctl(&["--user", "root", "region", "list"]);
    assert_eq!(half.code, 2, "--user without --password is a usage error");

    let run = etcd.dwctl(&[
        "--user",
        "root",
        "--password",
        "s3cret",
        "region",
        "set",
        "DE",
        DE,
    ]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let mut env = etcd.command(&["region", "get", "DE"]);
    env.env("DWCTL_USER", "root")
        .env("DWCTL_PASSWORD", "s3cret");
    let got = crate::common::run(env);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert!(got.stdout.contains("eu-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls() {
    let certificates = TestTls::shared();
    let etcd = Etcd::start_tls(certificates).await;
    let (cacert, cert, key) = (
        certificates.ca.display().to_string(),
        certificates.client_cert.display().to_string(),
        certificates.client_key.display().to_string(),
    );
    let tls = [
        "--cacert",
        cacert.as_str(),
        "--cert",
        cert.as_str(),
        "--key",
        key.as_str(),
    ];

    let args: Vec<&str> = tls
        .iter()
        .copied()
        .chain(["--timeout", "2", "region", "set", "DE", DE])
        .collect();
    eventually(
        Duration::from_secs(15),
        "a write over mutual TLS",
        || async {
            let run = etcd.dwctl(&args);
            (run.code == 0).then_some(())
        },
    )
    .await;
    let args: Vec<&str> = tls
        .iter()
        .copied()
        .chain(["--output", "json", "region", "get", "DE"])
        .collect();
    let got = etcd.dwctl(&args);
    assert_eq!(got.code, 0, "{}", got.stderr);
    assert!(got.stdout.contains("\"shard\":\"eu-1\""), "{}", got.stdout);

    // Without a client certificate the server refuses; a missing file is a plain error.
    let anonymous = etcd.dwctl(&["--cacert", &cacert, "--timeout", "2", "region", "list"]);
    assert_eq!(anonymous.code, 1, "{}", anonymous.stderr);
    let missing = etcd.dwctl(&["--cacert", "/nonexistent/ca.crt", "region", "list"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("/nonexistent/ca.crt"),
        "{}",
        missing.stderr
    );
    let half = etcd.dwctl(&["--cacert", &cacert, "--cert", &cert, "region", "list"]);
    assert_eq!(half.code, 2, "--cert without --key is a usage error");
}

/// With several endpoints, a member that is down does not fail the command: dwctl talks
/// to one that answers. (A channel balanced over every endpoint failed about half of the
/// writes while one of three members was down.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_endpoint_among_several_does_not_fail_commands() {
    let etcd = Etcd::start().await;
    // A port nothing listens on: bound, then released.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        format!("http://{}", listener.local_addr().expect("addr"))
    };
    let endpoints = format!("{dead},{}", etcd.endpoint());
    for attempt in 0..12 {
        let mut command = etcd.command(&["region", "set", "DE", DE]);
        command.env("DWCTL_ENDPOINTS", &endpoints);
        let run = crate::common::run(command);
        assert_eq!(run.code, 0, "attempt {attempt}: {}", run.stderr);
    }
    // Only dead endpoints: an error naming etcd, exit 1.
    let mut command = etcd.command(&["region", "list"]);
    command.env("DWCTL_ENDPOINTS", format!("{dead},{dead}"));
    let run = crate::common::run(command);
    assert_eq!(run.code, 1, "{}", run.stderr);
}
