//! A deliberately tiny HTTP/1.1 server for `GET /metrics` and `GET /healthz`.
//!
//! Two read-only endpoints do not justify an HTTP stack in a daemon whose memory budget is
//! a few megabytes: each connection gets one request and one response, then is closed.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::metrics::Metrics;

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);

/// Serves until the future is dropped.
pub(crate) async fn serve(listener: TcpListener, metrics: Arc<Metrics>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let metrics = metrics.clone();
                tokio::spawn(async move {
                    let answered = tokio::time::timeout(CLIENT_TIMEOUT, answer(stream, &metrics));
                    if let Ok(Err(e)) = answered.await {
                        debug!(error = %e, "metrics client went away");
                    }
                });
            }
            Err(e) => {
                // Usually EMFILE: wait rather than spin.
                debug!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_REQUEST_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "",
            )
            .await;
        }
    }
    let request_line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    let request_line = String::from_utf8_lossy(request_line);
    let mut parts = request_line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    if method != "GET" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n",
        )
        .await;
    }
    let (status, content_type, body) = match path {
        "/metrics" => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        ),
        "/healthz" => match metrics.health() {
            Ok(()) => ("200 OK", "text/plain; charset=utf-8", "ok\n".to_owned()),
            Err(reason) => (
                "503 Service Unavailable",
                "text/plain; charset=utf-8",
                format!("{reason}\n"),
            ),
        },
        _ => (
            "404 Not Found",
            "text/plain",
            "try /metrics or /healthz\n".to_owned(),
        ),
    };
    respond(&mut stream, status, content_type, &body).await
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}
