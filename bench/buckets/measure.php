<?php

declare(strict_types=1);

/*
 * bench/24-bucket-cache.sh's measured half: the page cache's hit ratio on OpenLiteSpeed +
 * lsphp + LSCache (php/front.php as the page, the vary on dw_sticky,dw_bucket), for one
 * configuration of buckets, beside the model (bench/buckets/model.php) for the same pages,
 * requests and N, and beside the ideal hit count of the exact sequence sent (its requests
 * minus its distinct (page, dw_bucket) variants: what a cache that keeps every variant for
 * the run scores on it).
 *
 *   php measure.php URL N PAGES REQUESTS VISITORS SEED
 *
 * N = 0: buckets off, visitors send no cookie (nothing sets one). N > 0: VISITORS new
 * visitors first get their dw_bucket from the server (one cookie-less GET each on a page
 * of its own, not counted: BucketCookie draws it uniformly with random_int and the response
 * is never cached); then REQUESTS returning visits, each a visitor drawn uniformly from
 * that pool with its cookie and a page drawn by Zipf(1.0) over PAGES pages (`/?p=I`), both
 * from mt_rand seeded with SEED (the same page sequence for every N). One process, one
 * loopback connection per request (HTTP/1.0), sequential: no two requests race on a miss.
 * A hit is counted by LSCache's `x-litespeed-cache: hit`, and checked by X-DW-Clock (the
 * time front.php read the route, DW_TEST_HOOKS): a hit repeats the clock of its variant's
 * first response. Prints one JSON line; exits 1 when a request failed or a visitor got no
 * bucket. Bounds: PAGES <= 100,000, REQUESTS <= 100,000, VISITORS <= 10,000, 10 s a request.
 */

require __DIR__ . '/model.php';

const GEO = 'DE';
const ZIPF_S = 1.0;

if ($argc !== 7) {
    fwrite(STDERR, "usage: php measure.php URL N PAGES REQUESTS VISITORS SEED\n");
    exit(2);
}
[, $url, $n, $pages, $requests, $visitors, $seed] = $argv;
$n = (int) $n;
$pages = (int) $pages;
$requests = (int) $requests;
$visitors = (int) $visitors;
$seed = (int) $seed;
if ($n < 0 || $n > 1024 || $pages < 1 || $pages > 100000 || $requests < 1 || $requests > 100000
    || $visitors < 1 || $visitors > 10000) {
    fwrite(STDERR, "measure.php: N 0..1024, PAGES and REQUESTS 1..100,000, VISITORS 1..10,000\n");
    exit(2);
}

/** @return array{status: int, headers: array<string, list<string>>} */
function get(string $url, string $path, ?string $cookie): array
{
    $parts = parse_url($url);
    $socket = @stream_socket_client("tcp://{$parts['host']}:{$parts['port']}", $errno, $error, 10.0);
    if ($socket === false) {
        return ['status' => 0, 'headers' => []];
    }
    stream_set_timeout($socket, 10);
    $lines = ["GET $path HTTP/1.0", "Host: {$parts['host']}", 'CF-IPCountry: ' . GEO];
    if ($cookie !== null) {
        $lines[] = "Cookie: $cookie";
    }
    fwrite($socket, implode("\r\n", $lines) . "\r\n\r\n");
    $response = (string) stream_get_contents($socket, 1 << 20);
    fclose($socket);
    [$head] = explode("\r\n\r\n", $response, 2) + [''];
    $headLines = explode("\r\n", $head);
    $status = preg_match('#^HTTP/\d\.\d (\d{3})#', $headLines[0], $m) === 1 ? (int) $m[1] : 0;
    $parsed = [];
    foreach (array_slice($headLines, 1) as $line) {
        $colon = strpos($line, ':');
        if ($colon !== false) {
            $parsed[strtolower(substr($line, 0, $colon))][] = trim(substr($line, $colon + 1));
        }
    }

    return ['status' => $status, 'headers' => $parsed];
}

$started = hrtime(true);
$errors = 0;

// The visitors' buckets, as the server draws them (N > 0).
$buckets = [];
if ($n > 0) {
    for ($v = 0; $v < $visitors; $v++) {
        $r = get($url, "/?enrol=$seed-$n-$v", null);
        $set = $r['headers']['set-cookie'] ?? [];
        if ($r['status'] !== 200 || count($set) !== 1 || preg_match('/^dw_bucket=(0|[1-9][0-9]*);/', $set[0], $m) !== 1
            || (int) $m[1] >= $n) {
            fwrite(STDERR, "measure.php: visitor $v got no bucket below $n (status {$r['status']}, Set-Cookie " . json_encode($set) . ")\n");
            exit(1);
        }
        $buckets[] = (int) $m[1];
    }
}
$enrolSeconds = (hrtime(true) - $started) / 1e9;

$q = zipf($pages, ZIPF_S);
$cdf = [];
$acc = 0.0;
foreach ($q as $p) {
    $acc += $p;
    $cdf[] = $acc;
}
$last = count($cdf) - 1;

mt_srand($seed);
$hits = 0;
$repeats = 0;
$setAgain = 0;
$firstClock = [];
$t0 = hrtime(true);
for ($i = 0; $i < $requests; $i++) {
    $u = mt_rand() / mt_getrandmax();
    [$lo, $hi] = [0, $last];
    while ($lo < $hi) {
        $mid = intdiv($lo + $hi, 2);
        if ($cdf[$mid] < $u) {
            $lo = $mid + 1;
        } else {
            $hi = $mid;
        }
    }
    $visitor = mt_rand(0, $visitors - 1);
    $bucket = $n > 0 ? $buckets[$visitor] : null;
    $r = get($url, "/?p=$lo", $bucket === null ? null : "dw_bucket=$bucket");
    if ($r['status'] !== 200) {
        $errors++;
        continue;
    }
    if (isset($r['headers']['set-cookie'])) {
        $setAgain++;
    }
    if (str_starts_with($r['headers']['x-litespeed-cache'][0] ?? '', 'hit')) {
        $hits++;
    }
    $key = $lo . ':' . ($bucket ?? '-');
    $clock = $r['headers']['x-dw-clock'][0] ?? '';
    if (!isset($firstClock[$key])) {
        $firstClock[$key] = $clock;
    } elseif ($clock !== '' && $clock === $firstClock[$key]) {
        $repeats++;
    }
}
$runSeconds = (hrtime(true) - $t0) / 1e9;

echo json_encode([
    'n' => $n,
    'pages' => $pages,
    'requests' => $requests,
    'visitors' => $n > 0 ? $visitors : 0,
    'buckets_seen' => count(array_unique($buckets)),
    'seed' => $seed,
    'hits' => $hits,
    'clock_repeats' => $repeats,
    'ideal_hits' => $requests - count($firstClock),
    'model' => hitRatio($q, max(1, $n), $requests),
    'errors' => $errors,
    'set_cookie_again' => $setAgain,
    'enrol_seconds' => round($enrolSeconds, 2),
    'run_seconds' => round($runSeconds, 2),
]), "\n";
exit($errors > 0 ? 1 : 0);
