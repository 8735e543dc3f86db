//! A rate Prometheus answers as NaN, an infinity or below 0 is unusable, never read as 0
//! (issue 40): `dwctl traffic` refuses it (exit 1, naming the query), and the load
//! prediction says that the traffic cannot be used instead of predicting with a 0.

use std::io::{Read as _, Write as _};
use std::net::TcpListener;

use crate::common::{Etcd, seed};

const DE_AB: &str =
    r#"{"shard":"eu-1","origins":["fra-a","fra-b"],"weight":{"fra-a":50,"fra-b":50}}"#;

/// A Prometheus that answers every instant query with one DE sample of `value` (as
/// Prometheus writes it: `"NaN"`, `"+Inf"`, `"-1"`), on a thread of its own until the
/// test ends. Its URL.
fn fake_prometheus(value: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("address"));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            // The request: headers, then a form body of Content-Length bytes.
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            let body_at = loop {
                let Ok(read) = stream.read(&mut buffer) else {
                    break None;
                };
                if read == 0 {
                    break None;
                }
                request.extend_from_slice(&buffer[..read]);
                if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    break Some(end + 4);
                }
            };
            let Some(body_at) = body_at else { continue };
            let head = String::from_utf8_lossy(&request[..body_at]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            while request.len() < body_at + length {
                match stream.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(read) => request.extend_from_slice(&buffer[..read]),
                }
            }
            let body = format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"geo":"DE","kind":"sticky","step":"country","origin":"fra-a","key":"DE"}},"value":[1700000000,"{value}"]}}]}}}}"#
            );
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_rates_are_refused_by_traffic_and_never_predicted_as_0() {
    let etcd = Etcd::start().await;
    seed(&etcd, &[("DE", DE_AB)]).await;
    assert_eq!(etcd.dwctl(&["origin", "capacity", "fra-b", "1000"]).code, 0);
    for value in ["NaN", "+Inf", "-1"] {
        let url = fake_prometheus(value);
        let run = etcd.dwctl(&["traffic", "--prometheus", &url]);
        assert_eq!(run.code, 1, "{value}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("answered a rate that cannot be used"),
            "{value}: {}",
            run.stderr
        );
        // Capacities are set: traffic that cannot be used is refused (exit 9), never
        // predicted as 0 nor waved through.
        let run = etcd.dwctl(&["drain", "fra-a", "--dry-run", "--prometheus", &url]);
        assert_eq!(run.code, 9, "{value}: {}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr
                .contains("answered traffic that cannot be used: a rate of"),
            "{value}: {}",
            run.stderr
        );
    }
    // A usable rate is read (the fake is sound): the prediction is made.
    let url = fake_prometheus("100");
    let (code, json, stderr) =
        etcd.dwctl_json(&["drain", "fra-a", "--dry-run", "--prometheus", &url]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(json["prediction"]["made"], true, "{json}");
}
