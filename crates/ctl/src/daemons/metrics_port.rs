//! The port a daemon serves its metrics on (`dwctl status --serve`, `dwctl autopilot
//! --metrics`): one listener under dw_http_guard's limits, shared with dw-agent's
//! `/metrics` (a cap that evicts the oldest connection still sending its head, a deadline
//! for the head), so that every dwctl metrics port holds the same bounds.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::error::Error;

/// The most connections held at once; one more evicts the oldest still sending its head.
pub const MAX_CONNECTIONS: usize = 64;
/// How long a client has to send its whole request head.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest request head read; a longer one is answered 431.
pub const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long one scrape connection may take, reading the request included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The OpenMetrics content type the encoders' output is served with.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Listens on `addr` (named `flag` in errors: `--serve`, `--metrics`) and answers each
/// request with `respond` in a task of its own: the address bound and the task (dropping
/// the handle leaves it running; abort it to stop serving).
pub async fn listen<F, Fut>(
    addr: SocketAddr,
    flag: &str,
    respond: F,
) -> Result<(SocketAddr, JoinHandle<()>), Error>
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|error| Error::Failed(format!("{flag} {addr}: cannot listen: {error}")))?;
    let bound = listener.local_addr().unwrap_or(addr);
    let limits = dw_http_guard::Limits {
        max_connections: MAX_CONNECTIONS,
        head_timeout: HEAD_TIMEOUT,
        answer_timeout: REQUEST_TIMEOUT,
        max_request_head: MAX_REQUEST_HEAD,
        ..dw_http_guard::Limits::default()
    };
    let task = tokio::spawn(dw_http_guard::serve(
        listener,
        limits,
        Arc::new(dw_http_guard::NoEvents),
        respond,
    ));
    Ok((bound, task))
}
