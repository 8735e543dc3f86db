//! A long-running `dwctl` as a process, its output in a log file.

use std::process::Stdio;
use std::time::Duration;

use tokio::process::Child;

use super::Etcd;

/// A long-running dwctl whose output goes to a log file (shown when a test fails).
pub struct Daemon {
    child: Child,
    log: std::path::PathBuf,
}

impl Daemon {
    pub fn start(etcd: &Etcd, name: &str, args: &[&str]) -> Daemon {
        Daemon::spawn(etcd.tokio_command(args), etcd, name)
    }

    /// Starts `command` (made by [`Etcd::tokio_command`], then changed), its log beside etcd's data.
    pub fn spawn(mut command: tokio::process::Command, etcd: &Etcd, name: &str) -> Daemon {
        let log = etcd.data_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = command
            .stdout(Stdio::from(file.try_clone().expect("log file")))
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .expect("spawn dwctl");
        Daemon { child, log }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("kill");
        assert!(status.success());
    }

    /// SIGTERM, then the exit code.
    pub async fn terminate(mut self) -> i32 {
        self.signal("-TERM");
        let status = tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("no exit after SIGTERM; log:\n{}", self.log()))
            .expect("wait");
        status.code().unwrap_or(-1)
    }

    pub async fn sigkill(mut self) {
        self.child.kill().await.expect("SIGKILL");
    }
}

impl Drop for Daemon {
    /// A failing test shows what each daemon it started said.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- {}:\n{}", self.log.display(), self.log());
        }
    }
}
