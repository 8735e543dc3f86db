<?php
// bench/23-cache.sh, part 2: from a routing commit to the purge landing in LSCache.
// For each of N changes: the cached page of GEO is made a hit, then `dwctl region set GEO`
// commits one of two values in turn (the region's origin weights swapped), and the page is
// polled every INTERVAL ms (bounded by BOUND ms) on the cached server and, beside it, on the
// uncached one: the first cached answer that is a miss made at the commit's revision is the
// purge landing; the first uncached answer at that revision is the routing landing. Then it
// waits until the agent's repeat purge (REPEAT ms after the first) has passed, so that each
// change starts from a page cached at the previous revision.
// One JSON line per change on stdout; a line of progress per change on stderr.
//
// Usage: php purge-latency.php DWCTL ETCD CACHED_PORT PLAIN_PORT GEO VALUE_A VALUE_B N INTERVAL_MS BOUND_MS REPEAT_MS
if ($argc !== 12) {
    fwrite(STDERR, "usage: purge-latency.php DWCTL ETCD CACHED_PORT PLAIN_PORT GEO VALUE_A VALUE_B N INTERVAL_MS BOUND_MS REPEAT_MS\n");
    exit(2);
}
[, $dwctl, $etcd, $cachedPort, $plainPort, $geo, $valueA, $valueB, $n, $intervalMs, $boundMs, $repeatMs] = $argv;
[$n, $intervalMs, $boundMs, $repeatMs] = [(int) $n, (int) $intervalMs, (int) $boundMs, (int) $repeatMs];
if ($n < 1 || $n > 1000 || $intervalMs < 1 || $intervalMs > 100 || $boundMs < 100 || $boundMs > 60000 || $repeatMs < 0 || $repeatMs > 60000) {
    fwrite(STDERR, "purge-latency.php: N 1..1000, INTERVAL_MS 1..100, BOUND_MS 100..60000, REPEAT_MS 0..60000\n");
    exit(2);
}
$ms = fn (int $from): float => (hrtime(true) - $from) / 1e6;

// One GET / with CF-IPCountry GEO on a fresh loopback connection (Connection: close):
// [x-litespeed-cache ('' when absent), x-dw-revision (0 when absent)], or null on an error.
function get(int $port, string $geo): ?array
{
    $s = @stream_socket_client("tcp://127.0.0.1:$port", $errno, $error, 2.0);
    if ($s === false) return null;
    stream_set_timeout($s, 5);
    fwrite($s, "GET / HTTP/1.1\r\nHost: 127.0.0.1:$port\r\nCF-IPCountry: $geo\r\nConnection: close\r\n\r\n");
    $head = '';
    // Headers only: at most 64 KiB, then the connection is dropped (the body is not needed).
    while (!str_contains($head, "\r\n\r\n") && strlen($head) < 65536) {
        $chunk = fread($s, 8192);
        if ($chunk === false || $chunk === '') break;
        $head .= $chunk;
    }
    fclose($s);
    if (!preg_match('#^HTTP/1\.[01] 200 #', $head)) return null;
    $cache = preg_match('/^x-litespeed-cache:\s*([^\r\n]*)/mi', $head, $m) ? trim($m[1]) : '';
    $rev = preg_match('/^x-dw-revision:\s*(\d+)/mi', $head, $m) ? (int) $m[1] : 0;
    return [$cache, $rev];
}

// Makes GEO's cached page a hit (bounded); returns its revision, or null.
function prime(int $port, string $geo): ?int
{
    for ($i = 0; $i < 200; $i++) {
        $r = get($port, $geo);
        if ($r !== null && $r[0] === 'hit') return $r[1];
        usleep(5000);
    }
    return null;
}

$failures = 0;
for ($i = 1; $i <= $n; $i++) {
    $old = prime((int) $cachedPort, $geo);
    if ($old === null) {
        fwrite(STDERR, "purge-latency: change $i: the page never became a hit\n");
        echo json_encode(['change' => $i, 'error' => 'not a hit before the change']), "\n";
        $failures++;
        continue;
    }
    $value = $i % 2 ? $valueB : $valueA;
    $t0 = hrtime(true);
    exec(escapeshellarg($dwctl) . ' --endpoints ' . escapeshellarg($etcd) . ' region set ' . escapeshellarg($geo) . ' ' . escapeshellarg($value) . ' 2>&1', $out, $rc);
    $committed = hrtime(true);
    $dwctlMs = $ms($t0);
    $text = implode("\n", $out);
    $out = [];
    if ($rc !== 0 || !preg_match('/revision (\d+)/', $text, $m)) {
        fwrite(STDERR, "purge-latency: change $i: dwctl failed ($rc): $text\n");
        echo json_encode(['change' => $i, 'error' => 'dwctl: ' . substr($text, 0, 200)]), "\n";
        $failures++;
        continue;
    }
    $new = (int) $m[1];
    $purgeMs = $routingMs = null;
    $polls = $oldHitsAfterRouting = $oldMisses = $errors = 0;
    // Bounded: BOUND_MS of polling, INTERVAL_MS apart.
    while ($ms($committed) < $boundMs) {
        $polls++;
        if ($purgeMs === null) {
            $c = get((int) $cachedPort, $geo);
            $at = $ms($committed);
            if ($c === null) {
                $errors++;
            } elseif ($c[0] === 'miss' && $c[1] >= $new) {
                $purgeMs = $at;
            } elseif ($c[0] === 'miss') {
                $oldMisses++; // purged, but answered from the old table (the race the repeat covers)
            } elseif ($c[0] === 'hit' && $c[1] < $new && $routingMs !== null) {
                $oldHitsAfterRouting++;
            }
        }
        if ($routingMs === null) {
            $p = get((int) $plainPort, $geo);
            if ($p === null) $errors++;
            elseif ($p[1] >= $new) $routingMs = $ms($committed);
        }
        if ($purgeMs !== null && $routingMs !== null) break;
        usleep($intervalMs * 1000);
    }
    $row = ['change' => $i, 'revision' => $new, 'old_revision' => $old, 'dwctl_ms' => round($dwctlMs, 2),
        'purge_ms' => $purgeMs === null ? null : round($purgeMs, 2), 'routing_ms' => $routingMs === null ? null : round($routingMs, 2),
        'polls' => $polls, 'old_hits_after_routing' => $oldHitsAfterRouting, 'old_misses' => $oldMisses, 'errors' => $errors];
    echo json_encode($row), "\n";
    fprintf(STDERR, "purge-latency: change %d rev %d: routing %s ms, purge %s ms (%d polls)\n", $i, $new,
        $row['routing_ms'] ?? 'never', $row['purge_ms'] ?? 'never', $polls);
    // Past the agent's repeat purge of this change (plus a margin), so it cannot land inside the next one.
    $wait = $repeatMs + 300 - $ms($committed);
    if ($wait > 0) usleep((int) ($wait * 1000));
}
exit($failures > 0 ? 1 : 0);
