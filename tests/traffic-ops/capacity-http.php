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
 * counters may hold an answer the client never saw) or none was answered.
 */
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
$open = []; // id => [stream, buffer]
$sent = 0;
$start = hrtime(true);
$send = function () use (&$sent, &$open, &$failed, &$firstError, $address, $geos, $keys): void {
    $i = $sent++;
    $request = "GET / HTTP/1.0\r\nHost: localhost\r\nCF-IPCountry: " . $geos[$i % count($geos)] . "\r\n"
        . ($i % 2 === 0 ? 'X-DW-Sticky: k' . (intdiv($i, 2) % $keys) . "\r\n" : '') . "\r\n";
    $stream = @stream_socket_client($address, $errno, $error, 20);
    if ($stream === false || fwrite($stream, $request) !== strlen($request)) {
        $failed++;
        $firstError = $firstError ?: "connect/send: $error";
        return;
    }
    stream_set_blocking($stream, false);
    $open[(int) $stream] = [$stream, ''];
};
$finish = function (int $id) use (&$open, &$byOrigin, &$workers, &$revisions, &$answered, &$failed, &$firstError): void {
    [$stream, $buffer] = $open[$id];
    unset($open[$id]);
    fclose($stream);
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
while ($sent < $n || $open !== []) {
    while ($sent < $n && count($open) < $parallel) {
        if ($seconds > 0) {
            $due = $start + (int) ($sent / $n * $seconds * 1e9);
            if ($due > hrtime(true)) {
                break;
            }
        }
        $send();
    }
    $read = array_column($open, 0);
    if ($read === []) {
        if ($sent < $n) {
            usleep(1000); // paced: the next request is not due yet
        }
        continue;
    }
    $write = $except = null;
    // Paced and below PARALLEL: wake within 1 ms to send the next one when it is due.
    $paced = $sent < $n && count($open) < $parallel;
    if (stream_select($read, $write, $except, $paced ? 0 : 20, $paced ? 1000 : 0) === 0) {
        if (!$paced) {
            foreach (array_keys($open) as $id) {
                $finish($id); // nothing for 20 s: failed
            }
        }
        continue;
    }
    foreach ($read as $stream) {
        $id = (int) $stream;
        $chunk = fread($stream, 65536);
        if ($chunk === false || $chunk === '') {
            if ($chunk === false || feof($stream)) {
                $finish($id);
            }
            continue;
        }
        $open[$id][1] .= $chunk;
    }
}
$elapsed = (hrtime(true) - $start) / 1e9;
ksort($byOrigin);
ksort($revisions);
file_put_contents($out, json_encode(['total' => $answered, 'elapsed' => $elapsed, 'origins' => $byOrigin,
    'workers' => count($workers), 'revisions' => $revisions, 'failed' => $failed]) . "\n");
if ($failed > 0 || $answered === 0) {
    fwrite(STDERR, "capacity-http.php: $failed of $n requests failed ($firstError)\n");
    exit(1);
}
