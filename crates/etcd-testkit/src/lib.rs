//! dw-etcd-testkit: real etcd processes on loopback for the tests of `dw-agent` and
//! `dwctl` (and the agent's benchmarks).
//!
//! - [`Cluster`]: one or more members ([`Etcd`]) on free loopback ports, in a directory
//!   of the caller's; each member can be killed, restarted, paused and resumed.
//! - [`TestTls`]: a CA, a server certificate for 127.0.0.1 and a client certificate,
//!   made with `openssl`; a cluster started with it serves https and requires client
//!   certificates.
//!
//! `etcd` and `openssl` must be on PATH: run the tests inside `scripts/devenv`.
//!
//! ```no_run
//! # async fn example() {
//! let dir = tempfile::tempdir().unwrap();
//! let cluster = dw_etcd_testkit::Cluster::start(dir.path(), 3).await;
//! let mut client = cluster.client().await;
//! client.put("/dw/routing/region/DE", "{}", None).await.unwrap();
//! # }
//! ```
#![deny(missing_docs)]

use std::fs;
use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use etcd_client::Client;

/// A loopback port nobody listened on a moment ago, below the kernel's ephemeral range
/// (`/proc/sys/net/ipv4/ip_local_port_range`) when it can be: a port of that range,
/// released by `bind(0)`, can be handed to another process's outgoing connection (a client
/// of a test running beside this one) before the etcd member binds it, and the member
/// then fails to start. Below the range only another listener can take it. Up to
/// [`FREE_PORT_TRIES`] ports of the 12,000 under the range's start are tried (spread by
/// pid, a clock and a counter), then `bind(0)`.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static CALLS: AtomicU32 = AtomicU32::new(0);
    let low = fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u32>().ok())
        .unwrap_or(0);
    if low > 13_024 {
        let clock = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.subsec_nanos());
        let mut state = std::process::id().wrapping_mul(2_654_435_761)
            ^ clock
            ^ CALLS.fetch_add(1, Ordering::Relaxed).wrapping_mul(40_503)
            | 1;
        for _ in 0..FREE_PORT_TRIES {
            // xorshift32: spread, not secrecy.
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let port = (low - 12_000 + state % 12_000) as u16;
            if StdListener::bind(("127.0.0.1", port)).is_ok() {
                return port;
            }
        }
    }
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap()
}

/// How many ports under the ephemeral range [`free_port`] tries before `bind(0)`.
pub const FREE_PORT_TRIES: usize = 64;

/// Polls `check` every `every` until it returns `Some`, and returns that; panics naming
/// `what` once `limit` has passed. The one polling wait of the agent's and dwctl's tests
/// (each wraps it with its own cadence).
pub async fn eventually<T, F, Fut>(limit: Duration, every: Duration, what: &str, mut check: F) -> T
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
        tokio::time::sleep(every).await;
    }
}

/// Sends `signal` to process `pid`.
pub fn signal(pid: u32, signal: i32) {
    // SAFETY: kill(2) has no memory effects; a stale pid only yields ESRCH.
    unsafe {
        libc::kill(pid as i32, signal);
    }
}

/// One etcd member.
pub struct Etcd {
    /// The member's name (`m0`, `m1`, ...).
    pub name: String,
    /// Where clients reach it.
    pub client_url: String,
    /// Where the other members reach it.
    pub peer_url: String,
    data_dir: PathBuf,
    log: PathBuf,
    args: Vec<String>,
    child: Option<Child>,
}

impl Etcd {
    /// The process id of the running member.
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

    /// SIGSTOP: the member keeps its connections but answers nothing.
    pub fn pause(&self) {
        signal(self.pid(), libc::SIGSTOP);
    }

    /// SIGCONT after [`Etcd::pause`].
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
    /// The members, in start order.
    pub members: Vec<Etcd>,
    tls: Option<TestTls>,
}

/// Certificates for an etcd that serves clients over TLS and requires client certificates.
#[derive(Clone)]
pub struct TestTls {
    /// The CA that signed the server and client certificates.
    pub ca: PathBuf,
    /// The members' certificate (for 127.0.0.1).
    pub server_cert: PathBuf,
    /// The members' private key.
    pub server_key: PathBuf,
    /// A client certificate the members accept.
    pub client_cert: PathBuf,
    /// Its private key.
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

    /// One set of certificates per test process, made on first use (a few `openssl`
    /// runs) in a private temporary directory that lasts as long as the process.
    pub fn shared() -> &'static TestTls {
        static SHARED: OnceLock<(tempfile::TempDir, TestTls)> = OnceLock::new();
        let (_, tls) = SHARED.get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("dw-test-tls-")
                .tempdir()
                .expect("a temporary directory for the test certificates");
            let tls = TestTls::generate(dir.path());
            (dir, tls)
        });
        tls
    }

    /// Client options that trust the CA and present the client certificate.
    pub fn client_options(&self) -> etcd_client::ConnectOptions {
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
    /// Starts `size` plain-http members with their data and logs under `dir`.
    pub async fn start(dir: &Path, size: usize) -> Cluster {
        Cluster::start_with(dir, size, None).await
    }

    /// Starts a cluster whose client URLs are https with client certificates required.
    pub async fn start_with(dir: &Path, size: usize, tls: Option<TestTls>) -> Cluster {
        Cluster::start_with_flags(dir, size, tls, &[]).await
    }

    /// Starts a cluster whose members also get `flags` (for instance
    /// `["--auth-token-ttl", "5"]`, or a small `--quota-backend-bytes`).
    pub async fn start_with_flags(
        dir: &Path,
        size: usize,
        tls: Option<TestTls>,
        flags: &[&str],
    ) -> Cluster {
        for attempt in 0..3 {
            let mut cluster = Cluster::spawn(dir, size, attempt, tls.clone(), flags);
            if cluster.wait_ready().await {
                return cluster;
            }
            // Most likely a port was taken between choosing and binding it: try new ones.
            drop(cluster);
        }
        panic!("etcd did not start; see the logs under {}", dir.display());
    }

    fn spawn(
        dir: &Path,
        size: usize,
        attempt: usize,
        tls: Option<TestTls>,
        flags: &[&str],
    ) -> Cluster {
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
                args.extend(flags.iter().map(|flag| flag.to_string()));
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

    /// Every member's client URL.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client_url.clone()).collect()
    }

    /// A client over every member, for test writes and checks.
    pub async fn client(&self) -> Client {
        Client::connect(self.endpoints(), self.options())
            .await
            .unwrap()
    }

    /// Client options for this cluster (TLS when it serves https).
    pub fn options(&self) -> Option<etcd_client::ConnectOptions> {
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
