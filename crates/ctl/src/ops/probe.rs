//! HTTP health probes: a plain `GET` over a TCP connection, judged by the status line.
//!
//! Hand-rolled on purpose: a probe needs one request and one status code, and plain HTTP
//! keeps the health checker free of a TLS and HTTP client stack. Probe an origin's
//! plain-HTTP health port (or a local sidecar) rather than its TLS front.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Where a probe goes: `http://host[:port][/path]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// The URL as given.
    pub url: String,
    /// Host name or address to connect to.
    pub host: String,
    /// Port (80 when the URL has none).
    pub port: u16,
    /// Path of the request (`/` when the URL has none).
    pub path: String,
}

impl ProbeTarget {
    /// Parses `http://host[:port][/path]`; the reason when it is not one.
    pub fn parse(url: &str) -> Result<ProbeTarget, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("`{url}`: only http:// URLs can be probed"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| format!("`{url}`: unclosed `[` in the host"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("`{url}`: no host"));
        }
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| format!("`{url}`: bad port `{port}`"))?,
            None => 80,
        };
        Ok(ProbeTarget {
            url: url.to_string(),
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

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
    }
}
