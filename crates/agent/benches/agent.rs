//! dw-agent benchmarks against a real etcd on loopback. Prints a Markdown table fragment
//! for BENCHMARKS.md. Run inside the devenv (needs `etcd` on PATH):
//!
//! ```sh
//! scripts/devenv exec -- cargo bench --offline -p dw-agent --bench agent
//! ```
//!
//! Environment knobs: `DW_BENCH_WRITES` (default 1000), `DW_BENCH_FLEET` (default 200),
//! `DW_BENCH_FLEET_WRITES` (default 200), `DW_BENCH_STAGE_KEYS` (default 2500,20000),
//! `DW_BENCH_MEMORY_KEYS` (default 2500,50000,200000), `DW_BENCH_ONLY` (`memory` or
//! `stages`: that section alone), `DW_BENCH_QUICK=1` (fewer of everything).

#[path = "../tests/it/support/mod.rs"]
mod support;

// Not a file of its own in benches/: Cargo would take it for a bench target.
#[path = "parts/stage_cost.rs"]
mod stage_cost;

#[path = "parts/propagation.rs"]
mod propagation;

use std::fs;
use std::time::{Duration, Instant};

use dw_agent::{Config, Publication};
use etcd_client::{Client, Txn, TxnOp};
use propagation::{Spacing, propagation, quiet_spell};
use support::*;
use tokio::sync::mpsc;

fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A realistic region value; `n` makes each one distinct, so every write changes state
/// (a put of the value a key already has is, rightly, not published).
fn region(n: usize) -> String {
    format!(
        r#"{{"shard":"eu-{}","origins":["fra-a","fra-b"],"weight":{{"fra-a":{},"fra-b":50}},"updated":"2026-11-30T08:00:00Z","n":{n}}}"#,
        n % 7,
        n % 100
    )
}

async fn load_regions(client: &mut Client, count: usize) {
    for start in (0..count).step_by(100) {
        let ops: Vec<TxnOp> = (start..(start + 100).min(count))
            .map(|n| TxnOp::put(format!("{PREFIX}region/G{n:04}"), region(n), None))
            .collect();
        client.txn(Txn::new().and_then(ops)).await.unwrap();
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// 2500 → "2,500".
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

struct Row {
    name: String,
    result: String,
    target: &'static str,
    /// Whether the target is met, when there is one.
    met: Option<bool>,
}

/// Writes raw latencies (microseconds, one per line) for later analysis.
fn save_raw(name: &str, latencies: &[Duration]) {
    let Ok(dir) = std::env::var("DW_BENCH_RAW") else {
        return;
    };
    let text: String = latencies
        .iter()
        .map(|d| format!("{}\n", d.as_micros()))
        .collect();
    let _ = fs::write(std::path::Path::new(&dir).join(format!("{name}.txt")), text);
}

fn bench_config(endpoints: Vec<String>, snapshot: &std::path::Path) -> Config {
    let mut config = Config::new(endpoints, snapshot);
    config.etcd.request_timeout = Duration::from_secs(30);
    config
}

/// A client of `cluster`, with the routing prefix emptied.
async fn emptied(cluster: &Cluster) -> etcd_client::Client {
    let mut client = cluster.client().await;
    client
        .delete(
            PREFIX,
            Some(etcd_client::DeleteOptions::new().with_prefix()),
        )
        .await
        .unwrap();
    client
}

/// `fleet` agents, each with its own connection and watch stream, on one etcd; for each
/// write, the time from sending it until the last agent renamed its file.
async fn fan_out(cluster: &Cluster, dir: &std::path::Path, fleet: usize, writes: usize) -> Row {
    let mut client = emptied(cluster).await;
    load_regions(&mut client, 50).await;
    let (merged_tx, mut merged) = mpsc::unbounded_channel::<Publication>();
    let mut agents = Vec::with_capacity(fleet);
    let mut quiet = Duration::ZERO;
    for i in 0..fleet {
        let snapshot = dir.join(format!("fleet-{i}.json"));
        let config = bench_config(cluster.endpoints(), &snapshot);
        quiet = quiet_spell(&config);
        let mut agent = RunningAgent::start(config).await;
        let mut own = std::mem::replace(&mut agent.publications, mpsc::unbounded_channel().1);
        let forward = merged_tx.clone();
        tokio::spawn(async move {
            while let Some(p) = own.recv().await {
                if forward.send(p).is_err() {
                    break;
                }
            }
        });
        agents.push(agent);
    }
    let (now, _) = etcd_state(&mut client, 0).await;
    // Every agent lists first; wait until all hold the loaded state.
    let mut started = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while started < fleet {
        assert!(Instant::now() < deadline, "the fleet did not start");
        match merged.recv().await {
            Some(p) if p.revision >= now => started += 1,
            Some(_) => {}
            None => unreachable!(),
        }
    }

    let mut latencies = Vec::with_capacity(writes);
    for i in 0..writes + 10 {
        let sent = Instant::now();
        let revision = put(
            &mut client,
            &format!("{PREFIX}region/G{:04}", i % 50),
            region(i + 100_000),
        )
        .await;
        let mut seen = 0;
        let mut last = sent;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while seen < fleet {
            let publication = tokio::time::timeout_at(deadline, merged.recv())
                .await
                .unwrap_or_else(|_| panic!("the fleet never published {revision}"))
                .unwrap();
            assert!(
                publication.revision <= revision,
                "an agent skipped revision {revision}"
            );
            if publication.revision == revision {
                seen += 1;
                last = last.max(publication.renamed_at);
            }
        }
        if i >= 10 {
            latencies.push(last.saturating_duration_since(sent));
        }
        // Every write an isolated change for every agent (see `Spacing::Isolated`).
        tokio::time::sleep(quiet).await;
    }
    for agent in agents {
        agent.stop().await;
    }
    latencies.sort();
    save_raw(&format!("fan-out-{fleet}-agents-us"), &latencies);
    Row {
        name: format!("Fleet fan-out, put sent → all {fleet} agents renamed ({writes} writes)"),
        result: format!(
            "p50 {}, p99 {}, max {}",
            ms(percentile(&latencies, 0.5)),
            ms(percentile(&latencies, 0.99)),
            ms(*latencies.last().unwrap()),
        ),
        target: "p99 ≤ 100 ms",
        met: Some(percentile(&latencies, 0.99) <= Duration::from_millis(100)),
    }
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| {
            line.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap()
}

/// Waits until the published file is at `revision` or later with `keys` keys. Polls
/// slowly: at 200,000 keys the file is 30 MB.
async fn published_at(snapshot: &std::path::Path, revision: u64, keys: usize) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        if let Some(published) = read_snapshot(snapshot)
            && published.revision >= revision
            && published.kvs.len() == keys
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no publication of {keys} keys at {revision}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The real binary mirroring `keys` region keys, after 200 further updates: its resident
/// size now and at its peak (VmHWM: the listing, when the old and the new state and the
/// serialised file coexist); plus, at the first size, how long it takes to start and to
/// exit on SIGTERM.
async fn memory(cluster: &mut Cluster, dir: &std::path::Path, sizes: &[usize]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (index, &keys) in sizes.iter().enumerate() {
        let mut client = emptied(cluster).await;
        load_regions(&mut client, keys).await;
        let snapshot = dir.join(format!("memory-{keys}.json"));
        let args = vec![
            format!("--endpoints={}", cluster.endpoints().join(",")),
            format!("--snapshot={}", snapshot.display()),
            "--metrics-addr=127.0.0.1:0".to_owned(),
            "--log=warn".to_owned(),
        ];
        let started = Instant::now();
        // DW_BENCH_AGENT_BIN compares another build of the binary (e.g. an older one).
        let binary = std::env::var("DW_BENCH_AGENT_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_dw-agent").to_owned());
        let mut agent = AgentProcess::spawn_with(
            std::process::Command::new(binary),
            &args,
            &dir.join(format!("memory-{keys}.log")),
        );
        let listed_at = etcd_revision(&mut client).await;
        published_at(&snapshot, listed_at, keys).await;
        let first_publication = started.elapsed();
        let mut last = 0;
        for i in 0..200 {
            last = put(
                &mut client,
                &format!("{PREFIX}region/G{:04}", i * 7 % keys),
                region(i + 1_000_000),
            )
            .await;
        }
        published_at(&snapshot, last, keys).await;
        let pid = agent.child.id();
        let (rss, peak) = (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));
        let file_kib = fs::metadata(&snapshot).unwrap().len() / 1024;
        // A relisting (after any lost session) holds the old and the new state at once:
        // restart etcd, write once more, and take the peak again.
        cluster.members[0].restart();
        assert!(cluster.wait_ready().await, "etcd did not come back");
        client = cluster.client().await;
        let relisted = put(
            &mut client,
            &format!("{PREFIX}region/G0000"),
            region(2_000_000),
        )
        .await;
        published_at(&snapshot, relisted, keys).await;
        let (rss_after_relist, peak_relist) =
            (status_kib(pid, "VmRSS:"), status_kib(pid, "VmHWM:"));
        let stopping = Instant::now();
        let exit = agent.terminate();
        let stop_time = stopping.elapsed();
        assert!(exit.success(), "{}", agent.log());
        let _ = fs::remove_file(&snapshot);
        eprintln!(
            "memory: {keys} keys, {file_kib} KiB file: RSS {rss} KiB, peak {peak} KiB; \
             after a relisting RSS {rss_after_relist} KiB, peak {peak_relist} KiB"
        );
        let (target, met) = if keys <= 2500 {
            ("≤ 15 MiB", rss <= 15 * 1024)
        } else if keys <= MEMORY_SUPPORTED_KEYS {
            (
                "peak with a relisting ≤ 128 MiB (the unit's MemoryMax 192M, with headroom)",
                peak_relist <= 128 * 1024,
            )
        } else {
            ("- (beyond the supported size)", true)
        };
        rows.push(Row {
            name: format!(
                "Agent resident memory, {} region keys ({} KiB snapshot)",
                thousands(keys),
                thousands(file_kib as usize)
            ),
            result: format!(
                "RSS {:.1} MiB, peak {:.1} MiB; with a relisting: peak {:.1} MiB, RSS after {:.1} MiB",
                rss as f64 / 1024.0,
                peak as f64 / 1024.0,
                peak_relist as f64 / 1024.0,
                rss_after_relist as f64 / 1024.0
            ),
            target,
            met: if keys > MEMORY_SUPPORTED_KEYS {
                None
            } else {
                Some(met)
            },
        });
        if index == 0 {
            rows.push(Row {
                name: format!("Start to first snapshot, {} region keys", thousands(keys)),
                result: ms(first_publication),
                target: "-",
                met: None,
            });
            rows.push(Row {
                name: "SIGTERM to exit".to_owned(),
                result: ms(stop_time),
                target: "≤ 1 s",
                met: Some(stop_time <= Duration::from_secs(1)),
            });
        }
    }
    rows
}

/// The largest state docs/agent.md supports within the unit's MemoryMax.
const MEMORY_SUPPORTED_KEYS: usize = 100_000;

/// etcd's current revision.
async fn etcd_revision(client: &mut Client) -> u64 {
    let response = client
        .get(
            PREFIX,
            Some(
                etcd_client::GetOptions::new()
                    .with_prefix()
                    .with_count_only(),
            ),
        )
        .await
        .unwrap();
    u64::try_from(response.header().map_or(0, |h| h.revision())).unwrap_or(0)
}

fn main() {
    // `cargo bench` passes `--bench`; there is nothing to filter.
    let quick = std::env::var("DW_BENCH_QUICK").is_ok_and(|v| v == "1");
    let writes = env_number("DW_BENCH_WRITES", if quick { 200 } else { 1000 });
    let fleet = env_number("DW_BENCH_FLEET", if quick { 50 } else { 200 });
    let fleet_writes = env_number("DW_BENCH_FLEET_WRITES", if quick { 50 } else { 200 });
    // DW_BENCH_MEMORY_KEYS=2500,50000,200000 (the default): the state sizes measured.
    let memory_sizes: Vec<usize> = std::env::var("DW_BENCH_MEMORY_KEYS")
        .unwrap_or_else(|_| "2500,50000,200000".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    // DW_BENCH_STAGE_KEYS=2500,20000 (the default): the state sizes of the stage's cost.
    let stage_sizes: Vec<usize> = std::env::var("DW_BENCH_STAGE_KEYS")
        .unwrap_or_else(|_| "2500,20000".to_owned())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let rounds = if quick { 1 } else { 3 };
    // DW_BENCH_ONLY=memory (or =stages) runs that section alone.
    let only = std::env::var("DW_BENCH_ONLY").unwrap_or_default();
    let (only_memory, only_stages) = (only == "memory", only == "stages");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rows = runtime.block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = Cluster::start(dir.path(), 1).await;
        let mut rows = Vec::new();
        if !only_memory && !only_stages {
            eprintln!("propagation, 20 keys");
            rows.push(propagation(&cluster, dir.path(), 20, writes, Spacing::Isolated).await);
            eprintln!("propagation, 2,500 keys");
            rows.push(propagation(&cluster, dir.path(), 2500, writes, Spacing::Isolated).await);
            eprintln!("propagation, 2,500 keys, back to back");
            let held = (writes / 5).max(50);
            rows.push(propagation(&cluster, dir.path(), 2500, held, Spacing::BackToBack).await);
            eprintln!("propagation, 2,500 keys, while /metrics is scraped");
            rows.push(propagation(&cluster, dir.path(), 2500, writes, Spacing::Scraped).await);
            eprintln!("fan-out, {fleet} agents");
            rows.push(fan_out(&cluster, dir.path(), fleet, fleet_writes).await);
        }
        if !only_memory {
            for &keys in &stage_sizes {
                eprintln!("agent CPU per change with and without an open stage, {keys} keys");
                // Fewer writes at a larger state: each publication costs more.
                let count = (writes * 2500 / keys.max(2500)).max(100);
                rows.extend(
                    stage_cost::stage_cost(&cluster, dir.path(), keys, count, rounds).await,
                );
            }
        }
        if !only_stages {
            eprintln!("memory");
            rows.extend(memory(&mut cluster, dir.path(), &memory_sizes).await);
        }
        rows
    });

    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!("## dw-agent: propagation, fleet fan-out, memory\n");
    println!(
        "How measured: `crates/agent/benches/agent.rs` (release build) starts one etcd 3.5 \
         member on loopback (`--unsafe-no-fsync`, data on tmpfs) and runs the agent code \
         in-process, timing each write from just before the put is sent until the agent's \
         rename of the snapshot returned (so the numbers bound etcd commit → rename from \
         above; the put's own round trip is shown for scale). Writes are sequential, each a \
         new value for one region key, with the agent's default `--coalesce-window` (10 ms): \
         the first change after a quiet spell is published at once and a change inside the \
         window waits for its end, so the target rows wait out the window after each \
         publication (each write is an isolated change, as a drain is) and a back-to-back row \
         shows what a steady stream of changes sees; a scraped row repeats the isolated one while \
         a thread of the bench process GETs `/metrics` back to back (one connection each, as \
         a Prometheus scraping nonstop would), so that rendering the metrics shows in it. Fan-out runs {fleet} full agents, each with its own \
         connection, watch stream and snapshot file, and takes the last agent's rename. \
         Memory is the `dw-agent` binary's VmRSS (and peak VmHWM) after mirroring 2,500, \
         50,000 and 200,000 region keys and 200 further updates. The stage rows run the \
         `dw-agent` binary with a node id, with and without a stage open whose cohort names \
         the node (it stages `region/DE`, which the writes do not touch), alternated {rounds} \
         times; CPU is the agent process's user + system time (`/proc/<pid>/stat`) over the \
         timed writes divided by their count, latency is until the bench saw the file. {cores} cores shared by etcd, the agents and the writer{}.\n",
        if quick {
            "; **quick run, numbers not to quote**"
        } else {
            ""
        }
    );
    println!("| Measure | Result | Target | Met |");
    println!("|---|---|---|---|");
    for row in rows {
        let met = match row.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "-",
        };
        println!("| {} | {} | {} | {met} |", row.name, row.result, row.target);
    }
}
