//! What an open stage costs the agent per change: the `dw-agent` binary (with a node id, so
//! that it applies stages), fed sequential puts, with and without a stage open whose cohort
//! holds the node. CPU is the agent process's own (user + system from `/proc/<pid>/stat`,
//! every thread, over the whole timed loop), so the writer, the etcd client of the bench
//! and etcd itself are not in it.

use std::fs;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use super::*;

/// The node id the agent runs with; the stage's cohort names it.
const NODE: &str = "bench-node";

/// The region the stage touches (written in both runs, staged in one).
const STAGED_REGION: &str = "region/DE";

/// One run's figures.
#[derive(Clone, Copy)]
struct Run {
    p50: Duration,
    p99: Duration,
    cpu_per_change: Duration,
}

/// The agent process's CPU time so far (user + system, all its threads, living or not).
fn agent_cpu(pid: u32) -> Duration {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which is in parentheses and may hold spaces):
    // state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Duration::from_micros(ticks * 1_000_000 / per_second)
}

/// The revision of the file at `path` (the writer puts it second: `{"format":1,"revision":N`).
fn file_revision(path: &Path) -> Option<u64> {
    let mut head = [0u8; 64];
    let read = fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = std::str::from_utf8(&head[..read]).ok()?;
    let digits = text.split("\"revision\":").nth(1)?;
    let end = digits.find(|c: char| !c.is_ascii_digit())?;
    digits[..end].parse().ok()
}

/// Polls the file until it is at `revision` or later: when it was seen so.
fn seen_at(path: &Path, revision: u64) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if file_revision(path).is_some_and(|at| at >= revision) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "revision {revision} never published"
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

async fn run_once(cluster: &Cluster, dir: &Path, keys: usize, writes: usize, staged: bool) -> Run {
    let mut client = emptied(cluster).await;
    load_regions(&mut client, keys).await;
    put(&mut client, &format!("{PREFIX}{STAGED_REGION}"), region(7)).await;
    if staged {
        let stage = serde_json::json!({"schema": 1, "id": "bench", "cohort": {"nodes": [NODE]},
            "kvs": {STAGED_REGION: region(8)}, "base": {}});
        put(
            &mut client,
            &format!("{PREFIX}stage/bench"),
            stage.to_string(),
        )
        .await;
    }
    let snapshot = dir.join(format!("stage-cost-{staged}-{keys}.json"));
    let _ = fs::remove_file(&snapshot);
    let args = vec![
        format!("--endpoints={}", cluster.endpoints().join(",")),
        format!("--snapshot={}", snapshot.display()),
        "--metrics-addr=127.0.0.1:0".to_owned(),
        "--log=warn".to_owned(),
        format!("--node-id={NODE}"),
    ];
    let mut agent = AgentProcess::spawn_with(
        std::process::Command::new(env!("CARGO_BIN_EXE_dw-agent")),
        &args,
        &dir.join(format!("stage-cost-{staged}-{keys}.log")),
    );
    let listed_at = etcd_revision(&mut client).await;
    seen_at(&snapshot, listed_at);
    let published = fs::read_to_string(&snapshot).unwrap_or_default();
    assert_eq!(
        published.contains("\"stages\":[{\"id\":\"bench\""),
        staged,
        "the stage is applied exactly when open"
    );
    let pid = agent.child.id();
    let mut latencies = Vec::with_capacity(writes);
    let mut cpu_before = Duration::ZERO;
    let warm_up = 50;
    for i in 0..writes + warm_up {
        if i == warm_up {
            cpu_before = agent_cpu(pid);
        }
        let key = format!("{PREFIX}region/G{:04}", i % keys.max(1));
        let sent = Instant::now();
        let revision = put(&mut client, &key, region(i + 30_000)).await;
        let seen = seen_at(&snapshot, revision);
        if i >= warm_up {
            latencies.push(seen.saturating_duration_since(sent));
        }
    }
    let cpu = agent_cpu(pid).saturating_sub(cpu_before);
    let exit = agent.terminate();
    assert!(exit.success(), "{}", agent.log());
    let _ = fs::remove_file(&snapshot);
    latencies.sort();
    Run {
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        cpu_per_change: cpu / u32::try_from(writes.max(1)).unwrap_or(u32::MAX),
    }
}

/// The runs with and without a stage, alternated `rounds` times so that drift on the
/// machine lands on both; the median of each by CPU.
pub async fn stage_cost(
    cluster: &Cluster,
    dir: &Path,
    keys: usize,
    writes: usize,
    rounds: usize,
) -> Vec<Row> {
    let mut plain = Vec::new();
    let mut staged = Vec::new();
    for round in 0..rounds {
        eprintln!("  round {}/{rounds}", round + 1);
        plain.push(run_once(cluster, dir, keys, writes, false).await);
        staged.push(run_once(cluster, dir, keys, writes, true).await);
    }
    let median = |runs: &mut Vec<Run>| {
        runs.sort_by_key(|run| run.cpu_per_change);
        eprintln!(
            "  CPU per change, each run: {:?}",
            runs.iter()
                .map(|r| ms(r.cpu_per_change))
                .collect::<Vec<_>>()
        );
        runs[runs.len() / 2]
    };
    let without = median(&mut plain);
    let with = median(&mut staged);
    let ratio = with.cpu_per_change.as_secs_f64() / without.cpu_per_change.as_secs_f64().max(1e-9);
    vec![
        Row {
            name: format!(
                "Agent CPU per change, no stage, {} region keys ({} writes, median of {rounds} runs)",
                thousands(keys),
                thousands(writes)
            ),
            result: format!(
                "CPU {} per change (put sent → file seen: p50 {}, p99 {})",
                ms(without.cpu_per_change),
                ms(without.p50),
                ms(without.p99)
            ),
            target: "-",
            met: None,
        },
        Row {
            name: format!(
                "The same with a stage open whose cohort holds the node ({} region keys)",
                thousands(keys)
            ),
            result: format!(
                "CPU {} per change: **{ratio:.2}x** the CPU without (p50 {}, p99 {})",
                ms(with.cpu_per_change),
                ms(with.p50),
                ms(with.p99)
            ),
            target: "CPU per change ≤ 1.2x",
            met: Some(ratio <= 1.2),
        },
    ]
}
