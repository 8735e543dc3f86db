//! A fake Prometheus for dwctl's load prediction: an HTTP server on loopback that answers
//! `/api/v1/query` from a table of per-node series, summed as the query's `by (...)` asks,
//! as Prometheus would (so that a test runs the same against today's queries and older
//! ones). Values are the API's strings ("NaN", "+Inf", "-1", "3.3e15").

use std::sync::Arc;

use percent_encoding::percent_decode_str;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One node's series of `dw_router_answers_total` rates: `(geo, sticky, value)`.
#[derive(Debug, Clone)]
pub struct FakeNode {
    pub node: &'static str,
    pub rows: Vec<(&'static str, bool, &'static str)>,
    /// The node's busiest minute (`None`: no peak series).
    pub peak: Option<&'static str>,
    /// Whether the node had counters when the window began.
    pub at_start: bool,
}

impl FakeNode {
    /// A node answering `rate` per second of sticky DE, steady (peak = rate, counters
    /// older than the window).
    pub fn steady(node: &'static str, rate: &'static str) -> FakeNode {
        FakeNode {
            node,
            rows: vec![("DE", true, rate)],
            peak: Some(rate),
            at_start: true,
        }
    }
}

/// Serves `nodes` on a free loopback port; returns the base URL.
pub async fn fake_prometheus(nodes: Vec<FakeNode>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let nodes = Arc::new(nodes);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let nodes = nodes.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // Headers, then Content-Length bytes of form.
                loop {
                    let Ok(read) = stream.read(&mut buffer).await else {
                        return;
                    };
                    if read == 0 {
                        return;
                    }
                    request.extend_from_slice(&buffer[..read]);
                    let text = String::from_utf8_lossy(&request).into_owned();
                    if let Some(end) = text.find("\r\n\r\n") {
                        let length = text[..end]
                            .lines()
                            .find_map(|line| {
                                let (name, value) = line.split_once(':')?;
                                name.eq_ignore_ascii_case("content-length")
                                    .then(|| value.trim().parse::<usize>().ok())?
                            })
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                }
                let text = String::from_utf8_lossy(&request).into_owned();
                let body = text.split_once("\r\n\r\n").map_or("", |(_, body)| body);
                let query = body
                    .split('&')
                    .find_map(|pair| pair.strip_prefix("query="))
                    .map(|query| percent_decode_str(query).decode_utf8_lossy().into_owned())
                    .unwrap_or_default();
                let answer = json!({"status": "success",
                    "data": {"resultType": "vector", "result": answer(&nodes, &query)}})
                .to_string();
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    format!("http://{address}")
}

/// The instant vector Prometheus would give `query` for `nodes`.
fn answer(nodes: &[FakeNode], query: &str) -> Vec<Value> {
    let sample = |metric: Value, value: String| json!({"metric": metric, "value": [1.0, value]});
    if query.contains("overflow") {
        return vec![sample(json!({}), "0".into())];
    }
    if query.contains(" offset ") {
        return nodes
            .iter()
            .filter(|node| node.at_start)
            .map(|node| sample(json!({"node": node.node}), "1".into()))
            .collect();
    }
    if query.contains("max_over_time") {
        return nodes
            .iter()
            .filter_map(|node| Some(sample(json!({"node": node.node}), node.peak?.into())))
            .collect();
    }
    // The rows: per node when the query keeps `node`, else summed over nodes.
    let per_node = query.contains("by (node,");
    let mut sums: Vec<(Value, f64)> = Vec::new();
    for node in nodes {
        for (geo, sticky, value) in &node.rows {
            // The counters' `kind` label (issue 41; `sticky="true"` before it).
            let kind = if *sticky { "sticky" } else { "plain" };
            let mut metric = json!({"geo": geo, "kind": kind, "step": "country"});
            if per_node {
                metric["node"] = json!(node.node);
            }
            let value: f64 = match *value {
                "NaN" => f64::NAN,
                "+Inf" => f64::INFINITY,
                "-Inf" => f64::NEG_INFINITY,
                other => other.parse().expect("a number"),
            };
            match sums.iter_mut().find(|(m, _)| *m == metric) {
                Some((_, sum)) => *sum += value,
                None => sums.push((metric, value)),
            }
        }
    }
    sums.into_iter()
        .map(|(metric, value)| {
            let text = if value.is_nan() {
                "NaN".to_string()
            } else if value == f64::INFINITY {
                "+Inf".to_string()
            } else if value == f64::NEG_INFINITY {
                "-Inf".to_string()
            } else {
                value.to_string()
            };
            sample(metric, text)
        })
        .collect()
}
