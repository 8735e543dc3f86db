//! The agent under test: in this process ([`RunningAgent`]) or as the binary
//! ([`AgentProcess`]), with timings short enough for tests, and its HTTP endpoint.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dw_agent::{Agent, Config, Error, Publication, StatusHandle, Timing};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};

use super::{EVENTUALLY, signal};

/// Timings short enough for tests; keepalive stays at etcd's 5 s minimum.
pub fn fast_timing() -> Timing {
    Timing {
        keepalive_interval: Duration::from_secs(5),
        keepalive_timeout: Duration::from_secs(2),
        progress_interval: Duration::from_millis(500),
        stall_timeout: Duration::from_secs(3),
        backoff_initial: Duration::from_millis(50),
        backoff_max: Duration::from_millis(500),
        healthy_after: Duration::from_secs(5),
        coalesce_window: Timing::default().coalesce_window,
    }
}

pub fn test_config(endpoints: Vec<String>, snapshot: &Path) -> Config {
    let mut config = Config::new(endpoints, snapshot);
    config.timing = fast_timing();
    config.etcd.dial_timeout = Duration::from_secs(1);
    config.etcd.request_timeout = Duration::from_secs(3);
    config
}

/// An agent running in this process.
pub struct RunningAgent {
    pub status: StatusHandle,
    pub publications: mpsc::UnboundedReceiver<Publication>,
    pub metrics_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), Error>>,
}

impl RunningAgent {
    pub async fn start(config: Config) -> RunningAgent {
        let mut agent = Agent::start(config).await.unwrap();
        let publications = agent.observe_publications();
        let status = agent.status();
        let metrics_addr = agent.metrics_addr();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(agent.run(async move {
            let _ = stopped.await;
        }));
        RunningAgent {
            status,
            publications,
            metrics_addr,
            stop: Some(stop),
            task,
        }
    }

    /// Waits for the publication of exactly `revision`; panics if a later one comes first.
    pub async fn published(&mut self, revision: u64) -> Publication {
        let deadline = tokio::time::Instant::now() + EVENTUALLY;
        loop {
            let next = tokio::time::timeout_at(deadline, self.publications.recv()).await;
            let publication = next
                .unwrap_or_else(|_| panic!("revision {revision} was never published"))
                .expect("the agent stopped");
            assert!(
                publication.revision <= revision,
                "published {} while waiting for {revision}",
                publication.revision
            );
            if publication.revision == revision {
                return publication;
            }
        }
    }

    /// Everything published so far that has not been received yet.
    pub fn drain(&mut self) -> Vec<Publication> {
        let mut out = Vec::new();
        while let Ok(p) = self.publications.try_recv() {
            out.push(p);
        }
        out
    }

    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.unwrap().unwrap();
    }
}

/// A child `dw-agent` process.
pub struct AgentProcess {
    pub child: Child,
    pub stderr: PathBuf,
}

impl AgentProcess {
    pub fn spawn(args: &[String], stderr: &Path) -> AgentProcess {
        AgentProcess::spawn_with(Command::new(env!("CARGO_BIN_EXE_dw-agent")), args, stderr)
    }

    pub fn spawn_with(mut command: Command, args: &[String], stderr: &Path) -> AgentProcess {
        let log = fs::File::create(stderr).unwrap();
        let child = command
            .args(args)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        AgentProcess {
            child,
            stderr: stderr.to_path_buf(),
        }
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Waits for the process to exit on its own (panics after [`EVENTUALLY`]).
    pub fn wait_exit(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + EVENTUALLY;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "dw-agent did not exit; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn terminate(&mut self) -> std::process::ExitStatus {
        signal(self.child.id(), libc::SIGTERM);
        self.wait_exit()
    }
}

impl Drop for AgentProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Command-line flags matching [`fast_timing`].
pub fn fast_flags() -> Vec<String> {
    [
        "--dial-timeout=1s",
        "--request-timeout=3s",
        "--keepalive-interval=5s",
        "--keepalive-timeout=2s",
        "--progress-interval=500ms",
        "--stall-timeout=3s",
        "--backoff-initial=50ms",
        "--backoff-max=500ms",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// GET on the agent's HTTP endpoint: (status code, body).
pub async fn http_get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n")?.1.to_owned();
    Some((code, body))
}

/// The value of an unlabelled metric in Prometheus text.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        line.strip_prefix(name)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// Flags for a test agent binary; `extra` may set `--metrics-addr` (it is off otherwise).
pub fn agent_args(endpoints: &[String], snapshot: &Path, extra: &[&str]) -> Vec<String> {
    let mut args = vec![
        format!("--endpoints={}", endpoints.join(",")),
        format!("--snapshot={}", snapshot.display()),
    ];
    if !extra.iter().any(|arg| arg.starts_with("--metrics-addr")) {
        args.push("--metrics-addr=off".to_owned());
    }
    args.extend(fast_flags());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}
