<?php

declare(strict_types=1);

/*
 * After a change, does every PHP worker route with it within a bound?
 *
 *   php workers.php URL BOUND_MS WORKER_PIDS -- CMD ARGS...
 *   php workers.php URL BOUND_MS auto:N -- CMD ARGS...
 *
 * Runs CMD (a dwctl write, which prints "... revision N"), notes the monotonic time T at
 * which it returned (etcd had committed by then), then sends rounds of as many concurrent
 * requests as there are workers, each held in PHP for 150 ms (?hold_ms, DW_TEST_HOOKS), so
 * that each round occupies every worker. Every answer says which worker (X-DW-Worker), which
 * revision, and when the worker read its route (X-DW-Clock, CLOCK_MONOTONIC like hrtime
 * here). It fails when a worker answered with an older revision more than BOUND_MS after T,
 * or when some worker in WORKER_PIDS (comma separated) was never seen with the new revision
 * within 10 s. Prints one line per worker.
 *
 * auto:N is for servers that fork workers on demand (lsphp forks a child per connection,
 * and recycles them): rounds of N requests, and the workers are every pid that answered
 * in the first round or later. Each must be seen with the new revision within the bound,
 * and at least N/2 distinct workers must have answered (the rounds did spread).
 */

[, $url, $boundMs, $pids] = $argv + [null, null, null, null];
$command = array_slice($argv, array_search('--', $argv, true) + 1);
if (!is_string($url) || !is_numeric($boundMs) || !is_string($pids) || $command === []) {
    fwrite(STDERR, "usage: php workers.php URL BOUND_MS PID,PID,... -- CMD ARGS...\n");
    exit(2);
}
$auto = is_string($pids) && str_starts_with($pids, 'auto:');
$concurrency = $auto ? max(1, (int) substr($pids, 5)) : 0;
$workers = $auto ? [] : array_map('intval', explode(',', $pids));
$concurrency = $auto ? $concurrency : count($workers);
$bound = (int) $boundMs * 1_000_000;
$parts = parse_url($url);
$address = sprintf('tcp://%s:%d', $parts['host'], $parts['port']);

$output = [];
exec(implode(' ', array_map('escapeshellarg', $command)) . ' 2>&1', $output, $exit);
$ack = hrtime(true);
$text = implode("\n", $output);
if ($exit !== 0 || preg_match('/revision (\d+)/', $text, $m) !== 1) {
    echo "command failed (exit $exit): $text\n";
    exit(1);
}
$revision = (int) $m[1];

/** One round: count concurrent held requests; returns [worker, revision, clock] per answer. */
function round_of(string $address, int $count): array
{
    $sockets = [];
    for ($i = 0; $i < $count; $i++) {
        $socket = stream_socket_client($address, $errno, $error, 5);
        if ($socket === false) {
            continue;
        }
        fwrite($socket, "GET /?hold_ms=150 HTTP/1.0\r\nHost: e2e\r\nCF-IPCountry: DE\r\n\r\n");
        $sockets[] = $socket;
    }
    $answers = [];
    foreach ($sockets as $socket) {
        stream_set_timeout($socket, 10);
        $response = (string) stream_get_contents($socket);
        fclose($socket);
        $fields = [];
        foreach (['x-dw-worker', 'x-dw-revision', 'x-dw-clock'] as $name) {
            $fields[] = preg_match('/^' . $name . ':\s*(\d+)/mi', $response, $f) === 1 ? (int) $f[1] : -1;
        }
        $answers[] = $fields;
    }

    return $answers;
}

$firstNew = [];   // worker => clock of its first answer with the new revision
$lateOld = [];    // answers with an older revision read after the bound
$deadline = $ack + 10_000_000_000;
$rounds = 0;
// auto: at least three rounds, then until every worker seen so far had the new revision.
$pending = static function () use (&$rounds, &$workers, &$firstNew, $auto): bool {
    return $auto
        ? $rounds < 3 || array_diff($workers, array_keys($firstNew)) !== []
        : count(array_intersect($workers, array_keys($firstNew))) < count($workers);
};
while ($pending() && hrtime(true) < $deadline) {
    $rounds++;
    foreach (round_of($address, $concurrency) as [$worker, $served, $clock]) {
        if ($auto && $worker > 0 && !in_array($worker, $workers, true)) {
            $workers[] = $worker;
        }
        if ($served >= $revision) {
            $firstNew[$worker] ??= $clock;
        } elseif ($clock - $ack > $bound) {
            $lateOld[] = "worker $worker served revision $served " . round(($clock - $ack) / 1e6) . ' ms after the commit';
        }
    }
}
$ok = $lateOld === [];
foreach ($workers as $worker) {
    if (!isset($firstNew[$worker])) {
        echo "  worker $worker: never seen with revision $revision within 10 s\n";
        $ok = false;
        continue;
    }
    $ms = ($firstNew[$worker] - $ack) / 1e6;
    $within = $firstNew[$worker] - $ack <= $bound;
    $ok = $ok && $within;
    printf("  worker %d: revision %d in its first answer read %.0f ms after dwctl returned%s\n",
        $worker, $revision, max(0.0, $ms), $within ? '' : " (over the bound of {$boundMs} ms)");
}
foreach ($lateOld as $line) {
    echo "  $line\n";
}
if ($auto && count($workers) < intdiv($concurrency, 2)) {
    echo '  only ' . count($workers) . " distinct workers answered rounds of $concurrency requests\n";
    $ok = false;
}
printf("  (%d round(s) of %d held requests, %d workers)\n", $rounds, $concurrency, count($workers));
exit($ok ? 0 : 1);
