//! The agent's one error type: why it could not start, and why a session with etcd ended.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Everything that can go wrong in the agent.
///
/// The startup variants (`Config`, `SnapshotDir`, `MetricsListener`) end `run`: they are
/// operator mistakes that retrying cannot fix. The session variants end one connection to
/// etcd; the agent backs off, re-lists and re-watches, and they only show up in logs and in
/// `dw_agent_watch_restarts_total{cause}`.
#[derive(Debug)]
pub enum Error {
    /// A flag or a file it names is unusable (endpoints, TLS material, durations).
    Config(String),
    /// The snapshot's directory cannot hold the snapshot (missing, not writable).
    SnapshotDir {
        /// The directory of `--snapshot`.
        dir: PathBuf,
        /// What the probe write (or the lock file) failed with.
        source: io::Error,
    },
    /// The metrics address cannot be bound.
    MetricsListener {
        /// `--metrics-addr` as given.
        addr: String,
        /// What binding it failed with.
        source: io::Error,
    },
    /// Another agent holds the snapshot's lock: it publishes this path already.
    Locked {
        /// The lock file, `.<name>.lock` next to the snapshot.
        lock: PathBuf,
        /// The pid the holder wrote into the lock file, when it could be read.
        holder: Option<u32>,
    },
    /// Connecting to an endpoint failed or timed out.
    Connect {
        /// The endpoint of the session.
        endpoint: String,
        /// etcd's or the transport's words.
        message: String,
    },
    /// Listing the prefix failed or timed out.
    List {
        /// The endpoint of the session.
        endpoint: String,
        /// etcd's or the transport's words.
        message: String,
    },
    /// The revision the agent needs was compacted away.
    Compacted {
        /// The endpoint of the session.
        endpoint: String,
        /// The oldest revision etcd still keeps; the agent re-lists.
        compact_revision: i64,
    },
    /// The member has no leader (require-leader).
    NoLeader {
        /// The endpoint of the session.
        endpoint: String,
        /// etcd's words.
        message: String,
    },
    /// The watch failed, was canceled by the server, or ended.
    Watch {
        /// The endpoint of the session.
        endpoint: String,
        /// etcd's or the transport's words.
        message: String,
    },
    /// The watch was silent (no events, no answer to progress requests) and a read of the
    /// prefix failed or showed changes the watch had not delivered.
    Stalled {
        /// The endpoint of the session.
        endpoint: String,
        /// How long the watch had been silent, in milliseconds.
        silent_for_ms: u128,
        /// What the read found.
        why: String,
    },
}

impl Error {
    /// A short, stable label for the `cause` of `dw_agent_watch_restarts_total`.
    pub fn cause(&self) -> &'static str {
        match self {
            Error::Config(_)
            | Error::SnapshotDir { .. }
            | Error::MetricsListener { .. }
            | Error::Locked { .. } => "startup",
            Error::Connect { .. } => "connect",
            Error::List { .. } => "list",
            Error::Compacted { .. } => "compacted",
            Error::NoLeader { .. } => "no_leader",
            Error::Watch { .. } => "watch",
            Error::Stalled { .. } => "stalled",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Config(message) => write!(f, "invalid configuration: {message}"),
            Error::SnapshotDir { dir, source } => {
                write!(
                    f,
                    "snapshot directory {} cannot hold the snapshot: {source}",
                    dir.display()
                )?;
                if source.kind() == io::ErrorKind::NotFound {
                    // Without systemd nothing makes it (dw-agent.service's
                    // RuntimeDirectory= and tmpfiles.d do), and /run is empty after a boot.
                    write!(
                        f,
                        "; create it as root: install -d -o dw-agent -g dw-agent -m 0755 {} \
                         (or systemd-tmpfiles --create dw-agent.conf; /run is emptied at \
                         every boot)",
                        dir.display()
                    )?;
                }
                Ok(())
            }
            Error::MetricsListener { addr, source } => {
                write!(f, "cannot listen for metrics on {addr}: {source}")
            }
            Error::Locked { lock, holder } => {
                write!(f, "another dw-agent ")?;
                if let Some(pid) = holder {
                    write!(f, "(pid {pid}) ")?;
                }
                write!(
                    f,
                    "already publishes this snapshot: it holds the lock {}",
                    lock.display()
                )
            }
            Error::Connect { endpoint, message } => {
                write!(f, "cannot connect to etcd at {endpoint}: {message}")
            }
            Error::List { endpoint, message } => {
                write!(f, "listing the prefix at {endpoint} failed: {message}")
            }
            Error::Compacted {
                endpoint,
                compact_revision,
            } => write!(
                f,
                "watch at {endpoint} fell behind compaction (compacted up to revision \
                 {compact_revision}); re-listing"
            ),
            Error::NoLeader { endpoint, message } => {
                write!(f, "etcd member {endpoint} has no leader: {message}")
            }
            Error::Watch { endpoint, message } => write!(f, "watch at {endpoint} ended: {message}"),
            Error::Stalled {
                endpoint,
                silent_for_ms,
                why,
            } => write!(
                f,
                "watch at {endpoint} stalled: silent for {silent_for_ms} ms and {why}"
            ),
        }
    }
}

/// No variant names a source: each one's message already ends with its cause, and a
/// chain printed in full (`{:#}`, as the binary prints its start-up error) would say it
/// twice ("No such file or directory (os error 2): No such file or directory (os error 2)").
impl std::error::Error for Error {}

impl From<dw_etcd::Error> for Error {
    fn from(error: dw_etcd::Error) -> Self {
        match error.endpoint() {
            Some(endpoint) => Error::Connect {
                endpoint: endpoint.to_owned(),
                message: error.detail(),
            },
            None => Error::Config(error.detail()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A missing snapshot directory (a start without systemd, which makes it) says how to
    /// create it; another failure does not.
    #[test]
    fn a_missing_snapshot_directory_says_how_to_create_it() {
        let missing = Error::SnapshotDir {
            dir: PathBuf::from("/run/dw-router"),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        let text = missing.to_string();
        assert!(
            text.starts_with("snapshot directory /run/dw-router cannot hold the snapshot: "),
            "{text}"
        );
        assert!(
            text.contains(
                "; create it as root: install -d -o dw-agent -g dw-agent -m 0755 /run/dw-router "
            ),
            "{text}"
        );
        let denied = Error::SnapshotDir {
            dir: PathBuf::from("/run/dw-router"),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(!denied.to_string().contains("create it"), "{denied}");
    }
}
