//! What `dwctl` reads: bounded input (1 MiB), only regular files or stdin, and one-shot
//! commands that die on SIGINT/SIGTERM (exit 130/143) without writing anything.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Etcd;

const LIMIT: usize = 1024 * 1024;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("dwctl-input-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A valid desired state padded with whitespace to exactly `size` bytes.
fn padded_state(size: usize) -> Vec<u8> {
    let mut text =
        br#"{"regions":{"DE":{"shard":"eu-1","origins":["a"],"weight":{"a":100}}}}"#.to_vec();
    text.resize(size, b' ');
    text
}

/// Waits for the child with a deadline; kills it and fails the test if it hangs.
fn wait_with_deadline(child: &mut std::process::Child, limit: Duration, what: &str) -> i32 {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status.code().unwrap_or(-1);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: dwctl still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_reads_at_most_one_mebibyte() {
    let etcd = Etcd::start().await;
    let dir = temp_dir("limit");
    let at_limit = dir.join("at-limit.json");
    std::fs::write(&at_limit, padded_state(LIMIT)).expect("write");
    let over = dir.join("over.json");
    std::fs::write(&over, padded_state(LIMIT + 1)).expect("write");

    let before = etcd.revision().await;
    let run = etcd.dwctl(&["apply", over.to_str().unwrap_or_default(), "--dry-run"]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    assert!(
        run.stderr.contains("input limit of 1048576 bytes (1 MiB)"),
        "the message names the limit: {}",
        run.stderr
    );
    // Bounded stdin too: more than the limit on a pipe is refused, not buffered whole.
    let mut child = etcd
        .command(&["apply", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        // 64 MiB would be the whole of it; the reader stops after 1 MiB + 1.
        let chunk = vec![b' '; 64 * 1024];
        for _ in 0..1024 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let output = child.wait_with_output().expect("wait");
    let _ = writer.join();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("1 MiB"), "{stderr}");
    assert_eq!(
        etcd.revision().await,
        before,
        "an oversized input wrote something"
    );

    // Exactly at the limit is accepted.
    let run = etcd.dwctl(&["apply", at_limit.to_str().unwrap_or_default()]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs dwctl with `args` (stdin and stdout closed), within 10 s or the test fails
/// (`what` names the case): its exit code and stderr.
fn run_with_deadline(etcd: &Etcd, args: &[&str], what: &str) -> (i32, String) {
    let mut child = etcd
        .command(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let code = wait_with_deadline(&mut child, Duration::from_secs(10), what);
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    (code, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_refuses_devices_fifos_and_directories_at_once() {
    let etcd = Etcd::start().await;
    let dir = temp_dir("special");
    let fifo = dir.join("state.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let dir_path = dir.to_str().unwrap_or_default().to_string();
    let fifo_path = fifo.to_str().unwrap_or_default().to_string();
    for (path, kind) in [
        ("/dev/zero", "a device"),
        (fifo_path.as_str(), "a FIFO"),
        (dir_path.as_str(), "a directory"),
    ] {
        for command in [
            vec!["apply", path],
            vec!["region", "set", "DE", "--file", path],
            vec!["policy", "set", "--file", path],
        ] {
            let (code, stderr) = run_with_deadline(&etcd, &command, path);
            assert_eq!(code, 1, "{command:?}: {stderr}");
            assert!(
                stderr.contains(&format!("is {kind}, not a regular file")),
                "{command:?}: {stderr}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `route --snapshot` reads through the same bounded reader: a FIFO (which no one ever
/// writes: a blocking open would wait forever), a device or a directory is refused at
/// once (exit 1), and the size bound holds at its edge (64 MiB read, one byte more
/// refused before the snapshot is parsed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn route_snapshot_refuses_fifos_devices_and_directories_at_once() {
    let etcd = Etcd::start().await;
    let dir = temp_dir("route-snapshot");
    let fifo = dir.join("routing.json");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let dir_path = dir.to_str().unwrap_or_default().to_string();
    let fifo_path = fifo.to_str().unwrap_or_default().to_string();
    for (path, kind) in [
        (fifo_path.as_str(), "a FIFO"),
        ("/dev/zero", "a device"),
        (dir_path.as_str(), "a directory"),
    ] {
        let (code, stderr) = run_with_deadline(&etcd, &["route", "DE", "--snapshot", path], path);
        assert_eq!(code, 1, "{path}: {stderr}");
        assert!(
            stderr.contains(&format!("is {kind}, not a regular file")),
            "{path}: {stderr}"
        );
    }
    // The bound: a (sparse) file of exactly 64 MiB is read (and is no snapshot), one byte
    // more is refused as too large.
    const SNAPSHOT_LIMIT: u64 = 64 * 1024 * 1024;
    let large = dir.join("large.json");
    for (size, expected) in [
        (SNAPSHOT_LIMIT, "not a snapshot a node would load"),
        (
            SNAPSHOT_LIMIT + 1,
            "larger than 67108864 bytes, the most a node reads",
        ),
    ] {
        std::fs::File::create(&large)
            .and_then(|file| file.set_len(size))
            .expect("sparse file");
        let run = etcd.dwctl(&[
            "route",
            "DE",
            "--snapshot",
            large.to_str().unwrap_or_default(),
        ]);
        assert_eq!(run.code, 1, "{size}: {}", run.stderr);
        assert!(run.stderr.contains(expected), "{size}: {}", run.stderr);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A one-shot command blocked on its input dies on SIGINT (130) and SIGTERM (143), at
/// once, having written nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_commands_die_on_sigint_and_sigterm() {
    let etcd = Etcd::start().await;
    let before = etcd.revision().await;
    for (signal, expected) in [("INT", 130), ("TERM", 143)] {
        for command in [
            vec!["apply", "-"],
            vec!["region", "set", "DE", "--file", "-"],
        ] {
            // stdin is a pipe nobody writes to and nobody closes: the read blocks.
            let mut child = etcd
                .command(&command)
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn");
            let _held_open = child.stdin.take();
            std::thread::sleep(Duration::from_millis(500));
            assert!(
                child.try_wait().expect("try_wait").is_none(),
                "{command:?} should be waiting on stdin"
            );
            let sent = Command::new("kill")
                .args([format!("-{signal}"), child.id().to_string()])
                .status()
                .expect("kill");
            assert!(sent.success());
            let code = wait_with_deadline(&mut child, Duration::from_secs(5), signal);
            let mut stderr = String::new();
            if let Some(mut pipe) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
            }
            assert_eq!(code, expected, "{command:?} on SIG{signal}: {stderr}");
            assert!(stderr.contains(&format!("SIG{signal}")), "{stderr}");
        }
    }
    assert_eq!(
        etcd.revision().await,
        before,
        "an interrupted command wrote something"
    );
}
