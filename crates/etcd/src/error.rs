//! The crate's one error type.

use std::error::Error as _;
use std::fmt;
use std::time::Duration;

/// Why connection options are unusable, or why connecting failed.
#[derive(Debug)]
pub enum Error {
    /// The flags are inconsistent (a `--user` without a password, a zero timeout, an
    /// https endpoint without `--cacert`): an operator mistake that retrying cannot fix.
    Usage(String),
    /// A file a flag names cannot be read or does not hold what it should (`--cacert`,
    /// `--cert`, `--key`, `--password-file`).
    File {
        /// The flag that names the file.
        flag: &'static str,
        /// What is wrong, with the file's path.
        message: String,
    },
    /// etcd refused, or the endpoint could not be reached.
    Etcd {
        /// The endpoint (the last one tried, when there were several).
        endpoint: String,
        /// What the client said.
        source: etcd_client::Error,
    },
    /// The endpoint did not answer in time.
    Timeout {
        /// The endpoint.
        endpoint: String,
        /// How long it was given.
        after: Duration,
    },
    /// The member answered but knows no leader (it is cut off from the quorum).
    NoLeader {
        /// The endpoint.
        endpoint: String,
    },
}

impl Error {
    /// The endpoint a connection error is about.
    pub fn endpoint(&self) -> Option<&str> {
        match self {
            Error::Etcd { endpoint, .. }
            | Error::Timeout { endpoint, .. }
            | Error::NoLeader { endpoint } => Some(endpoint),
            Error::Usage(_) | Error::File { .. } => None,
        }
    }

    /// The message without the endpoint: a client error with its causes, or what timed out.
    pub fn detail(&self) -> String {
        match self {
            Error::Usage(message) | Error::File { message, .. } => message.clone(),
            Error::Etcd { source, .. } => describe(source),
            Error::Timeout { after, .. } => format!("no answer within {} ms", after.as_millis()),
            Error::NoLeader { .. } => "the member knows no leader".into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Usage(_) | Error::File { .. } => f.write_str(&self.detail()),
            Error::Etcd { endpoint, .. }
            | Error::Timeout { endpoint, .. }
            | Error::NoLeader { endpoint } => {
                write!(f, "{}: {}", dw_routing::redact_url(endpoint), self.detail())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Etcd { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// An etcd-client error with its whole source chain: the top-level message of a transport
/// error is just "transport error", the useful part ("connection refused") is underneath.
pub fn describe(error: &etcd_client::Error) -> String {
    let (mut text, mut source) = match error {
        etcd_client::Error::GRpcStatus(status) => (
            format!("{:?}: {}", status.code(), status.message()),
            status.source(),
        ),
        etcd_client::Error::TransportError(e) => (e.to_string(), e.source()),
        other => (other.to_string(), None),
    };
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
