//! A probe target for `dwctl health`: an HTTP server on loopback that answers 200 or 503
//! as a switch says.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Serves `/healthz` on a free loopback port, 200 while `healthy` holds, 503 otherwise;
/// returns the URL to probe.
pub async fn health_server(healthy: Arc<AtomicBool>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let healthy = healthy.clone();
            tokio::spawn(async move {
                let mut request = [0u8; 1024];
                let _ = stream.read(&mut request).await;
                let answer = if healthy.load(Ordering::SeqCst) {
                    "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                } else {
                    "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                };
                let _ = stream.write_all(answer.as_bytes()).await;
            });
        }
    });
    format!("http://{address}/healthz")
}
