//! A fake fleet for `rollout` tests: node reports written by the test as agents write
//! them (each node on a lease its report and seen record name, so that dwctl believes
//! them), and a plain-HTTP health endpoint that turns unhealthy.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use dw_node_report::{NodeReport, RejectedKey, ReportedStage};
use dw_routing::stage::{Node, Stage};
use etcd_client::{Client, GetOptions, PutOptions};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Etcd, PREFIX};

/// What a fake node does with the stages it is in.
#[derive(Clone, Copy, PartialEq)]
pub enum Behaviour {
    /// Applies them, as an agent does.
    Applies,
    /// Never applies them (a node stuck on old routing).
    Never,
    /// Applies them but reports the staged `region/DE` rejected.
    RejectsDe,
}

/// Node reports written by the test: every 50 ms each node reports the stages whose
/// cohort holds it, on a lease its report and seen record name.
pub struct Fleet {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Fleet {
    pub async fn start(etcd: &Etcd, nodes: &[(&str, Behaviour)]) -> Fleet {
        let mut client = Client::connect([etcd.endpoint()], None).await.unwrap();
        let mut leases = Vec::new();
        for (id, _) in nodes {
            let live = client.lease_grant(60, None).await.unwrap().id();
            let seen = client.lease_grant(600, None).await.unwrap().id();
            leases.push((id.to_string(), live, seen));
        }
        let behaviours: Vec<Behaviour> = nodes.iter().map(|(_, b)| *b).collect();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let task = tokio::spawn(async move {
            let mut written: BTreeMap<String, NodeReport> = BTreeMap::new();
            while !stopping.load(Ordering::SeqCst) {
                let response = client
                    .get(
                        format!("{PREFIX}stage/"),
                        Some(GetOptions::new().with_prefix()),
                    )
                    .await
                    .unwrap();
                let revision = response.header().unwrap().revision();
                let stages: Vec<(Stage, i64)> = response
                    .kvs()
                    .iter()
                    .filter_map(|kv| {
                        let key = kv.key_str().ok()?;
                        let id = key.strip_prefix(&format!("{PREFIX}stage/"))?;
                        Some((
                            Stage::parse(id, kv.value_str().ok()?).ok()?,
                            kv.mod_revision(),
                        ))
                    })
                    .collect();
                for ((id, live, seen), behaviour) in leases.iter().zip(&behaviours) {
                    let labels = BTreeMap::new();
                    let node = Node {
                        id,
                        labels: &labels,
                    };
                    let applied: Vec<ReportedStage> = stages
                        .iter()
                        .filter(|(stage, _)| stage.cohort.contains(&stage.id, &node))
                        .filter(|_| *behaviour != Behaviour::Never)
                        .map(|(stage, revision)| ReportedStage {
                            id: Some(stage.id.clone()),
                            revision: *revision,
                        })
                        .collect();
                    let rejected = if *behaviour == Behaviour::RejectsDe && !applied.is_empty() {
                        vec![RejectedKey {
                            key: Some(format!("{PREFIX}region/DE")),
                            error: Some("test".into()),
                        }]
                    } else {
                        Vec::new()
                    };
                    let state = if rejected.is_empty() {
                        "ok"
                    } else {
                        "rejected"
                    };
                    let report = agent_report(id, *live, 0, state);
                    let report = NodeReport {
                        stages: applied,
                        rejected,
                        revision: None,
                        ..report
                    };
                    if written.get(id.as_str()) == Some(&report) {
                        continue;
                    }
                    let body = NodeReport {
                        revision: Some(revision),
                        ..report.clone()
                    };
                    put_report(&mut client, id, &to_value(&body), (*live, *seen)).await;
                    written.insert(id.clone(), report);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Fleet { stop, task }
    }

    pub async fn stop(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.unwrap();
    }
}

/// Writes `body` as node `id`'s live report on lease `live` and its seen record on lease
/// `seen`, as an agent does (the body must name `live` as its `lease`).
pub async fn put_report(client: &mut Client, id: &str, body: &Value, (live, seen): (i64, i64)) {
    let text = body.to_string();
    let on = |lease: i64| Some(PutOptions::new().with_lease(lease));
    client
        .put(format!("/dw/nodes/{id}"), text.clone(), on(live))
        .await
        .unwrap();
    client
        .put(format!("/dw/nodes-seen/{id}"), text, on(seen))
        .await
        .unwrap();
}

/// A well-formed report as an agent of this build writes it (the shared type, schema
/// `dw_node_report::SCHEMA`): `state`, at `revision`, on lease `lease`.
pub fn agent_report(id: &str, lease: i64, revision: i64, state: &str) -> NodeReport {
    NodeReport {
        instance: Some("test".into()),
        lease: Some(lease),
        node: Some(id.into()),
        revision: Some(revision),
        state: Some(state.into()),
        ..NodeReport::new()
    }
}

/// One believable report of node `id` at etcd's current revision: an agent's report (from
/// the type), with `fields` (state, labels, stages, ...) written over it as they are given
/// (a test of a hostile or old report spells those out), on new leases (60 s live, 600 s
/// seen).
pub async fn report_once(etcd: &Etcd, id: &str, fields: Value) {
    let mut client = etcd.client().await;
    let live = client.lease_grant(60, None).await.unwrap().id();
    let seen = client.lease_grant(600, None).await.unwrap().id();
    let mut body = to_value(&agent_report(id, live, etcd.revision().await, "ok"));
    for (key, value) in fields.as_object().into_iter().flatten() {
        body[key] = value.clone();
    }
    put_report(&mut client, id, &body, (live, seen)).await;
}

/// A report as its JSON value, for writing.
pub fn to_value(report: &NodeReport) -> Value {
    serde_json::from_str(&report.to_json()).unwrap()
}

pub fn nodes(count: usize) -> Vec<String> {
    (0..count).map(|i| format!("edge-{i}")).collect()
}

pub fn applying(ids: &[String]) -> Vec<(&str, Behaviour)> {
    ids.iter()
        .map(|id| (id.as_str(), Behaviour::Applies))
        .collect()
}

/// A plain-HTTP health endpoint: `200` for the first `healthy` requests, `500` after.
pub async fn probe_server(healthy: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/healthz", listener.local_addr().unwrap());
    let served = Arc::new(AtomicUsize::new(0));
    let counter = served.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let n = counter.fetch_add(1, Ordering::SeqCst);
            let mut buffer = [0u8; 1024];
            let _ = stream.read(&mut buffer).await;
            let status = if n < healthy { "200 OK" } else { "500 Oops" };
            let answer =
                format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    (url, served)
}
