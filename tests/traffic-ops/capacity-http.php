<?php
/*
 * The traffic of tests/traffic-ops/capacity-real through the real server: capacity-drive.php's
 * mix sent as HTTP requests to php/front.php behind OpenLiteSpeed + lsphp (or any web stack
 * of scripts/stack), whose children count their answers (dw_router's counter file).
 *   php capacity-http.php URL N SECONDS KEYS PARALLEL OUT
 * Request i: `CF-IPCountry: GEOS[i % 5]`; every other request carries `X-DW-Sticky:
 * k<intdiv(i, 2) % KEYS>` (front.php's sticky header): the same mix as capacity-drive.php.
 * PARALLEL requests at a time (HTTP/1.0, a connection each: every one is a request lsphp
 * answers, whichever child OpenLiteSpeed hands it to), request i not started before
 * SECONDS * i / N (0: all at once, as fast as the server answers). A request counts as
 * answered when it comes back 200 with X-DW-Origin. Writes OUT (JSON): answers per origin
 * as the headers say, the total, `elapsed` (s), `workers` (distinct X-DW-Worker pids: the
 * lsphp children that answered), `revisions` (answers per X-DW-Revision: the table each
 * came from) and `failed`; exits 1 if any request failed (then the
 * counters may hold an answer the client never saw) or none was answered. The loop that
 * sends and reads is tests/lib/http-fan-out.php's.
 */
require __DIR__ . '/../lib/http-fan-out.php';

[, $url, $n, $seconds, $keys, $parallel, $out] = $argv + array_fill(0, 7, '');
$n = (int) $n; $seconds = (float) $seconds; $keys = max(1, (int) $keys); $parallel = max(1, (int) $parallel);
$parts = parse_url($url);
if (!isset($parts['host'], $parts['port']) || $n <= 0 || $out === '') {
    fwrite(STDERR, "usage: php capacity-http.php URL N SECONDS KEYS PARALLEL OUT\n");
    exit(2);
}
$address = "tcp://{$parts['host']}:{$parts['port']}";
$geos = ['DE', 'DE', 'AT', 'CH', 'FR'];
$byOrigin = [];
$workers = [];
$revisions = [];
$answered = 0;
$failed = 0;
$firstError = '';
$sent = 0;
$start = hrtime(true);
$next = function () use (&$sent, $n, $seconds, $start, $geos, $keys): ?array {
    if ($seconds > 0 && $start + (int) ($sent / $n * $seconds * 1e9) > hrtime(true)) {
        return null; // paced: not due yet
    }
    $i = $sent++;
    $request = "GET / HTTP/1.0\r\nHost: localhost\r\nCF-IPCountry: " . $geos[$i % count($geos)] . "\r\n"
        . ($i % 2 === 0 ? 'X-DW-Sticky: k' . (intdiv($i, 2) % $keys) . "\r\n" : '') . "\r\n";
    return [$request, (string) $i];
};
$done = function (string $label, ?string $buffer, string $error) use (&$byOrigin, &$workers, &$revisions, &$answered, &$failed, &$firstError): void {
    if ($buffer === null) {
        $failed++;
        $firstError = $firstError ?: $error;
        return;
    }
    if (preg_match('~^HTTP/1\.[01] 200 ~', $buffer) === 1 && preg_match('/^x-dw-origin: (\S+)/mi', $buffer, $m) === 1) {
        $byOrigin[$m[1]] = ($byOrigin[$m[1]] ?? 0) + 1;
        $answered++;
        if (preg_match('/^x-dw-worker: (\d+)/mi', $buffer, $w) === 1) {
            $workers[$w[1]] = true;
        }
        if (preg_match('/^x-dw-revision: (\d+)/mi', $buffer, $r) === 1) {
            $revisions[(int) $r[1]] = ($revisions[(int) $r[1]] ?? 0) + 1;
        }
    } else {
        $failed++;
        $firstError = $firstError ?: 'answer: ' . strtok($buffer === '' ? '(nothing)' : $buffer, "\r\n");
    }
};
$more = function () use (&$sent, $n): bool {
    return $sent < $n;
};
http_fan_out($address, $parallel, $more, $next, $done);
$elapsed = (hrtime(true) - $start) / 1e9;
ksort($byOrigin);
ksort($revisions);
file_put_contents($out, json_encode(['total' => $answered, 'elapsed' => $elapsed, 'origins' => $byOrigin,
    'workers' => count($workers), 'revisions' => $revisions, 'failed' => $failed]) . "\n");
if ($failed > 0 || $answered === 0) {
    fwrite(STDERR, "capacity-http.php: $failed of $n requests failed ($firstError)\n");
    exit(1);
}
