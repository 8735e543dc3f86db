//! HTTP health probes: a plain `GET` over a TCP connection, judged by the status line.
//!
//! Hand-rolled on purpose: a probe needs one request and one status code, and plain HTTP
//! keeps the health checker free of a TLS and HTTP client stack. Probe an origin's
//! plain-HTTP health port (or a local sidecar) rather than its TLS front.

pub use crate::plan::probe_target::ProbeTarget;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// GETs the target. `Ok(status)` for a 2xx or 3xx answer within `timeout`; otherwise
/// `Err` with what went wrong.
pub async fn probe(target: &ProbeTarget, timeout: Duration) -> Result<u16, String> {
    let exchange = async {
        let mut stream = TcpStream::connect((target.host.as_str(), target.port))
            .await
            .map_err(|error| format!("connect: {error}"))?;
        let host = if target.host.contains(':') {
            format!("[{}]:{}", target.host, target.port)
        } else {
            format!("{}:{}", target.host, target.port)
        };
        let request = format!(
            "GET {} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: dwctl-health\r\nAccept: */*\r\nConnection: close\r\n\r\n",
            target.path
        );
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|error| format!("send: {error}"))?;
        let mut head = Vec::with_capacity(256);
        let mut buffer = [0u8; 256];
        while !head.contains(&b'\n') && head.len() < 4096 {
            let read = stream
                .read(&mut buffer)
                .await
                .map_err(|error| format!("receive: {error}"))?;
            if read == 0 {
                break;
            }
            head.extend_from_slice(&buffer[..read]);
        }
        let line = String::from_utf8_lossy(&head);
        let line = line.lines().next().unwrap_or_default();
        let mut parts = line.split_whitespace();
        let status = match (parts.next(), parts.next()) {
            (Some(version), Some(code)) if version.starts_with("HTTP/") => code.parse::<u16>().ok(),
            _ => None,
        };
        match status {
            Some(status) if (200..400).contains(&status) => Ok(status),
            Some(status) => Err(format!("status {status}")),
            None => Err(format!("not an HTTP answer: {line:?}")),
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_http_urls() {
        let target = ProbeTarget::parse("http://10.1.0.1:8080/healthz?x=1").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("10.1.0.1", 8080, "/healthz?x=1")
        );
        let target = ProbeTarget::parse("http://origin.example").unwrap();
        assert_eq!(
            (target.host.as_str(), target.port, target.path.as_str()),
            ("origin.example", 80, "/")
        );
        let target = ProbeTarget::parse("http://[::1]:81/h").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("::1", 81));
        assert!(ProbeTarget::parse("https://a/").is_err());
        assert!(ProbeTarget::parse("http://a:99999/").is_err());
        assert!(ProbeTarget::parse("http:///x").is_err());
        // A refused URL is named without its password or token.
        for bad in [
            "https://u:hunter2@a/",
            "http://u:hunter2@a:99999/?token=x",
            "ftp://a/?token=hunter2",
        ] {
            let reason = ProbeTarget::parse(bad).unwrap_err();
            assert!(
                !reason.contains("hunter2") && reason.contains("***"),
                "{bad}: {reason}"
            );
        }
    }
}
