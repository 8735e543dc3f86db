--TEST--
php/front.php with visitor buckets: N off reads and sets no dw_bucket; N on passes the canonical cookie's bucket to resolve() (a sticky key first), and a page that sets dw_bucket (absent, hostile, out of range) is never cached; Secure only over HTTPS or from a trusted proxy; a page made while N changed is not cached; a bucketed page is tagged dw:b by cacheTags() (front.php passes it the bucket and adds no tag itself)
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';

// php -S on loopback, without the extension: front.php behind a stand-in RegionRouter.
$server = null;
for ($try = 0; $try < 5 && $server === null; $try++) {
    $port = random_int(20000, 60000);
    $proc = proc_open([PHP_BINARY, '-n', '-S', "127.0.0.1:$port", __DIR__ . '/fixtures/front-buckets-router.php'],
        [1 => ['file', '/dev/null', 'w'], 2 => ['file', '/dev/null', 'w']], $pipes);
    if (dw_wait_until(fn () => @fsockopen('127.0.0.1', $port) !== false, 3.0)) {
        $server = $proc;
    } else {
        proc_terminate($proc);
        proc_close($proc);
    }
}
if ($server === null) {
    die("no php -S\n");
}

/** The response's routing and caching headers, a drawn bucket shown as B. */
$get = function (array $headers, string $query = '?dw_geo=DE') use ($port): array {
    $headers += ['CF-IPCountry' => 'DE'];
    $lines = [];
    foreach ($headers as $name => $value) {
        foreach ((array) $value as $one) {
            $lines[] = "$name: $one";
        }
    }
    $context = stream_context_create(['http' => ['header' => implode("\r\n", $lines), 'ignore_errors' => true]]);
    file_get_contents("http://127.0.0.1:$port/index.php$query", false, $context);
    $all = http_get_last_response_headers() ?? [];
    $bucket = null;
    foreach ($all as $line) {
        if (preg_match('/^X-DW-Bucket: (\d+)$/i', $line, $m) === 1) {
            $bucket = $m[1];
        }
    }
    $shown = [];
    foreach ($all as $line) {
        if (preg_match('/^(Set-Cookie|Cache-Control|X-LiteSpeed-[A-Za-z-]+|X-DW-(Origin|Bucket)):/i', $line)) {
            $drawn = $bucket !== null && preg_match('/^Set-Cookie: /im', implode("\n", $all)) === 1;
            $shown[] = $drawn ? preg_replace(['/dw_bucket=' . $bucket . ';/', '/^X-DW-Bucket: ' . $bucket . '$/', '/bucket-' . $bucket . '-/'],
                ['dw_bucket=B;', 'X-DW-Bucket: B', 'bucket-B-'], $line) : $line;
        }
    }
    return $shown;
};
$show = function (string $label, array $headers, string $query = '?dw_geo=DE') use ($get) {
    echo "$label\n";
    foreach ($get($headers, $query) as $line) {
        echo '  ', $line, "\n";
    }
};
$on = ['X-Test-Cache-Ttl' => '300', 'X-Test-Buckets' => '4'];

$show('N off, cache on, dw_bucket=3: no bucket read, none set, cached as today', ['X-Test-Cache-Ttl' => '300', 'X-Test-Buckets' => '0', 'Cookie' => 'dw_bucket=3']);
$show('N off, cache off, no cookie: today\'s page', ['X-Test-Buckets' => '0']);
$show('N 4, cache on, dw_bucket=3: routed by bucket 3, cached, tagged dw:b', $on + ['Cookie' => 'a=1; dw_bucket=3']);
$show('N 4, cache on, dw_bucket=3 and dw_sticky=K: the sticky key wins, no dw:b', $on + ['Cookie' => 'dw_sticky=K; dw_bucket=3']);
$show('N 4, cache on, no cookie: a bucket drawn and set, not cached', $on);
$show('N 4, cache off, dw_bucket=0: routed by it, no-store as today', ['X-Test-Buckets' => '4', 'Cookie' => 'dw_bucket=0']);
$show('N 4, cache off, no cookie: set, private', ['X-Test-Buckets' => '4']);
$show('N 4, cache on, dw_bucket=3, N 8 after resolve(): not cached', $on + ['Cookie' => 'dw_bucket=3', 'X-Test-Buckets-After' => '8']);
$show('N 4, cache on, dw_bucket=3, no dw_geo: not cached', $on + ['Cookie' => 'dw_bucket=3'], '');

echo "-- hostile cookies at N 4 (cache on): each drawn again and set, never cached\n";
$hostile = ['dw_bucket=4', 'dw_bucket=999', 'dw_bucket=-1', 'dw_bucket=01', 'dw_bucket=1e2', 'dw.bucket=1',
    'dw bucket=1', 'DW_BUCKET=1', 'dw_bucket=1; dw_bucket=1', 'dw_bucket=1; dw_bucket=2', 'dw.bucket=1; dw_bucket=2',
    'dw_bucket=' . str_repeat('1', 4096)];
foreach ($hostile as $cookie) {
    $lines = $get($on + ['Cookie' => $cookie]);
    $label = strlen($cookie) > 40 ? 'dw_bucket=(4096 digits)' : $cookie;
    $ok = in_array('Set-Cookie: dw_bucket=B; Max-Age=31536000; Path=/; SameSite=Lax; HttpOnly', $lines, true)
        && in_array('X-LiteSpeed-Cache-Control: no-cache', $lines, true) && in_array('Cache-Control: private, no-store', $lines, true)
        && in_array('X-DW-Origin: bucket-B-args-3', $lines, true);
    printf("  %-26s %s\n", $label, $ok ? 'set, not cached, routed by the drawn bucket' : 'WRONG: ' . implode(' | ', $lines));
}
// With two Cookie headers PHP's built-in server joins them; whatever it hands PHP, two
// dw_bucket pairs or none: drawn.
$lines = $get($on + ['Cookie' => ['dw_bucket=1', 'dw_bucket=2']]);
echo '  two Cookie headers:        ', in_array('X-LiteSpeed-Cache-Control: no-cache', $lines, true) ? 'not cached' : 'CACHED: ' . implode(' | ', $lines), "\n";

echo "-- Secure\n";
$secure = function (array $headers) use ($get, $on): string {
    foreach ($get($on + $headers) as $line) {
        if (str_starts_with($line, 'Set-Cookie:')) {
            return str_ends_with($line, '; Secure') ? 'Secure' : 'plain';
        }
    }
    return 'NO Set-Cookie';
};
echo '  HTTPS=on:                                  ', $secure(['X-Test-Https' => 'on']), "\n";
echo '  X-Forwarded-Proto: https, untrusted:       ', $secure(['X-Forwarded-Proto' => 'https']), "\n";
echo '  X-Forwarded-Proto: https, 127.0.0.1 trusted: ', $secure(['X-Forwarded-Proto' => 'https', 'X-Test-Trusted' => '127.0.0.1']), "\n";
echo '  CF-Visitor https, 127.0.0.0/8 trusted:     ', $secure(['CF-Visitor' => '{"scheme":"https"}', 'X-Test-Trusted' => '127.0.0.0/8']), "\n";
echo '  X-Forwarded-Proto: https, 10.0.0.0/8 trusted: ', $secure(['X-Forwarded-Proto' => 'https', 'X-Test-Trusted' => '10.0.0.0/8']), "\n";

proc_terminate($server);
proc_close($server);
?>
--EXPECT--
N off, cache on, dw_bucket=3: no bucket read, none set, cached as today
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: dw,dw:r:DE
  X-DW-Origin: country-DE-args-2
N off, cache off, no cookie: today's page
  Cache-Control: no-store
  X-DW-Origin: country-DE-args-2
N 4, cache on, dw_bucket=3: routed by bucket 3, cached, tagged dw:b
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: dw,dw:r:DE,dw:b
  X-DW-Origin: bucket-3-args-3
  X-DW-Bucket: 3
N 4, cache on, dw_bucket=3 and dw_sticky=K: the sticky key wins, no dw:b
  Cache-Control: no-cache
  X-LiteSpeed-Cache-Control: public,max-age=300
  X-LiteSpeed-Tag: dw,dw:r:DE
  X-DW-Origin: sticky-K
  X-DW-Bucket: 3
N 4, cache on, no cookie: a bucket drawn and set, not cached
  Set-Cookie: dw_bucket=B; Max-Age=31536000; Path=/; SameSite=Lax; HttpOnly
  Cache-Control: private, no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Origin: bucket-B-args-3
  X-DW-Bucket: B
N 4, cache off, dw_bucket=0: routed by it, no-store as today
  Cache-Control: no-store
  X-DW-Origin: bucket-0-args-3
  X-DW-Bucket: 0
N 4, cache off, no cookie: set, private
  Set-Cookie: dw_bucket=B; Max-Age=31536000; Path=/; SameSite=Lax; HttpOnly
  Cache-Control: private, no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Origin: bucket-B-args-3
  X-DW-Bucket: B
N 4, cache on, dw_bucket=3, N 8 after resolve(): not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Origin: bucket-3-args-3
  X-DW-Bucket: 3
N 4, cache on, dw_bucket=3, no dw_geo: not cached
  Cache-Control: no-store
  X-LiteSpeed-Cache-Control: no-cache
  X-DW-Origin: bucket-3-args-3
  X-DW-Bucket: 3
-- hostile cookies at N 4 (cache on): each drawn again and set, never cached
  dw_bucket=4                set, not cached, routed by the drawn bucket
  dw_bucket=999              set, not cached, routed by the drawn bucket
  dw_bucket=-1               set, not cached, routed by the drawn bucket
  dw_bucket=01               set, not cached, routed by the drawn bucket
  dw_bucket=1e2              set, not cached, routed by the drawn bucket
  dw.bucket=1                set, not cached, routed by the drawn bucket
  dw bucket=1                set, not cached, routed by the drawn bucket
  DW_BUCKET=1                set, not cached, routed by the drawn bucket
  dw_bucket=1; dw_bucket=1   set, not cached, routed by the drawn bucket
  dw_bucket=1; dw_bucket=2   set, not cached, routed by the drawn bucket
  dw.bucket=1; dw_bucket=2   set, not cached, routed by the drawn bucket
  dw_bucket=(4096 digits)    set, not cached, routed by the drawn bucket
  two Cookie headers:        not cached
-- Secure
  HTTPS=on:                                  Secure
  X-Forwarded-Proto: https, untrusted:       plain
  X-Forwarded-Proto: https, 127.0.0.1 trusted: Secure
  CF-Visitor https, 127.0.0.0/8 trusted:     Secure
  X-Forwarded-Proto: https, 10.0.0.0/8 trusted: plain
