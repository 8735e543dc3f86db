//! Test harness: a real etcd on loopback (free ports, a temporary data dir, killed on
//! drop) and the `dwctl` binary run against it.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use etcd_client::{Client, GetOptions};
use serde_json::Value;

pub const PREFIX: &str = "/dw/routing/";
pub const CONTROL: &str = "/dw/control/";

pub struct Etcd {
    child: Option<Child>,
    /// Extra etcd flags (TLS files).
    extra: Vec<String>,
    /// `http` or `https`.
    scheme: &'static str,
    pub data_dir: PathBuf,
    pub client_port: u16,
    pub peer_port: u16,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free loopback port")
}

impl Etcd {
    /// Starts a single-member etcd and waits until it answers.
    pub async fn start() -> Etcd {
        Etcd::start_with("http", Vec::new(), |_| {}).await
    }

    /// Starts etcd with `scheme` client URLs and extra flags; `prepare` runs on the data
    /// dir first (to write certificates the flags name).
    pub async fn start_with(
        scheme: &'static str,
        extra: Vec<String>,
        prepare: impl FnOnce(&std::path::Path),
    ) -> Etcd {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|elapsed| elapsed.subsec_nanos())
            .unwrap_or(0);
        let data_dir = std::env::temp_dir().join(format!(
            "dwctl-test-{}-{}-{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        ));
        std::fs::create_dir_all(&data_dir).expect("temp dir");
        prepare(&data_dir);
        let extra = extra
            .into_iter()
            .map(|flag| flag.replace("{dir}", &data_dir.display().to_string()))
            .collect();
        let mut etcd = Etcd {
            child: None,
            extra,
            scheme,
            data_dir,
            client_port: free_port(),
            peer_port: free_port(),
        };
        etcd.spawn().await;
        etcd
    }

    async fn spawn(&mut self) {
        let client_url = self.endpoint();
        let peer_url = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new("etcd")
            .args(["--name", "test", "--data-dir"])
            .arg(self.data_dir.join("etcd"))
            .args([
                "--listen-client-urls",
                &client_url,
                "--advertise-client-urls",
                &client_url,
            ])
            .args([
                "--listen-peer-urls",
                &peer_url,
                "--initial-advertise-peer-urls",
                &peer_url,
            ])
            .args(["--initial-cluster", &format!("test={peer_url}")])
            .args(["--log-level", "error", "--unsafe-no-fsync"])
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("etcd on PATH (run the tests inside scripts/devenv)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        if self.scheme == "https" {
            // The plain client cannot talk TLS: wait for the port, callers retry dwctl.
            while std::net::TcpStream::connect(("127.0.0.1", self.client_port)).is_err() {
                assert!(Instant::now() < deadline, "etcd did not start");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            return;
        }
        loop {
            let connect = Client::connect([self.endpoint()], None);
            if let Ok(Ok(mut client)) = tokio::time::timeout(Duration::from_secs(2), connect).await
                && let Ok(Ok(_)) =
                    tokio::time::timeout(Duration::from_secs(2), client.get("/", None)).await
            {
                return;
            }
            assert!(Instant::now() < deadline, "etcd did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn endpoint(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.client_port)
    }

    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills etcd and starts it again on the same data and ports.
    pub async fn restart(&mut self) {
        self.kill();
        self.spawn().await;
    }

    pub async fn client(&self) -> Client {
        Client::connect([self.endpoint()], None)
            .await
            .expect("connect")
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
            .args(args);
        command
    }

    pub fn tokio_command(&self, args: &[&str]) -> tokio::process::Command {
        tokio::process::Command::from(self.command(args))
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.data_dir);
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

/// Polls `check` every 100 ms until it returns `Some`, or panics after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
