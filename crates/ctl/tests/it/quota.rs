//! etcd's space quota: once a writer fills it, etcd refuses every write with NOSPACE;
//! dwctl says so and prints the recovery steps instead of a bare gRPC error.

use crate::common::{DE, Etcd};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nospace_is_recognised_and_explained() {
    // A 4 MB quota, filled the way a node credential could: 1 MB rewrites of its key.
    let etcd = Etcd::start_with_flags(None, &["--quota-backend-bytes", "4000000"]).await;
    let mut client = etcd.client().await;
    let big = "x".repeat(1_000_000);
    let mut refused = None;
    for _ in 0..40 {
        if let Err(error) = client.put("/dw/nodes/filler", big.as_str(), None).await {
            refused = Some(error.to_string());
            break;
        }
    }
    let refused = refused.expect("the quota was never reached");
    assert!(refused.contains("database space exceeded"), "{refused}");

    let run = etcd.dwctl(&["region", "set", "DE", DE]);
    assert_eq!(run.code, 1, "{} {}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("database space exceeded"),
        "{}",
        run.stderr
    );
    for step in ["etcdctl compact", "etcdctl defrag", "etcdctl alarm disarm"] {
        assert!(run.stderr.contains(step), "{step}: {}", run.stderr);
    }
}
