//! The measuring tool of `bench/50-fleet.sh` (a bench tool, not part of the agent): it makes
//! one routing change and times how it reaches a fleet of real `dw-agent` processes, or it
//! holds many plain watch streams (a simulated fleet) and times how a change reaches them.
//!
//! ```text
//! fleet_probe change --commit URL --key K --value V --snapshots FILE --expect N
//!                    [--dwctl PATH --status-endpoints URLS] [--timeout-ms MS]
//! fleet_probe watchers --commit URL --endpoints URLS --streams N --connections C
//!                      --key K --changes K [--timeout-ms MS]
//! ```
//!
//! `change` watches every snapshot's directory with inotify (IN_MOVED_TO), puts the key,
//! and prints, per node, when the rename was seen and the file's ctime (the kernel's own
//! rename time), both from the moment the put was sent; then it runs `dwctl status` until
//! every one of the N live nodes is at the new revision. `watchers` opens N watch streams on
//! the key's prefix spread over C gRPC connections, then makes `--changes` changes and times
//! each from the put to every stream's event. Output: `key=value` lines on stdout.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use etcd_client::{Client, WatchOptions};
use tokio::sync::mpsc;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((command, rest)) = args.split_first() else {
        fail("usage: fleet_probe change|watchers --flag value ...");
    };
    let flags = Flags::parse(rest);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("tokio: {e}")));
    match command.as_str() {
        "change" => runtime.block_on(change(&flags)),
        "watchers" => runtime.block_on(watchers(&flags)),
        other => fail(&format!("unknown command {other}")),
    }
}

fn fail(message: &str) -> ! {
    eprintln!("fleet_probe: {message}");
    std::process::exit(2)
}

struct Flags(HashMap<String, String>);

impl Flags {
    fn parse(args: &[String]) -> Flags {
        let mut map = HashMap::new();
        for pair in args.chunks(2) {
            match pair {
                [flag, value] if flag.starts_with("--") => {
                    map.insert(flag[2..].to_owned(), value.clone());
                }
                _ => fail(&format!("expected --flag value pairs, got {pair:?}")),
            }
        }
        Flags(map)
    }

    fn text(&self, name: &str) -> String {
        self.0
            .get(name)
            .cloned()
            .unwrap_or_else(|| fail(&format!("--{name} is required")))
    }

    fn number(&self, name: &str, default: u64) -> u64 {
        self.0.get(name).map_or(default, |v| {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("--{name}: not a number: {v}")))
        })
    }
}

fn unix_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128)
}

/// Puts `key` through a fresh connection: (revision, unix ns when sent, round trip).
async fn commit(endpoint: &str, key: &str, value: &str) -> (i64, i128, Duration) {
    let mut client = Client::connect([endpoint], None)
        .await
        .unwrap_or_else(|e| fail(&format!("connect {endpoint}: {e}")));
    let sent = unix_ns();
    let started = Instant::now();
    let response = client
        .put(key, value, None)
        .await
        .unwrap_or_else(|e| fail(&format!("put {key}: {e}")));
    let revision = response.header().map_or(0, |h| h.revision());
    (revision, sent, started.elapsed())
}

/// `p50=… p99=… max=…` in milliseconds over `expected` nodes; a node never reached makes
/// the percentiles it falls into `-`.
fn percentiles(name: &str, mut delays_ns: Vec<i128>, expected: usize) -> String {
    delays_ns.sort_unstable();
    let at = |fraction: f64| {
        let rank = ((expected as f64 * fraction).ceil() as usize).max(1);
        delays_ns
            .get(rank - 1)
            .map_or("-".to_owned(), |ns| format!("{:.1}", *ns as f64 / 1e6))
    };
    format!(
        "{name}_p50_ms={} {name}_p99_ms={} {name}_max_ms={}",
        at(0.5),
        at(0.99),
        at(1.0)
    )
}

/// inotify on every snapshot's directory: the unix ns each snapshot's rename was read.
struct Renames {
    fd: i32,
    by_watch: HashMap<i32, usize>,
    names: Vec<Vec<u8>>,
}

impl Renames {
    fn watch(paths: &[PathBuf]) -> Renames {
        // SAFETY: plain system calls on a descriptor this struct owns.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        if fd < 0 {
            fail(&format!("inotify: {}", std::io::Error::last_os_error()));
        }
        let mut by_watch = HashMap::new();
        let mut names = Vec::new();
        for (index, path) in paths.iter().enumerate() {
            let dir = path
                .parent()
                .unwrap_or_else(|| fail("a snapshot has no directory"));
            let dir = CString::new(dir.as_os_str().as_bytes()).unwrap_or_else(|_| fail("NUL"));
            // SAFETY: `dir` is a valid C string for the duration of the call.
            let wd = unsafe { libc::inotify_add_watch(fd, dir.as_ptr(), libc::IN_MOVED_TO) };
            if wd < 0 {
                fail(&format!(
                    "inotify_add_watch: {}",
                    std::io::Error::last_os_error()
                ));
            }
            by_watch.insert(wd, index);
            names.push(
                path.file_name()
                    .map_or(Vec::new(), |n| n.as_bytes().to_vec()),
            );
        }
        Renames {
            fd,
            by_watch,
            names,
        }
    }

    /// Reads events until every snapshot was renamed once or `deadline`.
    fn collect(&self, deadline: Instant) -> Vec<Option<i128>> {
        let mut seen = vec![None; self.names.len()];
        let mut left = self.names.len();
        let mut buffer = vec![0u8; 1 << 16];
        while left > 0 && Instant::now() < deadline {
            let mut poll = libc::pollfd {
                fd: self.fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut poll, 1, 20) };
            // SAFETY: reads into a buffer of the length given.
            let read = unsafe { libc::read(self.fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            let now = unix_ns();
            let mut offset = 0usize;
            while read > 0 && offset + 16 <= read as usize {
                let field = |at: usize| {
                    let mut word = [0u8; 4];
                    word.copy_from_slice(&buffer[offset + at..offset + at + 4]);
                    word
                };
                let wd = i32::from_ne_bytes(field(0));
                let len = u32::from_ne_bytes(field(12)) as usize;
                let name = &buffer[offset + 16..(offset + 16 + len).min(read as usize)];
                let name = name.split(|b| *b == 0).next().unwrap_or_default();
                if let Some(&index) = self.by_watch.get(&wd)
                    && name == self.names[index].as_slice()
                    && seen[index].is_none()
                {
                    seen[index] = Some(now);
                    left -= 1;
                }
                offset += 16 + len;
            }
        }
        seen
    }
}

impl Drop for Renames {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this struct opened.
        unsafe { libc::close(self.fd) };
    }
}

async fn change(flags: &Flags) {
    let paths: Vec<PathBuf> = std::fs::read_to_string(flags.text("snapshots"))
        .unwrap_or_else(|e| fail(&format!("--snapshots: {e}")))
        .lines()
        .filter(|l| !l.is_empty())
        .map(PathBuf::from)
        .collect();
    let expected = flags.number("expect", paths.len() as u64) as usize;
    let timeout = Duration::from_millis(flags.number("timeout-ms", 20_000));
    let renames = Renames::watch(&paths);
    let deadline = Instant::now() + timeout;
    // The reader runs before the put, so a rename is read as soon as its thread runs.
    let reader = std::thread::spawn(move || renames.collect(deadline));
    let (revision, sent, round_trip) = commit(
        &flags.text("commit"),
        &flags.text("key"),
        &flags.text("value"),
    )
    .await;
    let seen = reader
        .join()
        .unwrap_or_else(|_| fail("the inotify reader panicked"));
    let mut inotify = Vec::new();
    let mut ctime = Vec::new();
    for (path, at) in paths.iter().zip(&seen) {
        let Some(at) = at else { continue };
        inotify.push(at - sent);
        if let Ok(meta) = std::fs::metadata(path) {
            ctime.push(
                i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()) - sent,
            );
        }
    }
    let mut tick = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec. ctime comes from this coarse clock: its resolution is
    // how early a ctime can be.
    unsafe { libc::clock_getres(libc::CLOCK_REALTIME_COARSE, &mut tick) };
    println!(
        "revision={revision} put_ms={:.2} ctime_tick_ms={:.1} renamed={} expected={expected} {} {}",
        round_trip.as_secs_f64() * 1e3,
        tick.tv_nsec as f64 / 1e6,
        inotify.len(),
        percentiles("inotify", inotify, expected),
        percentiles("ctime", ctime, expected),
    );
    if let Some(dwctl) = flags.0.get("dwctl") {
        let (status_ms, polls) = status_all_at(
            dwctl,
            &flags.text("status-endpoints"),
            expected,
            sent,
            deadline,
        );
        println!("status_ms={status_ms} status_polls={polls}");
    }
}

/// Runs `dwctl status` until it exits 0 (every live node at the routing revision) with at
/// least `expected` live nodes: ms from `sent` to the end of that run, or `-`.
fn status_all_at(
    dwctl: &str,
    endpoints: &str,
    expected: usize,
    sent: i128,
    deadline: Instant,
) -> (String, u32) {
    let mut polls = 0;
    while Instant::now() < deadline {
        polls += 1;
        let output = Command::new(dwctl)
            .args(["--endpoints", endpoints, "status"])
            .output()
            .unwrap_or_else(|e| fail(&format!("{dwctl}: {e}")));
        let done = unix_ns();
        let text = String::from_utf8_lossy(&output.stdout);
        // The summary: "N of M live nodes at revision R".
        let live = text
            .lines()
            .rev()
            .find_map(|l| {
                l.split(" of ")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse::<usize>()
                    .ok()
            })
            .unwrap_or(0);
        if output.status.success() && live >= expected {
            return (format!("{:.1}", (done - sent) as f64 / 1e6), polls);
        }
        if Instant::now() + Duration::from_millis(20) >= deadline {
            eprintln!("fleet_probe: dwctl status never showed all {expected} nodes; last:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    ("-".to_owned(), polls)
}

async fn watchers(flags: &Flags) {
    let endpoints: Vec<String> = flags
        .text("endpoints")
        .split(',')
        .map(str::to_owned)
        .collect();
    let streams = flags.number("streams", 1000) as usize;
    let connections = (flags.number("connections", 20) as usize).max(1);
    let key = flags.text("key");
    let prefix = flags
        .0
        .get("prefix")
        .cloned()
        .unwrap_or_else(|| "/dw/routing/".to_owned());
    let timeout = Duration::from_millis(flags.number("timeout-ms", 60_000));
    let mut clients = Vec::new();
    for index in 0..connections {
        let endpoint = &endpoints[index % endpoints.len()];
        clients.push(
            Client::connect([endpoint.as_str()], None)
                .await
                .unwrap_or_else(|e| fail(&format!("connect {endpoint}: {e}"))),
        );
    }
    // Each stream reports (stream, revision, unix ns) for every event it receives.
    let (events, mut received) = mpsc::unbounded_channel::<(usize, i64, i128)>();
    let created = Arc::new(AtomicUsize::new(0));
    let ended = Arc::new(AtomicUsize::new(0));
    let opening = Instant::now();
    let limit = Arc::new(tokio::sync::Semaphore::new(256));
    for index in 0..streams {
        let mut client = clients[index % connections].clone();
        let ended = ended.clone();
        let (events, created, limit, prefix) = (
            events.clone(),
            created.clone(),
            limit.clone(),
            prefix.clone(),
        );
        tokio::spawn(async move {
            let permit = limit.acquire_owned().await;
            let options = WatchOptions::new().with_prefix();
            let Ok(mut stream) = client.watch(prefix, Some(options)).await else {
                return;
            };
            while let Ok(Some(response)) = stream.message().await {
                if response.created() {
                    created.fetch_add(1, Ordering::Relaxed);
                    drop(permit);
                    break;
                }
            }
            // A stream that fails or ends is counted: its watcher is never notified again.
            let _ended = EndCounter(ended);
            while let Ok(Some(response)) = stream.message().await {
                let now = unix_ns();
                for event in response.events() {
                    let revision = event.kv().map_or(0, |kv| kv.mod_revision());
                    if events.send((index, revision, now)).is_err() {
                        return;
                    }
                }
            }
        });
    }
    drop(events);
    while created.load(Ordering::Relaxed) < streams && opening.elapsed() < timeout {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let open = created.load(Ordering::Relaxed);
    println!(
        "streams={open} connections={connections} open_s={:.1}",
        opening.elapsed().as_secs_f64()
    );
    let commit_endpoint = flags.text("commit");
    for change in 0..flags.number("changes", 3) {
        let value = format!("{{\"fleet_probe\":{change}}}");
        let (revision, sent, round_trip) = commit(&commit_endpoint, &key, &value).await;
        let deadline = tokio::time::Instant::now() + timeout.min(Duration::from_secs(5));
        let mut notified = vec![false; streams];
        let mut delays = Vec::with_capacity(streams);
        while delays.len() < open {
            let Ok(Some((index, event_revision, at))) =
                tokio::time::timeout_at(deadline, received.recv()).await
            else {
                break;
            };
            if event_revision >= revision && !notified[index] {
                notified[index] = true;
                delays.push(at - sent);
            }
        }
        println!(
            "change={change} revision={revision} put_ms={:.2} notified={} streams={open} ended={} {}",
            round_trip.as_secs_f64() * 1e3,
            delays.len(),
            ended.load(Ordering::Relaxed),
            percentiles("notified", delays, streams),
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    std::process::exit(0);
}

/// Counts, when dropped, one watch stream that stopped.
struct EndCounter(Arc<AtomicUsize>);

impl Drop for EndCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}
