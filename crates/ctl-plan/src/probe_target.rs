//! Where a health probe goes (`--probe origin=URL`, `health`'s probes): the URL parsed,
//! no I/O (the probe itself is dwctl's `ops::probe`).

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
        // Messages show the URL without a password or token in it.
        let shown = dw_routing::redact_url(url);
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("`{shown}`: only http:// URLs can be probed"))?;
        let (authority, path) = match rest.find('/') {
            Some(slash) => (&rest[..slash], &rest[slash..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let (host, after) = bracketed
                .split_once(']')
                .ok_or_else(|| format!("`{shown}`: unclosed `[` in the host"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("`{shown}`: no host"));
        }
        let port = match port {
            Some(port) => port
                .parse::<u16>()
                .map_err(|_| format!("`{shown}`: bad port `{port}`"))?,
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
