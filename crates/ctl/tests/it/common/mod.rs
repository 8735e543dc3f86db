//! Test harness: a real etcd on loopback (dw-etcd-testkit: free ports, a temporary data
//! dir, killed on drop) and the `dwctl` binary run against it.
#![allow(dead_code)]

pub mod daemon;
pub mod fleet;
pub mod probe;
pub mod prometheus;
pub mod rollout;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use dw_etcd_testkit::Cluster;
#[allow(unused_imports)]
pub use dw_etcd_testkit::TestTls;

use etcd_client::{Client, GetOptions};
use serde_json::Value;

pub const PREFIX: &str = "/dw/routing/";
pub const CONTROL: &str = "/dw/control/";
/// A region with three origins, the one most command tests start from.
pub const DE: &str = r#"{"shard":"eu-1","origins":["fra-a","fra-b","ams-a"],"weight":{"fra-a":50,"fra-b":30,"ams-a":20}}"#;

/// Writes each `(geo, value)` with `dwctl region set`, asserting it succeeds.
pub async fn seed(etcd: &Etcd, regions: &[(&str, &str)]) {
    for (geo, value) in regions {
        let run = etcd.dwctl(&["region", "set", geo, value]);
        assert_eq!(run.code, 0, "seeding {geo}: {}", run.stderr);
    }
}

/// A single-member etcd (from dw-etcd-testkit, as the agent's tests use) in a private
/// directory, removed with it.
pub struct Etcd {
    cluster: Cluster,
    /// The directory of etcd's data and log, and of the test's own files.
    pub data_dir: PathBuf,
    // Declared last so that it is removed after etcd has stopped.
    _dir: tempfile::TempDir,
}

impl Etcd {
    /// Starts a single-member etcd and waits until it answers.
    pub async fn start() -> Etcd {
        Etcd::start_with(None).await
    }

    /// Starts etcd serving https and requiring a client certificate signed by `tls.ca`.
    pub async fn start_tls(tls: &TestTls) -> Etcd {
        Etcd::start_with(Some(tls.clone())).await
    }

    async fn start_with(tls: Option<TestTls>) -> Etcd {
        Etcd::start_with_flags(tls, &[]).await
    }

    /// Starts etcd with extra `flags` (`--auth-token-ttl`, `--quota-backend-bytes`, ...).
    pub async fn start_with_flags(tls: Option<TestTls>, flags: &[&str]) -> Etcd {
        let dir = tempfile::Builder::new()
            .prefix("dwctl-test-")
            .tempdir()
            .expect("temp dir");
        let cluster = Cluster::start_with_flags(dir.path(), 1, tls, flags).await;
        Etcd {
            cluster,
            data_dir: dir.path().to_path_buf(),
            _dir: dir,
        }
    }

    pub fn endpoint(&self) -> String {
        self.cluster.endpoints().remove(0)
    }

    /// Runs `etcdctl` against this etcd, from outside the test's own client: a writer the
    /// code under test does not know, or set-up (users, auth) before dwctl runs.
    pub fn etcdctl(&self, args: &[&str]) {
        let output = Command::new("etcdctl")
            .args(["--endpoints", &self.endpoint()])
            .args(args)
            .output()
            .expect("etcdctl on PATH");
        assert!(
            output.status.success(),
            "etcdctl {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Kills etcd and starts it again on the same data and ports.
    pub async fn restart(&mut self) {
        self.cluster.members[0].restart();
        assert!(self.cluster.wait_ready().await, "etcd did not come back");
    }

    /// SIGSTOP: etcd keeps its connections and answers nothing (until `resume`).
    #[allow(dead_code)] // not every test file pauses etcd
    pub fn pause(&self) {
        self.cluster.members[0].pause();
    }

    /// SIGCONT after `pause`.
    #[allow(dead_code)]
    pub fn resume(&self) {
        self.cluster.members[0].resume();
    }

    pub async fn client(&self) -> Client {
        self.cluster.client().await
    }

    /// A key's value and mod_revision.
    pub async fn get(&self, key: &str) -> Option<(String, i64)> {
        let response = self.client().await.get(key, None).await.expect("get");
        response.kvs().first().map(|kv| {
            (
                String::from_utf8_lossy(kv.value()).into_owned(),
                kv.mod_revision(),
            )
        })
    }

    pub async fn get_json(&self, key: &str) -> Option<Value> {
        self.get(key)
            .await
            .map(|(value, _)| serde_json::from_str(&value).expect("a JSON value"))
    }

    /// Every key under `prefix` with its value.
    pub async fn dump(&self, prefix: &str) -> Vec<(String, String)> {
        let response = self
            .client()
            .await
            .get(prefix, Some(GetOptions::new().with_prefix()))
            .await
            .expect("range");
        response
            .kvs()
            .iter()
            .map(|kv| {
                (
                    String::from_utf8_lossy(kv.key()).into_owned(),
                    String::from_utf8_lossy(kv.value()).into_owned(),
                )
            })
            .collect()
    }

    pub async fn revision(&self) -> i64 {
        let response = self.client().await.get("/", None).await.expect("get");
        response
            .header()
            .map(|header| header.revision())
            .unwrap_or(0)
    }

    pub async fn put(&self, key: &str, value: &str) {
        self.client()
            .await
            .put(key, value, None)
            .await
            .expect("put");
    }

    /// Runs `dwctl ARGS` against this etcd.
    pub fn dwctl(&self, args: &[&str]) -> Run {
        run(self.command(args))
    }

    /// Runs `dwctl --output json ARGS` and parses its stdout.
    pub fn dwctl_json(&self, args: &[&str]) -> (i32, Value, String) {
        let mut all = vec!["--output", "json"];
        all.extend_from_slice(args);
        let result = self.dwctl(&all);
        let json = serde_json::from_str(result.stdout.trim()).unwrap_or(Value::Null);
        (result.code, json, result.stderr)
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_dwctl"));
        command
            .env("DWCTL_ENDPOINTS", self.endpoint())
            .env("USER", "tester")
            .env_remove("DWCTL_PREFIX")
            .env_remove("DWCTL_CONTROL_PREFIX")
            .env_remove("DWCTL_USER")
            .env_remove("DWCTL_PASSWORD")
            .env_remove("DWCTL_CACERT")
            .env_remove("DWCTL_CERT")
            .env_remove("DWCTL_KEY")
            .env_remove("DWCTL_PASSWORD_FILE")
            .env_remove("DWCTL_DIAL_TIMEOUT")
            .env_remove("DWCTL_REQUEST_TIMEOUT")
            .env_remove("DWCTL_PROMETHEUS_URL")
            .env_remove("DWCTL_NODE_CEILING")
            .args(args);
        command
    }

    pub fn tokio_command(&self, args: &[&str]) -> tokio::process::Command {
        tokio::process::Command::from(self.command(args))
    }
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut command: Command) -> Run {
    let output = command.output().expect("run dwctl");
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The listed origins' weights of a region value, in list order.
pub fn listed_weights(region: &Value) -> Vec<(String, u64)> {
    region["origins"]
        .as_array()
        .expect("origins")
        .iter()
        .map(|origin| {
            let origin = origin.as_str().expect("an origin name");
            (
                origin.to_string(),
                region["weight"][origin].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Sum of a region value's weight map.
pub fn weight_sum(region: &Value) -> u64 {
    region["weight"]
        .as_object()
        .expect("weight")
        .values()
        .map(|weight| weight.as_u64().expect("an integer weight"))
        .sum()
}

pub fn region_key(geo: &str) -> String {
    format!("{PREFIX}region/{geo}")
}

pub fn drain_key(origin: &str) -> String {
    format!("{CONTROL}drains/{origin}")
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `limit`
/// (`dw_etcd_testkit::eventually`, the polling wait the agent's tests share).
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    dw_etcd_testkit::eventually(limit, Duration::from_millis(100), what, check).await
}
