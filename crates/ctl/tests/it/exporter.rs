//! `dwctl status --serve`: the fleet's view as Prometheus metrics, from real etcd and node
//! reports believed as `status` believes them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::daemon::Daemon;
use crate::common::fleet::{Fleet, applying, nodes};
use crate::common::{DE, Etcd, eventually};

/// The address the exporter's `listening` event names.
async fn listening(daemon: &Daemon) -> String {
    eventually(Duration::from_secs(10), "the exporter listens", || async {
        let log = daemon.log();
        let line = log.lines().find(|line| line.starts_with("listening: "))?;
        let url = line.split_whitespace().find(|w| w.starts_with("http://"))?;
        let url = url.trim_end_matches(',');
        Some(
            url.trim_start_matches("http://")
                .trim_end_matches("/metrics")
                .to_owned(),
        )
    })
    .await
}

/// One GET; the status line and the body.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    (
        head.lines().next().unwrap_or("").to_owned(),
        body.to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_the_fleet_view_and_its_own_failures() {
    let etcd = Etcd::start().await;
    crate::common::seed(&etcd, &[("DE", DE)]).await;
    // Visitor buckets on (N = 4): the exporter serves each origin's share of them.
    etcd.put("/dw/routing/policy/global", r#"{"buckets":4}"#)
        .await;
    let ids = nodes(2);
    let fleet = Fleet::start(&etcd, &applying(&ids)).await;
    let exporter = Daemon::start(
        &etcd,
        "exporter",
        &["status", "--serve", "127.0.0.1:0", "--interval", "0.5"],
    );
    let addr = listening(&exporter).await;
    let head = etcd.revision().await;
    let metrics = eventually(Duration::from_secs(10), "both nodes current", || async {
        let (status, body) = get(&addr, "/metrics");
        assert!(status.contains("200"), "{status}");
        body.contains("dw_fleet_nodes{status=\"current\"} 2\n")
            .then_some(body)
    })
    .await;
    assert!(metrics.contains("dw_fleet_up 1\n"), "{metrics}");
    assert!(
        metrics.contains("dw_fleet_nodes{status=\"lagging\"} 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("dw_fleet_node_state{node=\"edge-0\",state=\"ok\"} 1\n"),
        "{metrics}"
    );
    let routing = metrics
        .lines()
        .find_map(|l| l.strip_prefix("dw_fleet_routing_revision "))
        .and_then(|v| v.parse::<i64>().ok())
        .expect("routing revision");
    assert!(routing > 0 && routing <= head, "{metrics}");
    // Each region's configured weights, for dashboards and alerts that compare them with
    // the answers the nodes count.
    for (origin, weight) in [("fra-a", 50), ("fra-b", 30), ("ams-a", 20)] {
        assert!(
            metrics.contains(&format!(
                "dw_routing_weight{{region=\"DE\",origin=\"{origin}\"}} {weight}\n"
            )),
            "{metrics}"
        );
    }
    assert!(
        metrics.contains("dw_routing_regions_unreadable 0\n"),
        "{metrics}"
    );
    // Where the routing core sends answers (alert DwOriginWeightedButIdle): every plain
    // answer of DE to the one origin DE's hash picks, the sticky ones by share.
    let plain: Vec<&str> = metrics
        .lines()
        .filter(|line| line.starts_with("dw_routing_plain_route{geo=\"DE\",region=\"DE\","))
        .collect();
    assert_eq!(plain.len(), 1, "{metrics}");
    assert!(plain[0].ends_with("} 1"), "{metrics}");
    for origin in ["fra-a", "fra-b", "ams-a"] {
        assert!(
            metrics.contains(&format!(
                "dw_routing_sticky_share{{region=\"DE\",origin=\"{origin}\"}} 0."
            )),
            "{metrics}"
        );
    }
    // Visitor buckets: each origin's buckets / N in DE's default assignment (50/30/20 at
    // N = 4: 2, 1 and 1 buckets); a bucket share of no origin is missing.
    for (origin, share) in [("fra-a", "0.5"), ("fra-b", "0.25"), ("ams-a", "0.25")] {
        assert!(
            metrics.contains(&format!(
                "dw_routing_bucket_share{{region=\"DE\",origin=\"{origin}\"}} {share}\n"
            )),
            "{metrics}"
        );
    }
    // An automatic drain that went ahead against its prediction (as `dwctl health` records
    // it): the overload is served until the record goes.
    etcd.put(
        "/dw/control/drains/fra-a",
        r#"{"schema":2,"origin":"fra-a","reason":"probe failed","source":"health","by":"health@edge","at":"2026-12-04T00:00:00Z","regions":{},"predicted":{"made":true,"source":"prometheus","headroom":0.8,"overloads":[{"origin":"fra-b","predicted":1200.0,"before":700.0,"capacity":1000.0,"limit":800.0}]}}"#,
    )
    .await;
    eventually(
        Duration::from_secs(10),
        "the predicted overload",
        || async {
            get(&addr, "/metrics")
                .1
                .contains(
                    "dw_fleet_predicted_overload_ratio{origin=\"fra-b\",drained=\"fra-a\"} 1.2\n",
                )
                .then_some(())
        },
    )
    .await;
    assert!(get(&addr, "/other").0.contains("404"));

    // A forged report on no lease (as a careless operator or another node would write it):
    // the exporter counts the node as lagging, as `status` does.
    etcd.put("/dw/nodes/forged", r#"{"revision":999999,"state":"ok"}"#)
        .await;
    let metrics = eventually(Duration::from_secs(10), "the forged node lags", || async {
        let body = get(&addr, "/metrics").1;
        body.contains("dw_fleet_nodes{status=\"lagging\"} 1\n")
            .then_some(body)
    })
    .await;
    assert!(
        metrics.contains("dw_fleet_node_state{node=\"forged\",state=\"untrusted\"} 1\n"),
        "{metrics}"
    );
    fleet.stop().await;
    assert_eq!(exporter.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn says_when_it_cannot_read_etcd() {
    let etcd = Etcd::start().await;
    let mut command = etcd.tokio_command(&[
        "--timeout",
        "1",
        "status",
        "--serve",
        "127.0.0.1:0",
        "--interval",
        "0.5",
    ]);
    // Nothing listens on port 9 of loopback.
    command.env("DWCTL_ENDPOINTS", "http://127.0.0.1:9");
    let exporter = Daemon::spawn(command, &etcd, "unreachable");
    let addr = listening(&exporter).await;
    let metrics = eventually(Duration::from_secs(20), "a failed read counted", || async {
        let body = get(&addr, "/metrics").1;
        (body.contains("dw_fleet_up 0\n") && !body.contains("dw_fleet_read_errors_total 0\n"))
            .then_some(body)
    })
    .await;
    assert!(metrics.contains("dw_fleet_read_errors_total "), "{metrics}");
    assert!(
        exporter.log().contains("read-failed: "),
        "{}",
        exporter.log()
    );
    assert_eq!(exporter.terminate().await, 0);
}

/// A read that hangs (etcd stopped, connections open) is a failure said once, like a read
/// that errs, and the recovery is said when etcd answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn says_when_a_read_of_etcd_hangs() {
    let etcd = Etcd::start().await;
    // A per-call timeout longer than the exporter's own bound on a reading (5 s), so
    // that the reading times out before any call does.
    let command = etcd.tokio_command(&[
        "--timeout",
        "30",
        "status",
        "--serve",
        "127.0.0.1:0",
        "--interval",
        "0.5",
    ]);
    let exporter = Daemon::spawn(command, &etcd, "hanging");
    let addr = listening(&exporter).await;
    eventually(Duration::from_secs(10), "a good reading", || async {
        get(&addr, "/metrics")
            .1
            .contains("dw_fleet_up 1\n")
            .then_some(())
    })
    .await;
    etcd.pause();
    let said = eventually(Duration::from_secs(20), "the hang said", || async {
        let log = exporter.log();
        log.contains("read-failed: ").then_some(log)
    })
    .await;
    etcd.resume();
    assert!(said.contains("no answer within 5s"), "{said}");
    assert_eq!(said.matches("read-failed: ").count(), 1, "{said}");
    assert!(get(&addr, "/metrics").1.contains("dw_fleet_up 0\n"));
    eventually(Duration::from_secs(20), "the recovery said", || async {
        exporter.log().contains("recovered: ").then_some(())
    })
    .await;
    assert_eq!(exporter.terminate().await, 0);
}

#[test]
fn refuses_a_bad_address_or_interval() {
    // Usage errors are found before any connection: nothing listens on port 9.
    let etcd = "http://127.0.0.1:9";
    for (args, want) in [
        (vec!["status", "--serve", "nowhere"], "expected an address"),
        (
            vec!["status", "--serve", "127.0.0.1:0", "--interval", "0.1"],
            "between 0.5 and 3600",
        ),
        (vec!["status", "--interval", "2"], "--serve"),
    ] {
        let run = crate::common::run({
            let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_dwctl"));
            command.env("DWCTL_ENDPOINTS", etcd).args(&args);
            command
        });
        assert_eq!(run.code, 2, "{args:?}: {}", run.stderr);
        assert!(run.stderr.contains(want), "{args:?}: {}", run.stderr);
    }
}
