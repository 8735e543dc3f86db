//! Purging the node's page cache after each publication (`--purge-url`; docs/agent.md,
//! "Purging the page cache"). The agent knows which keys a publication changed; the purge
//! endpoint (php/purge.php, answering with `X-LiteSpeed-Purge`) turns the lines it is
//! sent into cache tags.
//!
//! ```text
//!   publication ──► lines (purge_lines) ──try_send──► purge task ──POST──► endpoint
//!   (agent loop,       diff of the effective      (bounded; full:    ├─ 200: repeat once
//!    after the         keys of the last two        `all` next)       │   after --purge-repeat-after
//!    rename)           publications                                  └─ failure: counted, retried
//!                                                                        with backoff 100 ms .. 5 s
//! ```
//!
//! Routing never waits for the cache: the agent loop only computes the lines and hands
//! them over without blocking; the task posts them. The secret (32 random bytes, kept in
//! memory only) is sent as `Authorization: Bearer <64 hex>`, and only on a connection
//! that a listening socket root created took, one that listened throughout the connect
//! (`purge/peer.rs`: not to a process of another user holding the port); the endpoint
//! reads only its SHA-256, which `<snapshot>.purge-sha256` holds.

pub(crate) mod lines;
pub(crate) mod peer;

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use dw_routing::Snapshot;
use http_body_util::Full;
use hyper::body::Bytes;
use sha2::{Digest, Sha256};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;
use tracing::{info, warn};

use crate::config::Config;
use crate::config::purge::{PurgeConfig, PurgeUrl};
use crate::error::Error;
use crate::metrics::purge_counters::PurgeCounters;
use crate::purge::lines::{ALL, PICK, Routing, batches, lines};
use crate::report::json::Report;

/// Publications whose lines wait for the task at most; beyond, the next purge is `all`.
const QUEUE: usize = 64;
/// One request's deadline: connect, send, and the answer's status line.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// The first retry after a failure; it doubles with each failure in a row...
pub(crate) const RETRY_INITIAL: Duration = Duration::from_millis(100);
/// ...up to this. Retries never stop: a purge that never lands leaves stale pages.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(5);
/// Lines waiting (to be sent, or to be repeated) at most; beyond, they become `all`.
const MAX_WAITING_LINES: usize = 100_000;
/// The most addresses of the purge host tried for one request (a name can resolve to
/// many; `localhost` is two).
pub(crate) const MAX_ADDRESSES_TRIED: usize = 8;
/// The suffix of the secret's hash file, beside the snapshot.
pub(crate) const HASH_SUFFIX: &str = ".purge-sha256";

/// The agent's side: diffs publications and hands their lines to the task.
pub(crate) struct Purge {
    sender: mpsc::Sender<Vec<String>>,
    /// Set when the queue was full: the task then purges `all` (nothing is dropped).
    overflow: Arc<AtomicBool>,
    /// What the last publication routed from (`None`: nothing purged since start).
    baseline: Option<Routing>,
    /// The revision whose state `baseline` is.
    revision: Option<u64>,
    task: tokio::task::AbortHandle,
}

impl Drop for Purge {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Purge {
    /// `None` when `--purge-url` is not given. Otherwise makes the secret, writes its
    /// hash beside the snapshot (before any purge is sent), and starts the task.
    pub(crate) fn start(
        config: &Config,
        counters: Arc<PurgeCounters>,
        reports: Option<watch::Sender<Option<Report>>>,
    ) -> Result<Option<Purge>, Error> {
        let Some(purge) = &config.purge else {
            return Ok(None);
        };
        let mut secret = [0u8; 32];
        crate::publish::snapshot_dir::getrandom(&mut secret)
            .map_err(|e| Error::Config(format!("cannot make the purge secret: {e}")))?;
        let token = hex(&secret);
        let hash_file = write_token_hash(&config.snapshot, &token)?;
        info!(url = %purge.url, hash_file = %hash_file, "purging the page cache after each publication");
        let (sender, receiver) = mpsc::channel(QUEUE);
        let overflow = Arc::new(AtomicBool::new(false));
        let task = Task {
            url: purge.url.clone(),
            bearer: format!("Bearer {token}"),
            config: purge.clone(),
            counters,
            reports,
        };
        let handle = tokio::spawn(task.run(receiver, overflow.clone()));
        Ok(Some(Purge {
            sender,
            overflow,
            baseline: None,
            revision: None,
            task: handle.abort_handle(),
        }))
    }

    /// `snapshot` (the effective state) is what the node routes from now: purges what
    /// changed since the last one (everything, the first time). Never blocks.
    pub(crate) fn published(&mut self, snapshot: &Snapshot) {
        if self.revision == Some(snapshot.revision) {
            return;
        }
        self.revision = Some(snapshot.revision);
        let routing = Routing::of(snapshot);
        let lines = lines(self.baseline.as_ref(), &routing);
        self.baseline = Some(routing);
        if lines.is_empty() {
            return;
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.sender.try_send(lines) {
            self.overflow.store(true, Ordering::SeqCst);
        }
    }
}

/// `bytes` as lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Writes SHA-256(`token`) as 64 lower-case hex and `\n` to `<snapshot>.purge-sha256`,
/// atomically, as the snapshot is written. Returns the file's path.
fn write_token_hash(snapshot: &Path, token: &str) -> Result<String, Error> {
    let name = snapshot
        .file_name()
        .and_then(|n| n.to_str())
        .map(|n| format!("{n}{HASH_SUFFIX}"))
        .ok_or_else(|| Error::Config("--snapshot does not name a UTF-8 file".into()))?;
    let dir = match snapshot.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    };
    let text = format!("{}\n", hex(&Sha256::digest(token.as_bytes())));
    crate::publish::snapshot_dir::write_small_file(&dir, &name, text.as_bytes()).map_err(
        |source| Error::SnapshotDir {
            dir: dir.clone(),
            source: std::io::Error::new(
                source.kind(),
                format!("cannot write the purge secret's hash {name}: {source}"),
            ),
        },
    )?;
    Ok(dir.join(name).display().to_string())
}

/// Why a request did not land, and whether the same lines can ever land.
#[derive(Debug)]
struct Failure {
    message: String,
    /// The endpoint refused the lines themselves (400 malformed, 413 too many tags):
    /// sending them again cannot help; `all` is sent in their place.
    refused_lines: bool,
}

/// The task: sends, repeats and retries.
struct Task {
    url: PurgeUrl,
    bearer: String,
    config: PurgeConfig,
    counters: Arc<PurgeCounters>,
    reports: Option<watch::Sender<Option<Report>>>,
}

impl Task {
    async fn run(self, mut receiver: mpsc::Receiver<Vec<String>>, overflow: Arc<AtomicBool>) {
        let mut waiting: BTreeMap<String, bool> = BTreeMap::new();
        let mut repeats: VecDeque<(Instant, Vec<String>)> = VecDeque::new();
        let mut repeat_lines = 0usize;
        let mut failures = 0u32;
        let mut retry_at: Option<Instant> = None;
        let mut last_error: Option<String> = None;
        loop {
            let now = Instant::now();
            while repeats.front().is_some_and(|(due, _)| *due <= now) {
                if let Some((_, lines)) = repeats.pop_front() {
                    repeat_lines -= lines.len();
                    add(&mut waiting, lines, false);
                }
            }
            if !waiting.is_empty() && retry_at.is_none_or(|at| at <= now) {
                let keys: Vec<String> = waiting.keys().cloned().collect();
                let body = batches(&keys).into_iter().next().unwrap_or_default();
                let sent: Vec<String> = body.split('\n').map(str::to_owned).collect();
                match self.post(body).await {
                    Ok(()) => {
                        self.counters.sent(false);
                        let mut again = Vec::new();
                        for line in sent {
                            if waiting.remove(&line) == Some(true) {
                                again.push(line);
                            }
                        }
                        if !again.is_empty() && self.config.repeats() {
                            repeat_lines += again.len();
                            if repeat_lines > MAX_WAITING_LINES {
                                repeats.clear();
                                again = vec![ALL.to_owned()];
                                repeat_lines = 1;
                            }
                            repeats.push_back((Instant::now() + self.config.repeat_after, again));
                        }
                        failures = 0;
                        retry_at = None;
                        if last_error.take().is_some() {
                            info!(url = %self.url, "purges land again");
                        }
                    }
                    Err(failure) => {
                        self.counters.sent(true);
                        self.report_failures();
                        failures = failures.saturating_add(1);
                        let delay = retry_delay(failures);
                        retry_at = Some(Instant::now() + delay);
                        if failure.refused_lines {
                            let repeat = sent.iter().any(|line| waiting.remove(line) == Some(true));
                            add(&mut waiting, [ALL.to_owned()], repeat);
                        }
                        if last_error.as_deref() != Some(failure.message.as_str()) {
                            warn!(url = %self.url, error = %failure.message,
                                retry_in_ms = delay.as_millis() as u64,
                                "purge failed; routing is unaffected, retrying with backoff");
                            last_error = Some(failure.message);
                        }
                    }
                }
                continue;
            }
            let next_repeat = repeats.front().map(|(due, _)| *due);
            let next_retry = retry_at.filter(|_| !waiting.is_empty());
            let wake = match (next_repeat, next_retry) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            tokio::select! {
                lines = receiver.recv() => {
                    let Some(lines) = lines else { return };
                    add(&mut waiting, lines, true);
                    // Everything queued goes together.
                    while let Ok(more) = receiver.try_recv() {
                        add(&mut waiting, more, true);
                    }
                    if overflow.swap(false, Ordering::SeqCst) {
                        add(&mut waiting, [ALL.to_owned()], true);
                    }
                }
                () = sleep_until(wake) => {}
            }
        }
    }

    /// Updates the node report's `purge_failures` (the reporter writes it when due).
    fn report_failures(&self) {
        let Some(reports) = &self.reports else {
            return;
        };
        let failures = self.counters.failures();
        reports.send_if_modified(|report| match report {
            Some(report) if report.purge_failures != failures => {
                report.purge_failures = failures;
                true
            }
            _ => false,
        });
    }

    /// One POST of `body`; `Ok` only for a 200.
    async fn post(&self, body: String) -> Result<(), Failure> {
        let failed = |message: String| Failure {
            message,
            refused_lines: false,
        };
        let status = match tokio::time::timeout(REQUEST_TIMEOUT, self.exchange(body)).await {
            Ok(Ok(status)) => status,
            Ok(Err(message)) => return Err(failed(message)),
            Err(_) => {
                return Err(failed(format!(
                    "no answer within {} ms",
                    REQUEST_TIMEOUT.as_millis()
                )));
            }
        };
        match status.as_u16() {
            200 => Ok(()),
            400 | 413 => Err(Failure {
                message: format!("the endpoint refused the lines ({status}); sending all instead"),
                refused_lines: true,
            }),
            _ => Err(failed(format!("the endpoint answered {status}"))),
        }
    }

    /// Connects, sends the request, and returns the answer's status.
    async fn exchange(&self, body: String) -> Result<hyper::StatusCode, String> {
        let stream = connect(&self.url).await?;
        let _ = stream.set_nodelay(true);
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
                .await
                .map_err(|e| format!("HTTP handshake: {e}"))?;
        let request = hyper::Request::post(self.url.path.as_str())
            .header(hyper::header::HOST, self.url.authority())
            .header(hyper::header::AUTHORIZATION, self.bearer.as_str())
            .header(hyper::header::CONTENT_TYPE, "text/plain; charset=utf-8")
            .header(hyper::header::CONNECTION, "close")
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        let answer = sender.send_request(request);
        tokio::pin!(answer, connection);
        // With `Connection: close` the connection ends as it hands the answer over: when it
        // ends first, the answer (if one came) is ready, so it is taken after all.
        let mut failed = None;
        let first = tokio::select! {
            biased;
            response = &mut answer => Some(response),
            closed = &mut connection => {
                failed = closed.err();
                None
            }
        };
        let response = match first {
            Some(response) => response,
            None => answer.await,
        };
        response
            .map(|response| response.status())
            .map_err(|e| match failed {
                Some(failed) => format!("the connection failed: {failed}"),
                None => format!("no answer: {e}"),
            })
    }
}

/// A connection to the endpoint on which the secret may be sent (`purge::peer`): for each
/// address `url`'s host resolves to, in [`connect_order`] (so a `localhost` URL tries
/// 127.0.0.1, then [::1]), the port's listening sockets are read from
/// the kernel's tables before connect() and after it, and the connection is kept only if
/// root's listener took it ([`peer::judge`]). An address refused (another user's listener,
/// nothing listening) is left for the next one; the error names each address's failure.
/// The tries are bounded by the request's deadline ([`REQUEST_TIMEOUT`]).
async fn connect(url: &PurgeUrl) -> Result<TcpStream, String> {
    let addresses = tokio::net::lookup_host((url.connect_host(), url.port))
        .await
        .map_err(|e| format!("cannot resolve {}: {e}", url.host))?;
    let mut failures = Vec::new();
    for server in connect_order(addresses) {
        let listeners = |when: &str| {
            peer::listeners(server.port()).map_err(|e| {
                format!("{server}: cannot read the kernel's socket table {when} connecting: {e}; not sending the secret")
            })
        };
        let attempt = async {
            let before = listeners("before")?;
            let stream = TcpStream::connect(server)
                .await
                .map_err(|e| format!("cannot connect to {server}: {e}"))?;
            let after = listeners("after")?;
            peer::judge(server, &before, &after)?;
            Ok::<_, String>(stream)
        };
        match attempt.await {
            Ok(stream) => return Ok(stream),
            Err(failure) => failures.push(failure),
        }
    }
    if failures.is_empty() {
        return Err(format!("{} resolves to no address", url.host));
    }
    Err(failures.join("; "))
}

/// The order in which the purge host's addresses are tried: IPv4 before IPv6, each in
/// the resolver's order, each once, at most [`MAX_ADDRESSES_TRIED`].
pub(crate) fn connect_order(resolved: impl IntoIterator<Item = SocketAddr>) -> Vec<SocketAddr> {
    let mut order: Vec<SocketAddr> = Vec::new();
    // A resolver's answer is short; a hostile one is read no further than this.
    for addr in resolved.into_iter().take(MAX_ADDRESSES_TRIED * 8) {
        if !order.contains(&addr) {
            order.push(addr);
        }
    }
    // A stable sort: the resolver's order within each family.
    order.sort_by_key(SocketAddr::is_ipv6);
    order.truncate(MAX_ADDRESSES_TRIED);
    order
}

/// The wait before retry number `failures` (1, 2, ...): 100 ms doubling, at most 5 s.
pub(crate) fn retry_delay(failures: u32) -> Duration {
    let doublings = failures.saturating_sub(1).min(16);
    RETRY_INITIAL.saturating_mul(1 << doublings).min(RETRY_MAX)
}

/// Adds `lines` to `waiting`, each marked to be repeated (`repeat`) or not, and keeps
/// `waiting` collapsed: a line that purges every routed page stands alone, marked if any
/// line it replaced was; more than [`MAX_WAITING_LINES`] become `all`.
fn add(
    waiting: &mut BTreeMap<String, bool>,
    lines: impl IntoIterator<Item = String>,
    repeat: bool,
) {
    for line in lines {
        *waiting.entry(line).or_insert(repeat) |= repeat;
    }
    let too_many = waiting.len() > MAX_WAITING_LINES;
    if (too_many || waiting.contains_key(ALL) || waiting.contains_key(PICK)) && waiting.len() > 1 {
        let repeat = waiting.values().any(|&r| r);
        let line = if too_many || waiting.contains_key(ALL) {
            ALL
        } else {
            PICK
        };
        waiting.clear();
        waiting.insert(line.to_owned(), repeat);
    }
}

/// Completes at `deadline`; never without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_s_addresses_are_tried_ipv4_first_each_once_at_most_eight() {
        let addr = |text: &str| text.parse::<SocketAddr>().unwrap();
        // `localhost` as glibc orders it (RFC 6724: ::1 first).
        assert_eq!(
            connect_order([addr("[::1]:80"), addr("127.0.0.1:80")]),
            [addr("127.0.0.1:80"), addr("[::1]:80")]
        );
        assert_eq!(
            connect_order([
                addr("[::1]:80"),
                addr("127.0.0.2:80"),
                addr("127.0.0.1:80"),
                addr("127.0.0.2:80"),
            ]),
            [addr("127.0.0.2:80"), addr("127.0.0.1:80"), addr("[::1]:80")]
        );
        let many: Vec<SocketAddr> = (1..=9u8)
            .map(|n| SocketAddr::from(([127, 0, 0, n], 80)))
            .collect();
        assert_eq!(connect_order(many.clone()), many[..MAX_ADDRESSES_TRIED]);
        assert_eq!(
            connect_order(many[..MAX_ADDRESSES_TRIED].to_vec()).len(),
            MAX_ADDRESSES_TRIED
        );
        assert!(connect_order([]).is_empty());
    }

    fn waiting(lines: &[(&str, bool)]) -> BTreeMap<String, bool> {
        lines.iter().map(|(l, r)| ((*l).to_owned(), *r)).collect()
    }

    #[test]
    fn retries_back_off_from_100ms_doubling_up_to_5s() {
        let ms = |n: u64| Duration::from_millis(n);
        let delays: Vec<Duration> = (1..=8).map(retry_delay).collect();
        assert_eq!(
            delays,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(5000),
                ms(5000)
            ]
        );
        assert_eq!(retry_delay(0), RETRY_INITIAL);
        assert_eq!(retry_delay(u32::MAX), RETRY_MAX);
    }

    #[test]
    fn waiting_lines_merge_and_a_first_sending_is_repeated() {
        let mut lines = BTreeMap::new();
        add(&mut lines, ["region/DE".to_owned()], false);
        add(
            &mut lines,
            ["region/DE".to_owned(), "region/FR".to_owned()],
            true,
        );
        assert_eq!(lines, waiting(&[("region/DE", true), ("region/FR", true)]));
        // A repeat never clears the mark of a first sending waiting for the same line.
        add(&mut lines, ["region/FR".to_owned()], false);
        assert!(lines["region/FR"]);
    }

    #[test]
    fn a_line_purging_everything_stands_alone_and_keeps_the_repeat() {
        let mut lines = waiting(&[("region/DE", true), ("region/FR", false)]);
        add(&mut lines, [ALL.to_owned()], false);
        assert_eq!(lines, waiting(&[(ALL, true)]));
        let mut lines = waiting(&[("region/DE", false)]);
        add(&mut lines, [PICK.to_owned()], false);
        assert_eq!(lines, waiting(&[(PICK, false)]));
        let mut lines = waiting(&[(PICK, false)]);
        add(&mut lines, [ALL.to_owned()], true);
        assert_eq!(lines, waiting(&[(ALL, true)]));
    }

    #[test]
    fn too_many_waiting_lines_become_all_at_the_edge() {
        let mut lines = BTreeMap::new();
        add(
            &mut lines,
            (0..MAX_WAITING_LINES).map(|n| format!("region/{n}")),
            false,
        );
        assert_eq!(lines.len(), MAX_WAITING_LINES);
        add(&mut lines, ["region/x".to_owned()], true);
        assert_eq!(lines, waiting(&[(ALL, true)]));
    }

    #[test]
    fn the_hash_file_holds_the_tokens_sha256_beside_the_snapshot() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let snapshot = dir.path().join("routing.json");
        // SHA-256("abc"), the FIPS 180-2 example.
        let path = write_token_hash(&snapshot, "abc").unwrap();
        assert_eq!(
            path,
            dir.path()
                .join("routing.json.purge-sha256")
                .display()
                .to_string()
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad\n"
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        // Written again over a symlink squatting the name: the link is replaced, its
        // target untouched.
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&victim, &path).unwrap();
        write_token_hash(&snapshot, "abc").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(
            std::fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_file()
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.starts_with('.'))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn hex_is_lower_case() {
        assert_eq!(hex(&[0, 0xab, 0xff]), "00abff");
    }
}
