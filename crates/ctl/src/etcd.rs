//! Connecting to etcd, and where dwctl's keys live.

use std::path::PathBuf;
use std::time::Duration;

use etcd_client::{Certificate, Client, ConnectOptions, Identity, TlsOptions};

use crate::error::Error;

/// The default home of dwctl's own records (drains, registered origins): outside the
/// agents' prefix, so that no edge node mirrors them.
pub const DEFAULT_CONTROL_PREFIX: &str = "/dw/control/";

/// Where the agents report (`<nodes>/<id>`, and the last-seen records next to it).
pub const DEFAULT_NODES_PREFIX: &str = "/dw/nodes/";

/// How to reach etcd.
/// How long a member may take to answer the status request that picks it.
const MEMBER_PROBE_TIMEOUT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone)]
pub struct EtcdConfig {
    pub endpoints: Vec<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    pub cacert: Option<PathBuf>,
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    /// Deadline of each request (watches and keep-alive streams excepted).
    pub timeout: Duration,
}

impl EtcdConfig {
    /// Plain-HTTP endpoints with no authentication (tests, local runs).
    pub fn plain(endpoints: Vec<String>) -> EtcdConfig {
        EtcdConfig {
            endpoints,
            user: None,
            password: None,
            cacert: None,
            cert: None,
            key: None,
            timeout: Duration::from_secs(5),
        }
    }

    /// A client. Watches require a leader, so that a member cut off from the quorum ends
    /// the watch instead of leaving it silently stale.
    ///
    /// With several endpoints the client talks to one member that answers and knows a
    /// leader, tried from a random one on: a channel balanced over every endpoint kept
    /// sending requests to a member that was down or cut off (the chaos soak saw about
    /// half of the writes fail with "tcp connect error" while one of three members was
    /// down). With one endpoint the connection is lazy, as before: an unreachable cluster
    /// shows up as the first request's error.
    pub async fn connect(&self) -> Result<Client, Error> {
        let options = self.options()?;
        if self.endpoints.len() <= 1 {
            return Ok(Client::connect(self.endpoints.clone(), Some(options)).await?);
        }
        let count = self.endpoints.len();
        let start = fastrand::usize(..count);
        let mut last_error = None;
        for i in 0..count {
            let endpoint = &self.endpoints[(start + i) % count];
            let mut client = match Client::connect([endpoint.as_str()], Some(options.clone())).await
            {
                Ok(client) => client,
                Err(error) => {
                    last_error = Some(error);
                    continue;
                }
            };
            match tokio::time::timeout(MEMBER_PROBE_TIMEOUT, client.status()).await {
                Ok(Ok(status)) if status.leader() != 0 => return Ok(client),
                Ok(Ok(_)) => {
                    last_error = Some(etcd_client::Error::InvalidArgs(format!(
                        "{endpoint} knows no leader"
                    )))
                }
                Ok(Err(error)) => last_error = Some(error),
                Err(_) => {
                    last_error = Some(etcd_client::Error::InvalidArgs(format!(
                        "{endpoint} did not answer within {MEMBER_PROBE_TIMEOUT:?}"
                    )))
                }
            }
        }
        Err(match last_error {
            Some(error) => Error::Etcd(error),
            None => Error::Failed("no etcd endpoint".into()),
        })
    }

    fn options(&self) -> Result<ConnectOptions, Error> {
        let mut options = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(3))
            .with_timeout(self.timeout)
            .with_keep_alive(Duration::from_secs(5), Duration::from_secs(5))
            .with_require_leader(true);
        match (&self.user, &self.password) {
            (Some(user), Some(password)) => options = options.with_user(user, password),
            (None, None) => {}
            _ => return Err(Error::Usage("--user and --password go together".into())),
        }
        if self.cacert.is_some() || self.cert.is_some() || self.key.is_some() {
            options = options.with_tls(self.tls()?);
        }
        Ok(options)
    }

    fn tls(&self) -> Result<TlsOptions, Error> {
        let mut tls = TlsOptions::new();
        if let Some(path) = &self.cacert {
            tls = tls.ca_certificate(Certificate::from_pem(read(path)?));
        }
        match (&self.cert, &self.key) {
            (Some(cert), Some(key)) => {
                tls = tls.identity(Identity::from_pem(read(cert)?, read(key)?));
            }
            (None, None) => {}
            _ => return Err(Error::Usage("--cert and --key go together".into())),
        }
        Ok(tls)
    }
}

fn read(path: &PathBuf) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })
}

/// The key layout: the agents' prefix (regions, policy, origins) and dwctl's control
/// prefix (drain records, registered origins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub prefix: String,
    pub control: String,
    /// Node reports (`/dw/nodes/`), outside `prefix`.
    pub nodes: String,
}

impl Layout {
    /// Both prefixes, each ending in exactly one `/`.
    pub fn new(prefix: &str, control: &str) -> Result<Layout, Error> {
        let normalise = |flag: &str, value: &str| {
            if value.is_empty() {
                return Err(Error::Usage(format!("{flag} must not be empty")));
            }
            Ok(format!("{}/", value.trim_end_matches('/')))
        };
        let layout = Layout {
            prefix: normalise("--prefix", prefix)?,
            control: normalise("--control-prefix", control)?,
            nodes: DEFAULT_NODES_PREFIX.to_owned(),
        };
        if layout.prefix.starts_with(&layout.control) || layout.control.starts_with(&layout.prefix)
        {
            return Err(Error::Usage(
                "--control-prefix must lie outside --prefix, or every agent would mirror dwctl's records".into(),
            ));
        }
        Ok(layout)
    }

    /// The same layout with node reports under `nodes`, which must lie outside the prefix.
    pub fn with_nodes(mut self, nodes: &str) -> Result<Layout, Error> {
        if nodes.is_empty() {
            return Err(Error::Usage("--nodes-prefix must not be empty".into()));
        }
        let nodes = format!("{}/", nodes.trim_end_matches('/'));
        if nodes.starts_with(&self.prefix) || self.prefix.starts_with(&nodes) {
            return Err(Error::Usage(
                "--nodes-prefix must lie outside --prefix".into(),
            ));
        }
        self.nodes = nodes;
        Ok(self)
    }

    pub fn regions(&self) -> String {
        format!("{}region/", self.prefix)
    }
    pub fn region(&self, geo: &str) -> String {
        format!("{}region/{geo}", self.prefix)
    }
    pub fn policy(&self) -> String {
        format!("{}policy/global", self.prefix)
    }
    pub fn origins(&self) -> String {
        format!("{}origin/", self.prefix)
    }
    pub fn origin(&self, id: &str) -> String {
        format!("{}origin/{id}", self.prefix)
    }
    pub fn drains(&self) -> String {
        format!("{}drains/", self.control)
    }
    pub fn drain(&self, origin: &str) -> String {
        format!("{}drains/{origin}", self.control)
    }
    pub fn registrations(&self) -> String {
        format!("{}registered/", self.control)
    }
    pub fn registration(&self, origin: &str) -> String {
        format!("{}registered/{origin}", self.control)
    }

    /// A key named on the command line: absolute when it starts with `/`, otherwise
    /// relative to the prefix (`region/DE`).
    pub fn resolve(&self, key: &str) -> String {
        if key.starts_with('/') {
            key.to_string()
        } else {
            format!("{}{key}", self.prefix)
        }
    }
}

/// `key` without `prefix`, when it is valid UTF-8 and starts with it.
pub fn strip<'a>(key: &'a [u8], prefix: &str) -> Option<&'a str> {
    std::str::from_utf8(key).ok()?.strip_prefix(prefix)
}
