//! Test and benchmark harness: real etcd processes on loopback, a TCP proxy that can
//! freeze or cut connections, an in-process agent, the agent binary, and a file watcher
//! that checks every snapshot it sees.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::future::Future;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use dw_agent::{Agent, Config, Error, Publication, StatusHandle, Timing};
use dw_routing::Snapshot;
use etcd_client::{Client, GetOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

pub const PREFIX: &str = "/dw/routing/";

/// How long "eventually" may take. Generous: the suite shares two cores with others.
pub const EVENTUALLY: Duration = Duration::from_secs(60);

pub fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory effects; a stale pid only yields ESRCH.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// One etcd member.
pub struct Etcd {
    pub name: String,
    pub client_url: String,
    pub peer_url: String,
    data_dir: PathBuf,
    log: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Etcd {
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .map(|c| c.id())
            .expect("etcd is not running")
    }

    fn spawn(&mut self) {
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new("etcd")
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("etcd must be on PATH (run the tests inside scripts/devenv)");
        self.child = Some(child);
    }

    fn exited(&mut self) -> bool {
        self.child
            .as_mut()
            .is_none_or(|c| c.try_wait().ok().flatten().is_some())
    }

    /// SIGKILL and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the member again with the same data and ports.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    pub fn pause(&self) {
        signal(self.pid(), libc::SIGSTOP);
    }

    pub fn resume(&self) {
        signal(self.pid(), libc::SIGCONT);
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            signal(child.id(), libc::SIGCONT);
        }
        self.kill();
        let _ = fs::remove_dir_all(&self.data_dir);
    }
}

/// An etcd cluster of one or more members on loopback.
pub struct Cluster {
    pub members: Vec<Etcd>,
    tls: Option<TestTls>,
}

/// Certificates for an etcd that serves clients over TLS and requires client certificates.
#[derive(Clone)]
pub struct TestTls {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A CA that signed none of the above.
    pub other_ca: PathBuf,
}

impl TestTls {
    /// Makes a CA, a server certificate for 127.0.0.1 and a client certificate with the
    /// `openssl` command (it is in the devenv).
    pub fn generate(dir: &Path) -> TestTls {
        let run = |args: &[&str]| {
            let output = Command::new("openssl")
                .args(args)
                .current_dir(dir)
                .output()
                .expect("openssl must be on PATH (run the tests inside scripts/devenv)");
            assert!(
                output.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        for ca in ["ca", "other-ca"] {
            let mut args = vec!["req", "-x509", "-days", "2", "-subj"];
            let subject = format!("/CN=dw-test-{ca}");
            args.push(&subject);
            args.extend(ec);
            let (key, pem) = (format!("{ca}.key"), format!("{ca}.pem"));
            args.extend(["-keyout", &key, "-out", &pem]);
            run(&args);
        }
        for (name, usage) in [("server", "serverAuth"), ("client", "clientAuth")] {
            let (key, csr, pem, ext) = (
                format!("{name}.key"),
                format!("{name}.csr"),
                format!("{name}.pem"),
                format!("{name}.ext"),
            );
            fs::write(
                dir.join(&ext),
                format!("subjectAltName=IP:127.0.0.1\nextendedKeyUsage={usage}\n"),
            )
            .unwrap();
            let mut args = vec!["req", "-subj", "/CN=127.0.0.1"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &csr]);
            run(&args);
            run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                &ext,
                "-out",
                &pem,
            ]);
        }
        TestTls {
            ca: dir.join("ca.pem"),
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.pem"),
            client_key: dir.join("client.key"),
            other_ca: dir.join("other-ca.pem"),
        }
    }

    fn client_options(&self) -> etcd_client::ConnectOptions {
        let tls = etcd_client::TlsOptions::new()
            .ca_certificate(etcd_client::Certificate::from_pem(
                fs::read(&self.ca).unwrap(),
            ))
            .identity(etcd_client::Identity::from_pem(
                fs::read(&self.client_cert).unwrap(),
                fs::read(&self.client_key).unwrap(),
            ));
        etcd_client::ConnectOptions::new().with_tls(tls)
    }
}

impl Cluster {
    pub async fn start(dir: &Path, size: usize) -> Cluster {
        Cluster::start_with(dir, size, None).await
    }

    /// Starts a cluster whose client URLs are https with client certificates required.
    pub async fn start_with(dir: &Path, size: usize, tls: Option<TestTls>) -> Cluster {
        for attempt in 0..3 {
            let mut cluster = Cluster::spawn(dir, size, attempt, tls.clone());
            if cluster.wait_ready().await {
                return cluster;
            }
            // Most likely a port was taken between choosing and binding it: try new ones.
            drop(cluster);
        }
        panic!("etcd did not start; see the logs under {}", dir.display());
    }

    fn spawn(dir: &Path, size: usize, attempt: usize, tls: Option<TestTls>) -> Cluster {
        let scheme = if tls.is_some() { "https" } else { "http" };
        let ports: Vec<(u16, u16)> = (0..size).map(|_| (free_port(), free_port())).collect();
        let initial: Vec<String> = ports
            .iter()
            .enumerate()
            .map(|(i, (_, peer))| format!("m{i}=http://127.0.0.1:{peer}"))
            .collect();
        let token = format!("dw-test-{}-{attempt}-{}", std::process::id(), free_port());
        let mut members: Vec<Etcd> = ports
            .iter()
            .enumerate()
            .map(|(i, (client, peer))| {
                let name = format!("m{i}");
                let data_dir = dir.join(format!("{name}-{attempt}.etcd"));
                let client_url = format!("{scheme}://127.0.0.1:{client}");
                let peer_url = format!("http://127.0.0.1:{peer}");
                let mut args: Vec<String> = vec![
                    "--name".into(),
                    name.clone(),
                    "--data-dir".into(),
                    data_dir.display().to_string(),
                    "--listen-client-urls".into(),
                    client_url.clone(),
                    "--advertise-client-urls".into(),
                    client_url.clone(),
                    "--listen-peer-urls".into(),
                    peer_url.clone(),
                    "--initial-advertise-peer-urls".into(),
                    peer_url.clone(),
                    "--initial-cluster".into(),
                    initial.join(","),
                    "--initial-cluster-token".into(),
                    token.clone(),
                    "--initial-cluster-state".into(),
                    "new".into(),
                    "--heartbeat-interval".into(),
                    "50".into(),
                    "--election-timeout".into(),
                    "500".into(),
                    "--unsafe-no-fsync".into(),
                ];
                if let Some(tls) = &tls {
                    for (flag, path) in [
                        ("--cert-file", &tls.server_cert),
                        ("--key-file", &tls.server_key),
                        ("--trusted-ca-file", &tls.ca),
                    ] {
                        args.push(flag.into());
                        args.push(path.display().to_string());
                    }
                    args.push("--client-cert-auth".into());
                }
                args.extend(["--log-level".into(), "warn".into()]);
                Etcd {
                    log: dir.join(format!("{name}-{attempt}.log")),
                    name,
                    client_url,
                    peer_url,
                    data_dir,
                    args,
                    child: None,
                }
            })
            .collect();
        for member in &mut members {
            member.spawn();
        }
        Cluster { members, tls }
    }

    /// Waits until every member answers reads; false if one exited or time ran out.
    pub async fn wait_ready(&mut self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.members.iter_mut().any(|m| m.exited()) {
                return false;
            }
            let mut ready = true;
            for member in &self.members {
                ready &= member_answers(&member.client_url, self.options()).await;
            }
            if ready {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// A client over every member, for test writes and checks.
    pub async fn client(&self) -> Client {
        Client::connect(self.endpoints(), self.options())
            .await
            .unwrap()
    }

    fn options(&self) -> Option<etcd_client::ConnectOptions> {
        self.tls.as_ref().map(TestTls::client_options)
    }

    /// The index of the member that is the current leader, as the live members see it.
    pub async fn leader(&self) -> Option<usize> {
        let mut ids = Vec::new();
        let mut leader = None;
        for member in &self.members {
            let status = async {
                let mut client = Client::connect([member.client_url.as_str()], None)
                    .await
                    .ok()?;
                client.status().await.ok()
            };
            match tokio::time::timeout(Duration::from_secs(1), status).await {
                Ok(Some(status)) => {
                    ids.push(status.header().map(|h| h.member_id()));
                    leader = leader.or(Some(status.leader()).filter(|id| *id != 0));
                }
                _ => ids.push(None),
            }
        }
        let leader = leader?;
        ids.iter().position(|id| *id == Some(leader))
    }
}

async fn member_answers(url: &str, options: Option<etcd_client::ConnectOptions>) -> bool {
    let attempt = async {
        let mut client = Client::connect([url], options).await.ok()?;
        client.get("ready?", None).await.ok()
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), attempt).await,
        Ok(Some(_))
    )
}

/// Writes `key` and returns the revision of the write.
pub async fn put(client: &mut Client, key: &str, value: impl Into<Vec<u8>>) -> u64 {
    let response = client.put(key, value, None).await.unwrap();
    response.header().unwrap().revision() as u64
}

pub async fn delete(client: &mut Client, key: &str) -> u64 {
    let response = client.delete(key, None).await.unwrap();
    response.header().unwrap().revision() as u64
}

/// The prefix as etcd holds it, at `revision` (0 for the latest), with the revision read.
/// Retries for a while: a member of the client's may be down or still starting.
pub async fn etcd_state(client: &mut Client, revision: u64) -> (u64, BTreeMap<String, String>) {
    let mut options = GetOptions::new().with_prefix();
    if revision > 0 {
        options = options.with_revision(revision as i64);
    }
    let deadline = Instant::now() + EVENTUALLY;
    let response = loop {
        let get = client.get(PREFIX, Some(options.clone()));
        match tokio::time::timeout(Duration::from_secs(2), get).await {
            Ok(Ok(response)) => break response,
            Ok(Err(e)) => assert!(Instant::now() < deadline, "cannot read etcd: {e}"),
            Err(_) => assert!(Instant::now() < deadline, "cannot read etcd: timeout"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let kvs = response
        .kvs()
        .iter()
        .map(|kv| {
            (
                kv.key_str().unwrap().to_owned(),
                kv.value_str().unwrap().to_owned(),
            )
        })
        .collect();
    (response.header().unwrap().revision() as u64, kvs)
}

pub fn read_snapshot(path: &Path) -> Option<Snapshot> {
    let bytes = fs::read(path).ok()?;
    Some(Snapshot::parse(&bytes).unwrap_or_else(|e| {
        panic!(
            "{} does not parse: {e}: {:?}",
            path.display(),
            String::from_utf8_lossy(&bytes)
        )
    }))
}

/// Polls `check` until it returns true, or panics after [`EVENTUALLY`].
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        if check().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the snapshot file holds exactly what etcd holds now (after writes stop).
pub async fn converged(client: &mut Client, snapshot: &Path) -> Snapshot {
    let deadline = Instant::now() + EVENTUALLY;
    loop {
        let (_, kvs) = etcd_state(client, 0).await;
        if let Some(published) = read_snapshot(snapshot)
            && published.kvs == kvs
        {
            return published;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until the snapshot equals etcd"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

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

/// Reads the snapshot file in a tight loop on a thread, checking that every read parses
/// and that revisions never go down, and keeping one copy per revision seen.
pub struct FileWatcher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Vec<Snapshot>>>,
}

impl FileWatcher {
    pub fn start(path: &Path) -> FileWatcher {
        let stop = Arc::new(AtomicBool::new(false));
        let path = path.to_path_buf();
        let thread = std::thread::spawn({
            let stop = stop.clone();
            move || {
                let mut seen: Vec<Snapshot> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Some(snapshot) = read_snapshot(&path) {
                        match seen.last() {
                            Some(last) if last.revision == snapshot.revision => {
                                assert_eq!(last.kvs, snapshot.kvs, "two contents at one revision");
                            }
                            Some(last) => {
                                assert!(
                                    snapshot.revision > last.revision,
                                    "revision went from {} to {}",
                                    last.revision,
                                    snapshot.revision
                                );
                                seen.push(snapshot);
                            }
                            None => seen.push(snapshot),
                        }
                    }
                    std::thread::sleep(Duration::from_micros(500));
                }
                seen
            }
        });
        FileWatcher {
            stop,
            thread: Some(thread),
        }
    }

    /// Stops and returns one snapshot per revision seen, in order.
    pub fn finish(mut self) -> Vec<Snapshot> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().unwrap().join() {
            Ok(seen) => seen,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Checks each snapshot against etcd at its own revision.
pub async fn assert_each_matches_etcd(client: &mut Client, snapshots: &[Snapshot]) {
    for snapshot in snapshots {
        let (_, kvs) = etcd_state(client, snapshot.revision).await;
        assert_eq!(
            snapshot.kvs, kvs,
            "the snapshot at revision {} differs from etcd at that revision",
            snapshot.revision
        );
    }
}

/// A TCP proxy in front of one etcd member that can freeze traffic (connections stay
/// open, nothing moves) or cut it (every connection is dropped, new ones are refused).
pub struct Proxy {
    pub addr: SocketAddr,
    mode: watch::Sender<Mode>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Pass,
    Freeze,
    Cut,
}

impl Proxy {
    pub async fn start(upstream: &str) -> Proxy {
        let upstream: SocketAddr = upstream.trim_start_matches("http://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Pass);
        let modes = mode.clone();
        tokio::spawn(async move {
            loop {
                let Ok((downstream, _)) = listener.accept().await else {
                    continue;
                };
                if *modes.borrow() == Mode::Cut {
                    continue;
                }
                let Ok(upstream) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let _ = downstream.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let (down_read, down_write) = downstream.into_split();
                let (up_read, up_write) = upstream.into_split();
                tokio::spawn(pump(down_read, up_write, modes.subscribe()));
                tokio::spawn(pump(up_read, down_write, modes.subscribe()));
            }
        });
        Proxy { addr, mode }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn pass(&self) {
        self.mode.send_replace(Mode::Pass);
    }

    pub fn freeze(&self) {
        self.mode.send_replace(Mode::Freeze);
    }

    pub fn cut(&self) {
        self.mode.send_replace(Mode::Cut);
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // Hold still while frozen; give up when cut.
        loop {
            let current = *mode.borrow_and_update();
            match current {
                Mode::Pass => break,
                Mode::Cut => return,
                Mode::Freeze => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = mode.changed() => {
                if changed.is_err() { return; }
                continue;
            }
        };
        loop {
            let current = *mode.borrow_and_update();
            match current {
                Mode::Pass => break,
                Mode::Cut => return,
                Mode::Freeze => {
                    if mode.changed().await.is_err() {
                        return;
                    }
                }
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// Keeps writing under the prefix until stopped: puts, deletes and multi-key
/// transactions over a small key space, always leaving `region/DE` in place. Errors
/// (a member killed or stopped) are expected and skipped.
pub struct Storm {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Storm {
    pub fn start(client: Client) -> Storm {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let stop = stop.clone();
            async move {
                let mut client = client;
                let mut writes = 0u64;
                let mut n = 0u64;
                let region = r#"{"shard":"eu-1","origins":["a"],"weight":{"a":1}}"#;
                let _ = client.put(format!("{PREFIX}region/DE"), region, None).await;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let key = format!("{PREFIX}region/R{}", n % 37);
                    let write = async {
                        match n % 5 {
                            0 => client.delete(key, None).await.map(|_| ()),
                            1 => {
                                let ops = (0..3)
                                    .map(|i| {
                                        etcd_client::TxnOp::put(
                                            format!("{PREFIX}origin/o{}", (n + i) % 11),
                                            format!("{{\"n\":{n}}}"),
                                            None,
                                        )
                                    })
                                    .collect::<Vec<_>>();
                                client
                                    .txn(etcd_client::Txn::new().and_then(ops))
                                    .await
                                    .map(|_| ())
                            }
                            _ => client
                                .put(key, format!("{{\"n\":{n}}}"), None)
                                .await
                                .map(|_| ()),
                        }
                    };
                    if let Ok(Ok(())) = tokio::time::timeout(Duration::from_secs(2), write).await {
                        writes += 1;
                    }
                }
                writes
            }
        });
        Storm { stop, task }
    }

    /// Stops and returns how many writes succeeded.
    pub async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}
