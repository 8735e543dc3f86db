<?php
/*
 * The client of tests/lsphp/run's `count` test: `php count-client.php URL N PARALLEL`.
 * Sends exactly N requests (PARALLEL at a time, HTTP/1.0 over plain sockets: the devenv's
 * CLI has no curl) over known geos, a quarter of them with a sticky key, and prints as
 * JSON what came back: requests answered 200 with a routing header, per
 * "geo origin sticky", and the others (a child killed mid-request).
 */
[$script, $url, $n, $parallel] = $argv;
$n = (int) $n;
$parts = parse_url($url);
$address = "tcp://{$parts['host']}:{$parts['port']}";
$geos = ['DE', 'FR', 'US', 'GB', 'JP', 'BR', 'IN'];
mt_srand(29);
$sent = 0;
$ok = [];
$okTotal = 0;
$failed = 0;
$open = []; // id => [stream, label, buffer]
$start = function () use (&$sent, &$open, $address, $geos): void {
    $geo = $geos[mt_rand(0, count($geos) - 1)];
    $sticky = mt_rand(0, 3) === 0 ? 'user-' . mt_rand(1, 100) : null;
    $request = "GET / HTTP/1.0\r\nHost: localhost\r\nCF-IPCountry: $geo\r\n"
        . ($sticky === null ? '' : "X-DW-Sticky: $sticky\r\n") . "\r\n";
    $sent++;
    $stream = @stream_socket_client($address, $errno, $error, 20);
    $label = $geo . ' ' . ($sticky === null ? 'false' : 'true');
    if ($stream === false || fwrite($stream, $request) !== strlen($request)) {
        $open[] = [null, $label, ''];
        return;
    }
    stream_set_blocking($stream, false);
    $open[(int) $stream] = [$stream, $label, ''];
};
$finish = function (int $id) use (&$open, &$ok, &$okTotal, &$failed): void {
    [$stream, $label, $buffer] = $open[$id];
    unset($open[$id]);
    if ($stream !== null) {
        fclose($stream);
    }
    [$geo, $sticky] = explode(' ', $label);
    if (preg_match('~^HTTP/1\.[01] 200 ~', $buffer) && preg_match('/^x-dw-origin: (\S+)/mi', $buffer, $m)) {
        $key = "$geo $m[1] $sticky";
        $ok[$key] = ($ok[$key] ?? 0) + 1;
        $okTotal++;
    } else {
        $failed++;
    }
};
while ($sent < $n || $open !== []) {
    while ($sent < $n && count($open) < $parallel) {
        $start();
    }
    foreach ($open as $id => [$stream]) {
        if ($stream === null) {
            $finish($id);
        }
    }
    $read = array_filter(array_column($open, 0));
    if ($read === []) {
        continue;
    }
    $write = $except = null;
    if (stream_select($read, $write, $except, 20) === 0) {
        foreach (array_keys($open) as $id) {
            $finish($id); // nothing for 20 s: failed
        }
        continue;
    }
    foreach ($read as $stream) {
        $id = (int) $stream;
        $chunk = fread($stream, 65536);
        if ($chunk === false || $chunk === '') {
            if (feof($stream) || $chunk === false) {
                $finish($id);
            }
            continue;
        }
        $open[$id][2] .= $chunk;
    }
}
ksort($ok);
echo json_encode(['sent' => $sent, 'ok' => $okTotal, 'failed' => $failed, 'by' => $ok]), "\n";
