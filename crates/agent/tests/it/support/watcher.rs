//! A reader of the snapshot file that checks every version it sees.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use dw_routing::Snapshot;
use etcd_client::Client;

use super::{etcd_state, read_snapshot};

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
