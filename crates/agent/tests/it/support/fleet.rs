//! The fleet view from a test: `dwctl` run in-process (with the exit code it would
//! return) and agents that report as a node.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{EVENTUALLY, agent_args};

/// Runs a dwctl command line against `endpoints`: (exit code, the outcome's JSON).
pub async fn dwctl(endpoints: &[String], args: &[&str]) -> (u8, Value) {
    dwctl_as(endpoints, None, args).await
}

/// `dwctl ARGS` in this process, as `user` (its password file in `passwords`) or with no
/// credentials: the exit code it would return and the JSON outcome (or the error's text).
/// The one way the agent's tests run dwctl (through its library, as its binary does).
pub async fn dwctl_as(
    endpoints: &[String],
    user: Option<(&str, &Path)>,
    args: &[&str],
) -> (u8, Value) {
    let mut argv = vec![
        "dwctl".to_owned(),
        format!("--endpoints={}", endpoints.join(",")),
        "--output=json".to_owned(),
    ];
    if let Some((user, passwords)) = user {
        argv.push(format!("--user={user}"));
        argv.push(format!(
            "--password-file={}",
            passwords.join(format!("{user}.password")).display()
        ));
    }
    argv.extend(args.iter().map(|s| s.to_string()));
    let cli = <dwctl::Cli as clap::Parser>::try_parse_from(&argv).unwrap();
    let (_trigger, shutdown) = dwctl::Shutdown::new();
    match dwctl::run_command(cli, shutdown).await {
        Ok(outcome) => (0, outcome.json),
        Err(dwctl::Error::Lagging(outcome)) => (dwctl::EXIT_LAGGING, outcome.json),
        Err(error) => (error.exit_code(), Value::String(error.to_string())),
    }
}

/// Flags for a test agent that reports as `node`.
pub fn node_agent_args(
    endpoints: &[String],
    snapshot: &Path,
    node: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args = agent_args(endpoints, snapshot, extra);
    args.push(format!("--node-id={node}"));
    args
}

pub fn node<'v>(status: &'v Value, id: &str) -> &'v Value {
    status["nodes"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["id"] == id))
        .unwrap_or_else(|| panic!("{id} is not in {status}"))
}

/// Polls `dwctl status` until `check` accepts it.
pub async fn status_until(
    endpoints: &[String],
    what: &str,
    check: impl Fn(u8, &Value) -> bool,
) -> Value {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let (code, status) = dwctl(endpoints, &["status"]).await;
        if check(code, &status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
