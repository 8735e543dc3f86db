//! A writer that keeps etcd busy while a test kills and stops members.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use etcd_client::Client;

use super::PREFIX;

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
