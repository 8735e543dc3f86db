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
/// How long one write of an answer may wait for the metrics client to read: then the
/// connection is closed (and the render it held freed).
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// A metrics connection whose answer has been written this long without being taken is
/// slow: at the connection cap it is evicted like an idle one. A reader on this node takes
/// the largest render (8 MiB) in a few milliseconds, and a remote scraper's own address
/// holds one connection, so the flood's address is evicted first.
pub(crate) const SLOW_AFTER: Duration = Duration::from_millis(50);
/// `GET /healthz` requests answered at once outside the connection cap (each a line, made
/// from state in memory, written in one go); past them one goes through the cap.
pub(crate) const HEALTH_CONNECTIONS: usize = 16;
/// The most bytes of one `/metrics` render: past it the series left (the answer counters,
/// which come last) are cut at a line's end, and `dw_agent_metrics_render_cuts_total`
/// counts it. A maximal counter file of hostile values renders about 6.6 MB.
pub(crate) const MAX_RENDER_BYTES: usize = 8 * 1024 * 1024;
/// The most renders of `/metrics` held in memory at once (being written to clients);
/// with all of them held, a scrape is answered with the newest one again. So renders cost
/// at most `RENDERS_HELD` x [`MAX_RENDER_BYTES`] (32 MiB), plus the one being made.
pub(crate) const RENDERS_HELD: usize = 4;
