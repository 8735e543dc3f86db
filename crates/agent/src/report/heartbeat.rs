//! The heartbeat file beside the snapshot: `<snapshot>.heartbeat`, rewritten every
//! `--heartbeat-interval` (default 5 s; 0: none) with the agent's own verdict on the node,
//! so that PHP (`php/status.php`, a load balancer's health check) can tell an agent that
//! keeps the snapshot current from one that stopped or lost etcd: a quiet fleet writes no
//! snapshot for hours, so the snapshot's age says nothing.
//!
//! ```json
//! {"time":1764783000,"interval":5,"state":"current","revision":42,"agent_state":"watching"}
//! ```
//!
//! `time` is Unix seconds; `state` is `current` while `/healthz` says 200 and `stale`
//! otherwise, with `reason` (`/healthz`'s text, at most [`MAX_REASON_BYTES`]); `revision`
//! is the published snapshot's (0: none yet); `purge_failing_since` (Unix seconds, only
//! with `--purge-url` and only while it holds) says since when every purge request
//! failed: cached pages may name a drained origin until their TTL. The file is written like the snapshot (a
//! temp file of random name made exclusively without following a symlink in the
//! snapshot's directory, mode 0644, renamed over the name), so readers trust it by the
//! same rules: a regular file owned by the snapshot's owner. It is not fsynced (it says
//! nothing after a reboot). Writes run on the blocking pool and never wait for, or hold
//! up, a publication; a failed write is logged once per distinct error and retried at
//! the next tick. A stopped agent leaves the file as it was: its `time` ages.

use std::ffi::OsString;
use std::fs::{self, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::json;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::metrics::StatusHandle;
use crate::publish::snapshot_dir::{create_temp, remove_stale_temp_files};

/// The most bytes of the `reason` text (cut on a character boundary).
pub const MAX_REASON_BYTES: usize = 256;

/// The heartbeat's path for a snapshot path: the same name with `.heartbeat` appended.
pub fn heartbeat_path(snapshot: &Path) -> PathBuf {
    let mut name = OsString::from(snapshot.as_os_str());
    name.push(".heartbeat");
    PathBuf::from(name)
}

/// The running heartbeat task; stops (is aborted) when dropped.
pub(crate) struct Heartbeat(Option<JoinHandle<()>>);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
        }
    }
}

/// Starts the heartbeat beside `snapshot` (nothing when `interval` is zero).
pub(crate) fn start(snapshot: &Path, interval: Duration, status: StatusHandle) -> Heartbeat {
    if interval.is_zero() {
        return Heartbeat(None);
    }
    let path = heartbeat_path(snapshot);
    let dir = match snapshot.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = path.file_name().and_then(|n| n.to_str()).map(str::to_owned) else {
        warn!(snapshot = %snapshot.display(), "the snapshot's name is not UTF-8: no heartbeat file");
        return Heartbeat(None);
    };
    info!(heartbeat = %path.display(), interval_ms = interval.as_millis() as u64, "writing the heartbeat file");
    Heartbeat(Some(tokio::spawn(beat(dir, name, path, interval, status))))
}

async fn beat(dir: PathBuf, name: String, path: PathBuf, interval: Duration, status: StatusHandle) {
    {
        let (dir, name) = (dir.clone(), name.clone());
        let _ = tokio::task::spawn_blocking(move || remove_stale_temp_files(&dir, &name)).await;
    }
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_error: Option<String> = None;
    // Until the agent stops (the task is aborted then).
    loop {
        ticker.tick().await;
        let now = status.get();
        let revision = now.published_revision.unwrap_or(0);
        let mut body = render(
            &now.health,
            revision,
            now.state.as_str(),
            unix_seconds(),
            interval,
        );
        if let Some(since) = status.0.purge.failing_since() {
            body = with_purge_failing_since(&body, since);
        }
        let (dir, name, path_) = (dir.clone(), name.clone(), path.clone());
        let written = tokio::task::spawn_blocking(move || write(&dir, &name, &path_, &body))
            .await
            .unwrap_or_else(|e| Err(io::Error::other(e.to_string())));
        match written {
            Ok(()) if last_error.take().is_some() => {
                info!(heartbeat = %path.display(), "the heartbeat file is written again");
            }
            Ok(()) => {}
            Err(e) => {
                let error = e.to_string();
                if last_error.as_deref() != Some(error.as_str()) {
                    warn!(heartbeat = %path.display(), error = %error,
                        "cannot write the heartbeat file; status.php will say 503");
                }
                last_error = Some(error);
            }
        }
    }
}

fn unix_seconds() -> u64 {
    dw_node_report::unix_ms(SystemTime::now()) / 1000
}

/// The file's text: the agent's health (`/healthz`'s verdict), the published revision
/// (0: none) and state name.
fn render(
    health: &Result<(), String>,
    revision: u64,
    agent_state: &str,
    time: u64,
    interval: Duration,
) -> String {
    let mut body = json!({
        "time": time,
        "interval": interval.as_secs_f64(),
        "state": if health.is_ok() { "current" } else { "stale" },
        "revision": revision,
        "agent_state": agent_state,
    });
    if let Err(reason) = health {
        body["reason"] = json!(cut(reason, MAX_REASON_BYTES));
    }
    format!("{body}\n")
}

/// The heartbeat `body` with `"purge_failing_since": since` (Unix seconds) added: every
/// purge request since then failed (`--purge-url`; absent while they land). Routing health
/// (`state`) is unchanged by it; `status.php?require=cache` answers 503 on it.
fn with_purge_failing_since(body: &str, since: u64) -> String {
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(mut value) => {
            value["purge_failing_since"] = json!(since);
            format!("{value}\n")
        }
        Err(_) => body.to_owned(),
    }
}

fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Writes `body` into a fresh temp file in `dir` and renames it over `path`.
fn write(dir: &Path, name: &str, path: &Path, body: &str) -> io::Result<()> {
    let (temp, mut file) = create_temp(dir, name)?;
    let written = file
        .set_permissions(Permissions::from_mode(0o644))
        .and_then(|()| file.write_all(body.as_bytes()))
        .and_then(|()| fs::rename(&temp, path));
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::bounds::{DEFAULT_HEARTBEAT_INTERVAL, MAX_HEARTBEAT_INTERVAL};

    fn render_at(health: Result<(), String>) -> serde_json::Value {
        let text = render(&health, 42, "watching", 7, Duration::from_secs(5));
        assert!(text.ends_with("}\n"), "{text}");
        serde_json::from_str(&text).unwrap()
    }

    #[test]
    fn purge_failing_since_is_added_and_the_rest_kept() {
        let text = render(&Ok(()), 42, "watching", 7, Duration::from_secs(5));
        let with = with_purge_failing_since(&text, 1_764_783_000);
        assert!(with.ends_with("}\n"), "{with}");
        let value: serde_json::Value = serde_json::from_str(&with).unwrap();
        assert_eq!(value["purge_failing_since"], 1_764_783_000);
        assert_eq!(value["state"], "current");
        assert_eq!(value["revision"], 42);
        assert!(render_at(Ok(())).get("purge_failing_since").is_none());
    }

    #[test]
    fn failing_since_is_the_first_failure_and_clears_when_one_lands() {
        let counters = crate::metrics::purge_counters::PurgeCounters::default();
        assert_eq!(counters.failing_since(), None);
        counters.sent(true);
        let first = counters.failing_since().expect("failing");
        counters.sent(true);
        assert_eq!(counters.failing_since(), Some(first));
        counters.sent(false);
        assert_eq!(counters.failing_since(), None);
    }

    fn interval_flag(value: &str) -> Result<Duration, String> {
        use clap::Parser as _;
        let argv = [
            "dw-agent",
            "--endpoints",
            "127.0.0.1:2379",
            "--nodes-prefix",
            "off",
        ];
        crate::config::Cli::try_parse_from(argv.iter().chain(&["--heartbeat-interval", value]))
            .map_err(|e| e.to_string())
            .and_then(|cli| cli.into_config().map_err(|e| e.to_string()))
            .map(|config| config.heartbeat_interval)
    }

    #[test]
    fn interval_flag_defaults_to_5s_allows_0_and_at_most_60s() {
        assert_eq!(interval_flag("5s"), Ok(DEFAULT_HEARTBEAT_INTERVAL));
        assert_eq!(interval_flag("0"), Ok(Duration::ZERO));
        assert_eq!(interval_flag("60s"), Ok(MAX_HEARTBEAT_INTERVAL));
        let too_long = interval_flag("60001ms").unwrap_err();
        assert!(too_long.contains("at most 60s"), "{too_long}");
        let config = crate::Config::new(vec!["127.0.0.1:2379".into()], "/tmp/s.json");
        assert_eq!(config.heartbeat_interval, DEFAULT_HEARTBEAT_INTERVAL);
    }

    #[test]
    fn path_is_the_snapshot_name_with_heartbeat_appended() {
        assert_eq!(
            heartbeat_path(Path::new("/run/dw-router/routing.json")),
            Path::new("/run/dw-router/routing.json.heartbeat")
        );
    }

    #[test]
    fn renders_current_and_stale_with_a_cut_reason() {
        let value = render_at(Ok(()));
        assert_eq!(value["state"], "current");
        assert_eq!(value["agent_state"], "watching");
        assert_eq!(value["time"], 7);
        assert_eq!(value["revision"], 42);
        assert_eq!(value["interval"], 5.0);
        assert!(value.get("reason").is_none());
        // A reason at the cap is kept whole; one byte more is cut to the cap, on a
        // character boundary (é is two bytes).
        for (reason, kept) in [
            ("x".repeat(MAX_REASON_BYTES), MAX_REASON_BYTES),
            ("x".repeat(MAX_REASON_BYTES + 1), MAX_REASON_BYTES),
            (
                format!("{}é", "x".repeat(MAX_REASON_BYTES - 1)),
                MAX_REASON_BYTES - 1,
            ),
        ] {
            let value = render_at(Err(reason));
            assert_eq!(value["state"], "stale");
            assert_eq!(value["reason"].as_str().unwrap().len(), kept);
        }
    }

    #[test]
    fn write_replaces_the_file_and_leaves_no_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.json.heartbeat");
        write(dir.path(), "s.json.heartbeat", &path, "one\n").unwrap();
        write(dir.path(), "s.json.heartbeat", &path, "two\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "two\n");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o644);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![OsString::from("s.json.heartbeat")]);
    }
}
