<?php
/*
 * The client of tests/lsphp/run's `count` and `count-detached` tests:
 * `php count-client.php URL N PARALLEL [UNTIL [EVERY:MS]]`.
 * Sends N requests (PARALLEL at a time, HTTP/1.0 over plain sockets: the devenv's CLI has
 * no curl) over known geos, a quarter of them with a sticky key; with UNTIL (a path), goes
 * on past N until that file exists ('' for none); with EVERY:MS, every EVERYth request is
 * held MS ms after its answer was read (front.php's hold_after_ms, DW_TEST_HOOKS), so that
 * some are in flight whenever something happens to the server. Prints as JSON what came back: requests answered 200
 * with a routing header, per "geo origin sticky", and the others (a child killed
 * mid-request); and per worker (X-DW-Worker) its answers, the sequence numbers of its
 * first and last answer in the order answers arrived, and its parent's pid (X-DW-Parent,
 * DW_TEST_HOOKS), so that a test can tell two process trees answered interleaved.
 * The loop that sends and reads is tests/lib/http-fan-out.php's.
 */
require __DIR__ . '/../lib/http-fan-out.php';

[$script, $url, $n, $parallel] = $argv;
$until = ($argv[4] ?? '') === '' ? null : $argv[4];
[$holdEvery, $holdMs] = array_map('intval', explode(':', $argv[5] ?? '0:0') + [1 => 0]);
$n = (int) $n;
$parts = parse_url($url);
$address = "tcp://{$parts['host']}:{$parts['port']}";
$geos = ['DE', 'FR', 'US', 'GB', 'JP', 'BR', 'IN'];
mt_srand(29);
$sent = 0;
$ok = [];
$okTotal = 0;
$failed = 0;
$workers = []; // pid => [answers, first sequence number, last, parent pid]
$next = function () use (&$sent, $geos, $holdEvery, $holdMs): array {
    $geo = $geos[mt_rand(0, count($geos) - 1)];
    $sticky = mt_rand(0, 3) === 0 ? 'user-' . mt_rand(1, 100) : null;
    $path = $holdEvery > 0 && $sent % $holdEvery === $holdEvery - 1 ? "/?hold_after_ms=$holdMs" : '/';
    $request = "GET $path HTTP/1.0\r\nHost: localhost\r\nCF-IPCountry: $geo\r\n"
        . ($sticky === null ? '' : "X-DW-Sticky: $sticky\r\n") . "\r\n";
    $sent++;
    return [$request, $geo . ' ' . ($sticky === null ? 'false' : 'true')];
};
$done = function (string $label, ?string $buffer) use (&$ok, &$okTotal, &$failed, &$workers): void {
    [$geo, $sticky] = explode(' ', $label);
    if ($buffer !== null && preg_match('~^HTTP/1\.[01] 200 ~', $buffer) && preg_match('/^x-dw-origin: (\S+)/mi', $buffer, $m)) {
        $key = "$geo $m[1] $sticky";
        $ok[$key] = ($ok[$key] ?? 0) + 1;
        $okTotal++;
        if (preg_match('/^x-dw-worker: (\d+)/mi', $buffer, $w)) {
            $pid = (int) $w[1];
            $parent = preg_match('/^x-dw-parent: (\d+)/mi', $buffer, $p) ? (int) $p[1] : 0;
            $workers[$pid] ??= [0, $okTotal, $okTotal, $parent];
            $workers[$pid][0]++;
            $workers[$pid][2] = $okTotal;
        }
    } else {
        $failed++;
    }
};
$more = function () use (&$sent, $n, $until): bool {
    return $sent < $n || ($until !== null && !file_exists($until));
};
http_fan_out($address, (int) $parallel, $more, $next, $done);
ksort($ok);
ksort($workers);
echo json_encode(['sent' => $sent, 'ok' => $okTotal, 'failed' => $failed, 'by' => $ok, 'workers' => $workers]), "\n";
