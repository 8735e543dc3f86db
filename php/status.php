<?php

declare(strict_types=1);

/*
 * A node's health for the load balancer (docs/deploy-litespeed.md, "A health check for the
 * load balancer"): 200 when this PHP has a routing table and the node's dw-agent says the
 * node is current, 503 otherwise; a small JSON body says why either way.
 *
 *   503 "no routing table"        the router has no table (revision 0: no snapshot yet, or
 *                                 none it would take; it serves the fail-open route)
 *   503 "no heartbeat ..."        <snapshot>.heartbeat is missing, unreadable, or not
 *                                 trusted: not a regular file, a symlink, writable by group
 *                                 or others, not owned by the snapshot's owner, over 4096
 *                                 bytes, or not the agent's JSON
 *   503 "heartbeat is N s old"    the agent stopped writing it (stopped, hung): older than
 *                                 DW_STATUS_MAX_AGE seconds (default three of its interval)
 *   503 "agent: ..."              the agent says the node is not current (no etcd session,
 *                                 a silent watch, a failed write, ...: its /healthz reason)
 *   200 "ok"
 *
 * The heartbeat is written by dw-agent every --heartbeat-interval (default 5 s) beside the
 * snapshot (docs/agent.md, "The heartbeat file"): a quiet fleet writes no snapshot for
 * hours, so the snapshot's age says nothing. Works with the extension and with the
 * userland twin (bootstrap.php). Server variables the web server may set:
 *   DW_SNAPSHOT_PATH   as in front.php: a snapshot path other than the ini's
 *   DW_STATUS_MAX_AGE  seconds (1 to 3600) a heartbeat may be old; default 3 × its interval
 */

if (!class_exists('RegionRouter', false)) {
    require_once __DIR__ . '/bootstrap.php';
}

/**
 * The heartbeat beside $snapshot, decoded, if it is trusted: a regular file (not a
 * symlink), not writable by group or others, owned by the snapshot's owner, the same file
 * when opened as when looked at. Otherwise why not.
 *
 * @return array{time: int, state: string, revision: int, interval: float, reason: string}|string
 */
$heartbeat = static function (string $snapshot): array|string {
    $maxBytes = 4096; // the most bytes of a heartbeat read
    $path = $snapshot . '.heartbeat';
    clearstatcache(true, $path);
    clearstatcache(true, $snapshot);
    $link = @lstat($path);
    if ($link === false) {
        return 'no heartbeat file';
    }
    if (($link['mode'] & 0170000) !== 0100000) {
        return 'no heartbeat: not a regular file (a symlink is not followed)';
    }
    if (($link['mode'] & 0022) !== 0) {
        return 'no heartbeat: writable by group or others';
    }
    $owner = @lstat($snapshot);
    if ($owner === false || $link['uid'] !== $owner['uid']) {
        return 'no heartbeat: not owned by the snapshot\'s owner';
    }
    $handle = @fopen($path, 'rb');
    if ($handle === false) {
        return 'no heartbeat: unreadable';
    }
    $opened = @fstat($handle);
    $raw = @stream_get_contents($handle, $maxBytes + 1);
    fclose($handle);
    // Replaced between the look and the open (a rename, or a symlink swapped in): untrusted.
    if ($opened === false || $opened['ino'] !== $link['ino'] || $opened['dev'] !== $link['dev']) {
        return 'no heartbeat: replaced while read';
    }
    if (!\is_string($raw) || \strlen($raw) > $maxBytes) {
        return 'no heartbeat: unreadable or too large';
    }
    $beat = json_decode($raw, true);
    if (!\is_array($beat) || !\is_int($beat['time'] ?? null) || !\is_string($beat['state'] ?? null)
        || !\is_int($beat['revision'] ?? null)) {
        return 'no heartbeat: not the agent\'s JSON';
    }
    $interval = $beat['interval'] ?? 5;

    return ['time' => $beat['time'], 'state' => $beat['state'], 'revision' => $beat['revision'],
        'interval' => \is_int($interval) || \is_float($interval) ? (float) $interval : 5.0,
        'reason' => \is_string($beat['reason'] ?? null) ? $beat['reason'] : ''];
};

$server = $_SERVER;
$path = $server['DW_SNAPSHOT_PATH'] ?? '';
$router = \is_string($path) && $path !== '' ? new RegionRouter($path) : new RegionRouter();
$stats = $router->stats();
$revision = $router->revision();
$now = time();
$beat = $heartbeat((string) $stats['path']);
$agent = null;
if ($revision === 0) {
    $reason = 'no routing table';
} elseif (\is_string($beat)) {
    $reason = $beat;
} else {
    $maxAge = filter_var($server['DW_STATUS_MAX_AGE'] ?? null, FILTER_VALIDATE_INT,
        ['options' => ['min_range' => 1, 'max_range' => 3600]]);
    $maxAge = \is_int($maxAge) ? $maxAge : (int) ceil(3 * max(1.0, min(60.0, $beat['interval'])));
    $age = $now - $beat['time'];
    $agent = ['state' => $beat['state'], 'revision' => $beat['revision'], 'age_seconds' => $age];
    if (abs($age) > $maxAge) {
        $reason = "heartbeat is $age s old (at most $maxAge)";
    } elseif ($beat['state'] !== 'current') {
        $reason = 'agent: ' . $beat['state'] . ($beat['reason'] !== '' ? ': ' . $beat['reason'] : '');
    } else {
        $reason = 'ok';
    }
}

http_response_code($reason === 'ok' ? 200 : 503);
if (!headers_sent()) {
    header('Content-Type: application/json');
    header('Cache-Control: no-store');
}
echo json_encode([
    'status' => $reason === 'ok' ? 'ok' : 'unavailable',
    'reason' => $reason,
    'revision' => $revision,
    'agent' => $agent,
    'loads' => $stats['loads'],
    'failed_loads' => $stats['failed_loads'],
    'last_error' => $stats['last_error'],
    'reload_mechanism' => $stats['reload_mechanism'],
], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), "\n";
