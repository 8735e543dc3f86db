//! `GET /metrics` and `GET /healthz`, served by hyper (HTTP/1.1, one request per
//! connection, then closed).
//!
//! Nothing on this port may take publication down: every connection costs a descriptor,
//! and the agent needs descriptors to publish. So (`dw_http_guard`, which `dwctl status
//! --serve` uses too) at most `max_connections` are held at once, each for at most
//! [`HEAD_TIMEOUT`] until its request head is in and [`CLIENT_TIMEOUT`] in all. A
//! connection beyond the cap evicts the oldest one still waiting for its request head (an
//! idle or slow client); when every held connection is already being answered, the new
//! one is closed at once. A flood of idle connections thus costs at most the cap in
//! descriptors, and a prober that sends its request right away is still answered.
//! Rendering takes no lock publication holds for longer than a counter update
//! ([`crate::metrics`]).

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{CACHE_CONTROL, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use tokio::net::TcpListener;

use crate::config::bounds::{CLIENT_TIMEOUT, HEAD_TIMEOUT, MAX_REQUEST_HEAD};
use crate::metrics::{self, Metrics};

/// Counts the guard's evictions and refusals in `/metrics`.
struct Counted(Arc<Metrics>);

impl dw_http_guard::Events for Counted {
    fn evicted(&self) {
        self.0.metrics_connection_evicted();
    }
    fn refused(&self) {
        self.0.metrics_connection_refused();
    }
}

/// Serves until the future is dropped (the connection handling is `dw_http_guard`'s, shared
/// with `dwctl status --serve`).
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>, max_connections: usize) {
    let limits = dw_http_guard::Limits {
        max_connections,
        head_timeout: HEAD_TIMEOUT,
        answer_timeout: CLIENT_TIMEOUT,
        max_request_head: MAX_REQUEST_HEAD,
    };
    let events = Arc::new(Counted(metrics.clone()));
    dw_http_guard::serve(listener, limits, events, move |request| {
        let metrics = metrics.clone();
        async move { respond(&metrics, &request) }
    })
    .await;
}

fn respond(metrics: &Metrics, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let (status, content_type, body) = match (request.method(), request.uri().path()) {
        (&Method::GET, "/metrics") => (StatusCode::OK, metrics::CONTENT_TYPE, metrics.render()),
        (&Method::GET, "/healthz") => match metrics.health() {
            Ok(()) => (
                StatusCode::OK,
                "text/plain; charset=utf-8",
                "ok\n".to_owned(),
            ),
            Err(reason) => (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8",
                format!("{reason}\n"),
            ),
        },
        (&Method::GET, _) => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "try /metrics or /healthz\n".to_owned(),
        ),
        _ => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only\n".to_owned(),
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    headers.insert(
        CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    response
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpStream;

    use std::time::Duration;

    use super::*;

    /// Sends `request` on a new connection and reads the answer until the server closes.
    async fn exchange(addr: SocketAddr, request: &[u8]) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request).await.unwrap();
        let mut answer = Vec::new();
        let read = tokio::time::timeout(CLIENT_TIMEOUT, stream.read_to_end(&mut answer));
        read.await
            .expect("the server closes after one answer")
            .unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    async fn start(max_connections: usize) -> (SocketAddr, Arc<Metrics>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new(Duration::from_secs(60), None));
        tokio::spawn(serve(listener, metrics.clone(), max_connections));
        (addr, metrics)
    }

    #[tokio::test]
    async fn answers_one_request_per_connection() {
        let (addr, _) = start(4).await;
        let metrics = exchange(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(metrics.starts_with("HTTP/1.1 200 OK\r\n"), "{metrics}");
        assert!(
            metrics.contains("content-type: text/plain; version=0.0.4; charset=utf-8\r\n"),
            "{metrics}"
        );
        assert!(metrics.contains("cache-control: no-store\r\n"), "{metrics}");
        assert!(metrics.contains("\r\n\r\n# HELP dw_agent_"), "{metrics}");
        let health = exchange(addr, b"GET /healthz?x=1 HTTP/1.0\r\n\r\n").await;
        assert!(health.starts_with("HTTP/1.0 503 "), "{health}");
        assert!(health.ends_with("\r\n\r\nstarting\n"), "{health}");
        let other = exchange(addr, b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(other.starts_with("HTTP/1.1 404 "), "{other}");
        let post = exchange(addr, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
    }

    #[tokio::test]
    async fn a_request_head_over_the_limit_is_refused() {
        let (addr, _) = start(4).await;
        let padding = "a".repeat(MAX_REQUEST_HEAD);
        let request = format!("GET /metrics HTTP/1.1\r\nX-Pad: {padding}\r\n\r\n");
        let answer = exchange(addr, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        let fits = format!(
            "GET /metrics HTTP/1.1\r\nX-Pad: {}\r\n\r\n",
            &padding[..7000]
        );
        let answer = exchange(addr, fits.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    }

    /// At the cap, a new connection evicts the oldest one still waiting for its head.
    #[tokio::test]
    async fn a_connection_over_the_cap_evicts_the_oldest_idle_one() {
        let (addr, metrics) = start(2).await;
        let mut idle = Vec::new();
        for _ in 0..2 {
            idle.push(TcpStream::connect(addr).await.unwrap());
        }
        let answer = exchange(addr, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
        let mut buf = [0u8; 16];
        let first = tokio::time::timeout(CLIENT_TIMEOUT, idle[0].read(&mut buf)).await;
        assert_eq!(
            first.expect("the oldest idle one is closed").unwrap_or(0),
            0
        );
        let text = metrics.render();
        assert!(
            text.contains("\ndw_agent_metrics_connections_evicted_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("\ndw_agent_metrics_connections_refused_total 0\n"),
            "{text}"
        );
    }
}
