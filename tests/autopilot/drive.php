<?php
/*
 * One node's traffic for tests/autopilot/run and make demo's autopilot scene, at the rates a
 * CONTROL file gives, re-read every 0.2 s:
 *   php drive.php URL|SNAPSHOT CONTROL SHARE OUT MAX_SECONDS
 * With a URL (http://...), each answer is one HTTP request to the node's OpenLiteSpeed +
 * lsphp (php/front.php: the geo in CF-IPCountry, the sticky key in X-DW-Sticky, the origin
 * read back from X-DW-Origin); the extension in lsphp counts it into the node's answers
 * directory. With a SNAPSHOT path, this PHP CLI process (the extension loaded, counting)
 * calls resolve() itself. A request that fails counts under the origin "" (an error).
 * CONTROL holds "GEO RATE ..." pairs (answers per second for the whole fleet) or "stop";
 * this process answers SHARE (0 to 1) of each rate. Every answer carries its own sticky
 * key, so an origin's share of a geo is its weight's share (dw-capacity's exact sticky
 * prediction). OUT gets one JSON line per whole second (unix time): the answers this
 * process gave per origin in that second. The process ends on "stop", or after
 * MAX_SECONDS (a bound: a driver whose test died never outlives it for long).
 */
[, $snapshot, $control, $share, $out, $max] = $argv;
$share = (float) $share;
$max = (float) $max;
$http = str_starts_with($snapshot, 'http://');
if ($http) {
    /** One request: the origin the node answered, or "" when it did not answer one. */
    $resolve = function (string $geo, string $key) use ($snapshot): string {
        $context = stream_context_create(['http' => [
            'timeout' => 2,
            'ignore_errors' => true,
            'header' => "CF-IPCountry: $geo\r\nX-DW-Sticky: $key\r\nConnection: close\r\n",
        ]]);
        $body = @file_get_contents($snapshot . '/', false, $context);
        $headers = $body === false ? [] : ($http_response_header ?? []);
        if (!preg_match('#^HTTP/\S+ 200#', $headers[0] ?? '')) {
            return '';
        }
        foreach ($headers as $line) {
            if (stripos($line, 'X-DW-Origin:') === 0) {
                return trim(substr($line, strlen('X-DW-Origin:')));
            }
        }
        return '';
    };
} else {
    $router = new RegionRouter($snapshot);
    if (!$router->traffic()['counting']) {
        fwrite(STDERR, "drive.php: not counting: " . $router->traffic()['state'] . "\n");
        exit(1);
    }
    $resolve = fn (string $geo, string $key): string => $router->resolve($geo, $key)['origin'] ?? '';
}
$log = fopen($out, 'a');
$start = microtime(true);
$rates = [];
$readAt = 0.0;
$owed = [];          // per geo: answers owed so far (fractional), minus those given
$last = $start;
$second = (int) floor($start);
$counts = [];
$serial = 0;
$key = bin2hex(random_bytes(4));
while (true) {
    $now = microtime(true);
    if ($now - $start > $max) {
        break;
    }
    if ($now - $readAt >= 0.2) {
        $readAt = $now;
        $text = trim((string) @file_get_contents($control));
        if ($text === 'stop') {
            break;
        }
        $parts = preg_split('/\s+/', $text);
        $rates = [];
        for ($i = 0; $i + 1 < count($parts); $i += 2) {
            $rates[$parts[$i]] = max(0.0, min(10000.0, (float) $parts[$i + 1])) * $share;
        }
    }
    if ((int) floor($now) !== $second) {
        fwrite($log, json_encode(['t' => $second, 'origins' => (object) $counts]) . "\n");
        fflush($log);
        $second = (int) floor($now);
        $counts = [];
    }
    $elapsed = $now - $last;
    $last = $now;
    foreach ($rates as $geo => $rate) {
        $owed[$geo] = min(($owed[$geo] ?? 0.0) + $rate * $elapsed, 1000.0);
        while ($owed[$geo] >= 1.0) {
            $owed[$geo] -= 1.0;
            $origin = $resolve($geo, $key . '-' . $serial++);
            $counts[$origin] = ($counts[$origin] ?? 0) + 1;
        }
    }
    usleep(5000);
}
fwrite($log, json_encode(['t' => $second, 'origins' => (object) $counts]) . "\n");
fclose($log);
