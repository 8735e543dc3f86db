//! The type and help text of each single-valued metric `/metrics` serves.

/// The metrics with one value each, as `name type help`, one a line: a table rather than
/// a call per metric, so that each one's text is written once.
pub(crate) const SINGLE_VALUED: &str = "\
dw_agent_published_revision gauge etcd revision of the published snapshot file (-1 when there is none).
dw_agent_mirror_revision gauge etcd revision the agent's in-memory state reflects.
dw_agent_keys gauge Keys under the prefix in the in-memory state.
dw_agent_unrepresentable_keys gauge Keys under the prefix left out because the key or value is not UTF-8.
dw_agent_snapshot_writes_total counter Snapshot files published (renamed into place).
dw_agent_snapshot_write_errors_total counter Failed attempts to publish the snapshot file.
dw_agent_reconnects_total counter Sessions with etcd that ended and were retried.
dw_agent_stale_events_total counter Watch events at or below the state's revision, skipped.
dw_agent_silent_watch_checks_total counter Reads of the prefix that showed a silent watch had missed nothing (behind etcd grpc-proxy, which ignores progress requests).
dw_agent_untrusted_snapshot_replaced_total counter Files at the snapshot path the agent did not trust (not its own, a symlink or FIFO, another etcd cluster's, a revision beyond etcd's), replaced.
dw_agent_metrics_connections_evicted_total counter Idle connections to the metrics port closed to make room (--metrics-max-connections reached).
dw_agent_metrics_connections_refused_total counter Connections to the metrics port closed at once: every slot was answering.
dw_agent_coalesced_changes_total counter Watch responses with changes that waited for the end of --coalesce-window and were published together with later ones.
dw_agent_report_writes_total counter Node reports written to etcd.
dw_agent_report_failures_total counter Node report writes (or their leases) that etcd refused or did not answer.
dw_agent_report_heals_total counter Node reports written again because someone else deleted or overwrote them.
dw_agent_report_conflicts_total counter Writes of this node's report by another agent instance (two agents with one node id).
dw_agent_purge_requests_total counter Requests to --purge-url (first sendings, repeats and retries).
dw_agent_purge_failures_total counter Requests to --purge-url that did not land (connect error, timeout, an answer other than 200); each is retried.
dw_agent_report_conflict gauge 1 while another agent instance writes this node's report (/healthz is 503).
dw_agent_last_event_to_rename_seconds gauge Last publication: from the watch response's arrival to the rename (etcd does not record commit times).
dw_agent_seconds_since_last_event gauge Seconds since etcd last delivered state (a list or watch events); since start if never.
dw_agent_seconds_since_last_response gauge Seconds since the watch last answered (events or progress); since start if never.
dw_agent_connected gauge 1 while a session with etcd is up (listing or watching).
dw_agent_healthy gauge 1 when /healthz answers 200 (connected, current, publishing).";

/// The type and help of a metric in [`SINGLE_VALUED`].
pub(crate) fn single_valued_help(name: &str) -> (&'static str, &'static str) {
    SINGLE_VALUED
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.split_once(' '))
        .unwrap_or(("untyped", ""))
}
