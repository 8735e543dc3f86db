//! `--purge-url` and `--purge-repeat-after`: where the page cache's purge endpoint is, and
//! when each purge is sent again.

use std::time::Duration;

/// The default of `--purge-repeat-after`.
pub const DEFAULT_PURGE_REPEAT_AFTER: Duration = Duration::from_secs(1);
/// The longest `--purge-repeat-after` accepted (a repeat is only useful soon after).
pub const MAX_PURGE_REPEAT_AFTER: Duration = Duration::from_secs(60);
/// The longest `--purge-url` accepted.
const MAX_URL_BYTES: usize = 2048;

/// Purging the node's page cache after each publication (docs/agent.md, "Purging the
/// page cache").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeConfig {
    /// The endpoint, `http://host:port/path`.
    pub url: PurgeUrl,
    /// Every purge is sent again this long after it landed, for the pages a worker still
    /// answered from the old table and the cache stored after the first one. Zero: no
    /// repeat (the test suite's control; such pages then stay until their TTL).
    pub repeat_after: Duration,
}

impl PurgeConfig {
    /// The endpoint at `url` (checked), with the default repeat.
    pub fn new(url: &str) -> Result<PurgeConfig, String> {
        Ok(PurgeConfig {
            url: PurgeUrl::parse(url)?,
            repeat_after: DEFAULT_PURGE_REPEAT_AFTER,
        })
    }

    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.repeat_after > MAX_PURGE_REPEAT_AFTER {
            return Err(format!(
                "--purge-repeat-after must be at most {}s (0: no repeat)",
                MAX_PURGE_REPEAT_AFTER.as_secs()
            ));
        }
        Ok(())
    }

    /// Whether every purge is sent again (`--purge-repeat-after` is not 0).
    pub fn repeats(&self) -> bool {
        !self.repeat_after.is_zero()
    }
}

/// A purge endpoint: plain HTTP (the secret crosses the node's loopback only), an explicit
/// port, and an absolute path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeUrl {
    /// The host as written (a name, an IPv4 address, or an IPv6 one in brackets).
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path (and query), starting with `/`.
    pub path: String,
}

impl PurgeUrl {
    /// Parses `http://host:port/path[?query]`.
    pub fn parse(text: &str) -> Result<PurgeUrl, String> {
        let refuse = |why: &str| {
            Err(format!(
                "--purge-url {:?}: {why}; give http://HOST:PORT/PATH, e.g. \
                 http://127.0.0.1:8088/dw-purge.php",
                text.escape_debug().to_string()
            ))
        };
        if text.len() > MAX_URL_BYTES {
            return refuse(&format!("longer than {MAX_URL_BYTES} bytes"));
        }
        if let Some(bad) = text.chars().find(|c| !c.is_ascii_graphic()) {
            return refuse(&format!(
                "{bad:?} is not allowed (no spaces, controls or non-ASCII)"
            ));
        }
        let Some(rest) = text.strip_prefix("http://") else {
            return refuse("only http:// is supported (the endpoint is on this node)");
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => return refuse("no path"),
        };
        if path.contains('#') {
            return refuse("a fragment (#) is not sent to a server");
        }
        if authority.contains('@') {
            return refuse("user info is not supported (the agent sends its own secret)");
        }
        let (host, port) = match authority.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() => (host, port),
            _ => return refuse("no host:port"),
        };
        let port = match port.parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => return refuse(&format!("port {port:?} is not 1 to 65535")),
        };
        let ipv6 = host.starts_with('[') && host.ends_with(']');
        let valid_host = if ipv6 {
            host[1..host.len() - 1]
                .parse::<std::net::Ipv6Addr>()
                .is_ok()
        } else {
            host.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        };
        if !valid_host {
            return refuse(&format!("{host:?} is not a host name or an IP address"));
        }
        Ok(PurgeUrl {
            host: host.to_owned(),
            port,
            path: path.to_owned(),
        })
    }

    /// `host:port`, the `Host` header.
    pub fn authority(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }

    /// The host to connect to (an IPv6 address without its brackets).
    pub(crate) fn connect_host(&self) -> &str {
        self.host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(&self.host)
    }
}

impl std::fmt::Display for PurgeUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_urls_are_read() {
        let url = PurgeUrl::parse("http://127.0.0.1:8088/dw-purge.php").unwrap();
        assert_eq!((url.host.as_str(), url.port), ("127.0.0.1", 8088));
        assert_eq!(url.path, "/dw-purge.php");
        assert_eq!(url.to_string(), "http://127.0.0.1:8088/dw-purge.php");
        let url = PurgeUrl::parse("http://[::1]:80/p?x=1").unwrap();
        assert_eq!((url.connect_host(), url.path.as_str()), ("::1", "/p?x=1"));
        assert_eq!(url.authority(), "[::1]:80");
        assert_eq!(PurgeUrl::parse("http://localhost:1/").unwrap().path, "/");
        let edge = format!("http://h:1/{}", "a".repeat(MAX_URL_BYTES - 11));
        assert_eq!(edge.len(), MAX_URL_BYTES);
        assert!(PurgeUrl::parse(&edge).is_ok());
        assert!(PurgeUrl::parse(&format!("{edge}a")).is_err());
    }

    #[test]
    fn bad_urls_are_refused_with_the_reason() {
        for (url, why) in [
            ("https://127.0.0.1:443/p", "only http://"),
            ("127.0.0.1:80/p", "only http://"),
            ("http://127.0.0.1:80", "no path"),
            ("http://127.0.0.1/p", "no host:port"),
            ("http://:80/p", "no host:port"),
            ("http://h:0/p", "not 1 to 65535"),
            ("http://h:65536/p", "not 1 to 65535"),
            ("http://h:x/p", "not 1 to 65535"),
            ("http://u:p@h:80/p", "user info"),
            ("http://h_x:80/p", "not a host name"),
            ("http://[zz]:80/p", "not a host name"),
            ("http://h:80/p#f", "fragment"),
            ("http://h:80/a b", "not allowed"),
            ("http://h:80/\n", "not allowed"),
        ] {
            let error = PurgeUrl::parse(url).unwrap_err();
            assert!(error.contains(why), "{url}: {error}");
            assert!(error.contains("http://HOST:PORT/PATH"), "{error}");
        }
    }

    #[test]
    fn the_repeat_delay_is_bounded() {
        let mut config = PurgeConfig::new("http://127.0.0.1:1/p").unwrap();
        assert_eq!(config.repeat_after, Duration::from_secs(1));
        assert!(config.validate().is_ok());
        config.repeat_after = MAX_PURGE_REPEAT_AFTER;
        assert!(config.validate().is_ok());
        config.repeat_after = MAX_PURGE_REPEAT_AFTER + Duration::from_millis(1);
        assert!(config.validate().is_err());
        assert!(config.repeats());
        // 0 turns the repeat off (the smallest value, accepted).
        config.repeat_after = Duration::ZERO;
        assert!(config.validate().is_ok());
        assert!(!config.repeats());
        config.repeat_after = Duration::from_millis(1);
        assert!(config.validate().is_ok() && config.repeats());
    }

    #[test]
    fn the_flags_are_off_by_default_and_checked() {
        use clap::Parser;
        let parse = |args: &[&str]| {
            let mut argv = vec!["dw-agent", "--endpoints", "127.0.0.1:2379"];
            argv.extend_from_slice(args);
            crate::config::Cli::try_parse_from(argv)
                .map_err(|e| e.to_string())
                .and_then(|cli| cli.into_config().map_err(|e| e.to_string()))
        };
        assert_eq!(parse(&[]).unwrap().purge, None);
        assert_eq!(parse(&["--purge-url", "off"]).unwrap().purge, None);
        let purge = parse(&[
            "--purge-url",
            "http://127.0.0.1:8088/p",
            "--purge-repeat-after",
            "250ms",
        ])
        .unwrap()
        .purge
        .unwrap();
        assert_eq!(purge.url.port, 8088);
        assert_eq!(purge.repeat_after, Duration::from_millis(250));
        let error = parse(&["--purge-url", "https://x:1/p"]).unwrap_err();
        assert!(error.contains("only http://"), "{error}");
        let off = parse(&["--purge-url", "http://x:1/p", "--purge-repeat-after", "0"])
            .unwrap()
            .purge
            .unwrap();
        assert!(!off.repeats());
        let error =
            parse(&["--purge-url", "http://x:1/p", "--purge-repeat-after", "61s"]).unwrap_err();
        assert!(error.contains("--purge-repeat-after"), "{error}");
    }
}
