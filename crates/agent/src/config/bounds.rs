//! The bounds of the agent's flags and of its metrics port, in one place: each is checked
//! where the flag is read ([`crate::config::Config::validate`]) or where the port serves,
//! and tested at its edge.

use std::time::Duration;

/// The longest window `--coalesce-window` accepts: a longer one would delay the second
/// change of a burst (a drain following a drain) noticeably.
pub(crate) const MAX_COALESCE_WINDOW: Duration = Duration::from_secs(10);

/// The default `--heartbeat-interval`.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// The longest `--heartbeat-interval` (checked at start).
pub const MAX_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(60);

/// Connections the metrics port holds at once when `--metrics-max-connections` is not given.
pub const DEFAULT_METRICS_MAX_CONNECTIONS: usize = 64;
/// The longest request head the metrics port reads (hyper's smallest buffer); a longer
/// one is answered 431.
pub(crate) const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a metrics client has to send its request head and read the answer.
pub(crate) const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a metrics client has to send its whole request head.
pub(crate) const HEAD_TIMEOUT: Duration = Duration::from_secs(2);
