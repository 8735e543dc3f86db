<?php

declare(strict_types=1);

/*
 * A node's health for the load balancer (docs/deploy-litespeed.md, "A health check for the
 * load balancer"): 200 when this PHP has a routing table and the node's dw-agent says the
 * node is current, 503 otherwise; a small JSON body says why either way, and in
 * agent.purge_failing_since since when the agent's cache purges fail (null: they land, or
 * an older agent that does not say). It fails closed: 503 is set first, 200 last.
 *
 *   503 "no routing table"        the router has no table (revision 0: no snapshot yet, or
 *                                 none it would take; it serves the fail-open route)
 *   503 "no heartbeat file"       <snapshot>.heartbeat is missing
 *   503 "heartbeat file ..."      it is refused (php/TrustedFile.php, docs/snapshot-trust.md
 *                                 rules 1-5: a symlink or not a regular file, writable by
 *                                 group or others, an untrusted owner, a directory on the
 *                                 way from / others could write; over 4096 bytes), or it is
 *                                 not the agent's JSON
 *   503 "heartbeat is N s old"    the agent stopped writing it (stopped, hung): older than
 *                                 DW_STATUS_MAX_AGE seconds (default three of its interval)
 *   503 "agent: ..."              the agent says the node is not current (no etcd session,
 *                                 a silent watch, a failed write, ...: its /healthz reason)
 *   503 "purges failing since T"  only with ?require=cache: the heartbeat's
 *                                 purge_failing_since is set (every purge of the page cache
 *                                 failed since T: cached pages may name a drained origin
 *                                 until their TTL). An older agent's heartbeat has no such
 *                                 member: it is read as not failing.
 *   200 "ok"
 *
 * The heartbeat is written by dw-agent every --heartbeat-interval (default 5 s) beside the
 * snapshot (docs/agent.md, "The heartbeat file"): a quiet fleet writes no snapshot for
 * hours, so the snapshot's age says nothing. Works with the extension and with the
 * userland twin (it needs only bootstrap.php and TrustedFile.php). Server variables the
 * web server may set:
 *   DW_SNAPSHOT_PATH   as in front.php: a snapshot path other than the ini's
 *   DW_STATUS_MAX_AGE  seconds (1 to 3600) a heartbeat may be old; default 3 × its interval
 *   DW_TRUSTED_OWNER   whose heartbeat is trusted where ini dw_router.trusted_owner is not
 *                      set (the twin): a user name or uid; unset: the directory's owner
 */

// Fail closed: 503 from the first line, 200 only as the last act before the body goes out,
// so any error of this script's own (a missing function, an exception, a fatal error
// printed under display_errors) answers 503.
http_response_code(503);

if (!class_exists('RegionRouter', false)) {
    require_once __DIR__ . '/bootstrap.php';
}

require_once __DIR__ . '/TrustedFile.php';

/**
 * The heartbeat beside $snapshot, decoded, if php/TrustedFile.php trusts it (rules 1-5 of
 * docs/snapshot-trust.md; the trusted owner as for purge.php: ini
 * dw_router.trusted_owner, else server var DW_TRUSTED_OWNER, else the directory's owner)
 * and it is the agent's JSON in at most 4096 bytes. Otherwise why not.
 *
 * @return array{time: int, state: string, revision: int, interval: float, reason: string, purge_failing_since: ?int}|string
 */
$heartbeat = static function (string $snapshot, array $server): array|string {
    $read = \DwRouter\TrustedFile::read('heartbeat file', $snapshot . '.heartbeat', 4096,
        \DwRouter\TrustedFile::owner($server));
    if (\is_string($read)) {
        return $read;
    }
    $raw = $read['bytes'];
    $beat = json_decode($raw, true);
    if (!\is_array($beat) || !\is_int($beat['time'] ?? null) || !\is_string($beat['state'] ?? null)
        || !\is_int($beat['revision'] ?? null)) {
        return 'heartbeat file is not the agent\'s JSON';
    }
    $interval = $beat['interval'] ?? 5;
    $purgeFailing = $beat['purge_failing_since'] ?? null;

    return ['time' => $beat['time'], 'state' => $beat['state'], 'revision' => $beat['revision'],
        'interval' => \is_int($interval) || \is_float($interval) ? (float) $interval : 5.0,
        'reason' => \is_string($beat['reason'] ?? null) ? $beat['reason'] : '',
        'purge_failing_since' => \is_int($purgeFailing) && $purgeFailing > 0 ? $purgeFailing : null];
};

$server = $_SERVER;
// ?require=cache: also 503 while the agent's purges fail (opt-in; routing health is the same)
$requireCache = ($_GET['require'] ?? null) === 'cache';
$path = $server['DW_SNAPSHOT_PATH'] ?? '';
$router = \is_string($path) && $path !== '' ? new RegionRouter($path) : new RegionRouter();
$stats = $router->stats();
$revision = $router->revision();
$now = time();
$beat = $heartbeat((string) $stats['path'], $server);
$agent = null;
if ($revision === 0) {
    $reason = 'no routing table';
} elseif (\is_string($beat)) {
    $reason = $beat;
} else {
    // (no filter_var(): the minimal lsphp has no ext/filter; digits without a sign or a
    // leading zero, as FILTER_VALIDATE_INT took them, bar its surrounding white space)
    $maxAge = $server['DW_STATUS_MAX_AGE'] ?? null;
    $maxAge = \is_string($maxAge) && preg_match('/^[1-9][0-9]{0,3}\z/', $maxAge) === 1 && (int) $maxAge <= 3600
        ? (int) $maxAge : (int) ceil(3 * max(1.0, min(60.0, $beat['interval'])));
    $age = $now - $beat['time'];
    $agent = ['state' => $beat['state'], 'revision' => $beat['revision'], 'age_seconds' => $age,
        'purge_failing_since' => $beat['purge_failing_since']];
    if (abs($age) > $maxAge) {
        $reason = "heartbeat is $age s old (at most $maxAge)";
    } elseif ($beat['state'] !== 'current') {
        $reason = 'agent: ' . $beat['state'] . ($beat['reason'] !== '' ? ': ' . $beat['reason'] : '');
    } elseif ($requireCache && $beat['purge_failing_since'] !== null) {
        $reason = 'purges failing since ' . gmdate('Y-m-d\TH:i:s\Z', $beat['purge_failing_since'])
            . ' (' . ($now - $beat['purge_failing_since']) . ' s): cached pages may be stale';
    } else {
        $reason = 'ok';
    }
}

$body = json_encode([
    'status' => $reason === 'ok' ? 'ok' : 'unavailable',
    'reason' => $reason,
    'revision' => $revision,
    'agent' => $agent,
    'loads' => $stats['loads'],
    'failed_loads' => $stats['failed_loads'],
    'last_error' => $stats['last_error'],
    'reload_mechanism' => $stats['reload_mechanism'],
], JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE);
header('Content-Type: application/json');
header('Cache-Control: no-store');
if ($reason === 'ok' && \is_string($body)) {
    http_response_code(200); // the last act before the body: nothing of ours can fail after it
}
echo $body === false ? '{"status":"unavailable","reason":"cannot encode the status"}' : $body, "\n";
