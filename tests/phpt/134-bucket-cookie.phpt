--TEST--
php/BucketCookie.php: dw_bucket is kept only in its one canonical spelling below N, read from the raw Cookie header; everything else is drawn uniformly and set (not cacheable); Secure from the server or a trusted proxy only; N off reads and sets nothing; a smaller N re-draws only the buckets at or above it
--FILE--
<?php
require __DIR__ . '/../../php/BucketCookie.php';
use DwRouter\BucketCookie;

$show = function (array $r, int $n): string {
    if ($r['reason'] === 'off') {
        return 'off ' . json_encode($r);
    }
    $ok = $r['bucket'] >= 0 && $r['bucket'] < $n;
    $cookie = $r['set_cookie'] === null ? 'no Set-Cookie'
        : ($r['set_cookie'] === BucketCookie::setCookie($r['bucket'], false) ? 'Set-Cookie of that bucket' : 'BAD Set-Cookie ' . $r['set_cookie']);
    $cacheable = $r['cacheable'] === ($r['set_cookie'] === null) ? ($r['cacheable'] ? 'cacheable' : 'NOT cached') : 'BAD cacheable';

    return ($r['reason'] === 'kept' ? "kept {$r['bucket']}" : "drawn ({$r['reason']})") . ($ok ? '' : ' OUT OF RANGE')
        . ", $cookie, $cacheable";
};

echo "-- N = 16: what is kept, what is drawn\n";
$cases = [
    'no header' => null,
    'another cookie' => 'a=1',
    'exact 3' => 'dw_bucket=3',
    'exact 0' => 'dw_bucket=0',
    'exact 15 (N - 1)' => 'dw_bucket=15',
    'after another, a tab' => "a=1;\tdw_bucket=7",
    'after another, spaces' => 'a=1;   dw_bucket=7',
    'beside dw_sticky' => 'dw_sticky=K; dw_bucket=7',
    '16 (N)' => 'dw_bucket=16',
    '999' => 'dw_bucket=999',
    '1024' => 'dw_bucket=1024',
    '99999' => 'dw_bucket=99999',
    '-1' => 'dw_bucket=-1',
    '+1' => 'dw_bucket=+1',
    '01' => 'dw_bucket=01',
    '00' => 'dw_bucket=00',
    '1e2' => 'dw_bucket=1e2',
    '1.0' => 'dw_bucket=1.0',
    '0x1' => 'dw_bucket=0x1',
    'space before the value' => 'dw_bucket= 3',
    'space after the value' => 'dw_bucket=3 ',
    'encoded value %33' => 'dw_bucket=%33',
    'quoted' => 'dw_bucket="3"',
    'empty value' => 'dw_bucket=',
    'no =' => 'dw_bucket',
    'dot' => 'dw.bucket=3',
    'space in the name' => 'dw bucket=3',
    'open bracket' => 'dw[bucket=3',
    'array' => 'dw_bucket[]=3',
    'space before =' => 'dw_bucket =3',
    'upper case' => 'DW_BUCKET=3',
    'encoded underscore' => 'dw%5Fbucket=3',
    'encoded name, then exact' => 'dw%5Fbucket=5; dw_bucket=3',
    'prefix' => 'xdw_bucket=3',
    'duplicate 3 then 3' => 'dw_bucket=3; dw_bucket=3',
    'duplicate 3 then 5' => 'dw_bucket=3; dw_bucket=5',
    'dot then exact' => 'dw.bucket=5; dw_bucket=3',
    'exact then dot' => 'dw_bucket=3; dw.bucket=5',
    'comma-separated' => 'a=1, dw_bucket=3',
    'in another cookie\'s value' => 'a=dw_bucket; dw_bucket=3',
    'a 4 KB value' => 'dw_bucket=' . str_repeat('1', 4096),
    'a 4 KB value of letters' => 'dw_bucket=' . str_repeat('x', 4096),
    'header of 8192 bytes' => 'a=' . str_repeat('b', 8178) . ';dw_bucket=3',
    'header of 8193 bytes' => 'a=' . str_repeat('b', 8179) . ';dw_bucket=3',
    'header not a string' => ['dw_bucket=3'],
];
foreach ($cases as $label => $header) {
    $server = $header === null ? [] : ['HTTP_COOKIE' => $header];
    printf("%-28s %s%s\n", $label, $show(BucketCookie::forRequest($server, 16), 16),
        is_string($header) && strlen($header) > 1000 ? ' (' . strlen($header) . ' bytes)' : '');
}

echo "-- the Set-Cookie line\n";
echo BucketCookie::setCookie(5, false), "\n";
echo BucketCookie::setCookie(1023, true), "\n";

echo "-- N off (0): no cookie read or set, no bucket, whatever the header\n";
$same = 0;
foreach ($cases as $label => $header) {
    $server = ($header === null ? [] : ['HTTP_COOKIE' => $header]) + ['HTTPS' => 'on'];
    $same += BucketCookie::forRequest($server, 0) === ['bucket' => null, 'set_cookie' => null, 'cacheable' => true, 'reason' => 'off'] ? 1 : 0;
}
echo "$same of ", count($cases), " headers: bucket null, no Set-Cookie, cacheable\n";

echo "-- N's edges\n";
foreach ([-1, 1, 2, 1024, 1025] as $n) {
    try {
        $r = BucketCookie::forRequest(['HTTP_COOKIE' => 'dw_bucket=1'], $n);
        echo "N = $n: ", $show($r, $n), "\n";
    } catch (\ValueError $e) {
        echo "N = $n: ValueError: ", $e->getMessage(), "\n";
    }
}
echo 'N = 1024, dw_bucket=1023: ', $show(BucketCookie::forRequest(['HTTP_COOKIE' => 'dw_bucket=1023'], 1024), 1024), "\n";
echo 'N = 2, dw_bucket=2: ', $show(BucketCookie::forRequest(['HTTP_COOKIE' => 'dw_bucket=2'], 2), 2), "\n";

echo "-- a change of N: a bucket below the new N is kept, one at or above it re-drawn\n";
foreach ([[16, 4, 3], [16, 4, 4], [16, 4, 15], [4, 16, 3], [1024, 1000, 999], [1024, 1000, 1000]] as [$old, $new, $b]) {
    printf("N %d -> %d, dw_bucket=%d: %s\n", $old, $new, $b, $show(BucketCookie::forRequest(['HTTP_COOKIE' => "dw_bucket=$b"], $new), $new));
}
// 1024 -> 1000, visitors uniform over the old N: the rule keeps them uniform over the new
// one (b mod N would give buckets 0..23 twice the others: about 200 visitors, not 100).
$visitors = 100000;
$count = array_fill(0, 1000, 0);
for ($i = 0; $i < $visitors; $i++) {
    $old = random_int(0, 1023);
    $count[BucketCookie::forRequest(['HTTP_COOKIE' => "dw_bucket=$old"], 1000)['bucket']]++;
}
$mean = $visitors / 1000;
$sigma = sqrt($visitors * (1 / 1000) * (999 / 1000));
$low = array_sum(array_slice($count, 0, 24)) / 24;
printf("1024 -> 1000: every bucket within mean 100 +- 6 sigma: %s; buckets 0..23 hold %s the mean\n",
    max($count) <= $mean + 6 * $sigma && min($count) >= $mean - 6 * $sigma ? 'yes' : 'NO (' . min($count) . '..' . max($count) . ')',
    abs($low - $mean) <= 3 * $sigma ? 'about' : "NOT about ($low)");

echo "-- draws are uniform: 16,000 new visitors at N = 16\n";
$count = array_fill(0, 16, 0);
for ($i = 0; $i < 16000; $i++) {
    $count[BucketCookie::forRequest([], 16)['bucket']]++;
}
$sigma = sqrt(16000 * (1 / 16) * (15 / 16));
printf("every bucket within 1000 +- 5 sigma (%.0f): %s\n", 5 * $sigma,
    max($count) <= 1000 + 5 * $sigma && min($count) >= 1000 - 5 * $sigma ? 'yes' : 'NO: ' . implode(',', $count));

echo "-- Secure\n";
$secure = fn (array $server) => str_ends_with(BucketCookie::forRequest($server, 4)['set_cookie'], '; Secure') ? 'Secure' : 'plain';
$proxy = ['DW_TRUSTED_PROXIES' => '127.0.0.1, 10.0.0.0/8 2001:db8::/32', 'REMOTE_ADDR' => '127.0.0.1'];
$xfp = ['HTTP_X_FORWARDED_PROTO' => 'https'];
$secureCases = [
    'no HTTPS' => [],
    'HTTPS=on' => ['HTTPS' => 'on'],
    'HTTPS=1' => ['HTTPS' => '1'],
    'HTTPS=off' => ['HTTPS' => 'off'],
    'HTTPS=OFF' => ['HTTPS' => 'OFF'],
    'HTTPS empty' => ['HTTPS' => ''],
    'X-Forwarded-Proto, no trusted proxy' => $xfp + ['REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, trusted peer' => $xfp + $proxy,
    'X-Forwarded-Proto HTTPS, trusted peer' => ['HTTP_X_FORWARDED_PROTO' => 'HTTPS'] + $proxy,
    'X-Forwarded-Proto "https, http"' => ['HTTP_X_FORWARDED_PROTO' => 'https, http'] + $proxy,
    'X-Forwarded-Proto "http, https"' => ['HTTP_X_FORWARDED_PROTO' => 'http, https'] + $proxy,
    'X-Forwarded-Proto http' => ['HTTP_X_FORWARDED_PROTO' => 'http'] + $proxy,
    'X-Forwarded-Proto, untrusted peer' => $xfp + ['REMOTE_ADDR' => '127.0.0.2'] + $proxy,
    'X-Forwarded-Proto, peer in 10/8' => $xfp + ['REMOTE_ADDR' => '10.200.0.1'] + $proxy,
    'X-Forwarded-Proto, peer 11.0.0.1' => $xfp + ['REMOTE_ADDR' => '11.0.0.1'] + $proxy,
    'X-Forwarded-Proto, peer ::ffff:10.1.2.3' => $xfp + ['REMOTE_ADDR' => '::ffff:10.1.2.3'] + $proxy,
    'X-Forwarded-Proto, peer 2001:db8::1' => $xfp + ['REMOTE_ADDR' => '2001:db8::1'] + $proxy,
    'X-Forwarded-Proto, peer 2001:db9::1' => $xfp + ['REMOTE_ADDR' => '2001:db9::1'] + $proxy,
    'X-Forwarded-Proto, no REMOTE_ADDR' => $xfp + ['DW_TRUSTED_PROXIES' => '127.0.0.1'],
    'X-Forwarded-Proto, /33' => $xfp + ['DW_TRUSTED_PROXIES' => '127.0.0.0/33', 'REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, /07' => $xfp + ['DW_TRUSTED_PROXIES' => '127.0.0.0/07', 'REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, 127.0.0.0/31 .1' => $xfp + ['DW_TRUSTED_PROXIES' => '127.0.0.0/31', 'REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, 127.0.0.0/31 .2' => $xfp + ['DW_TRUSTED_PROXIES' => '127.0.0.0/31', 'REMOTE_ADDR' => '127.0.0.2'],
    'X-Forwarded-Proto, 128.0.0.0/1 .1' => $xfp + ['DW_TRUSTED_PROXIES' => '128.0.0.0/1', 'REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, 0.0.0.0/0' => $xfp + ['DW_TRUSTED_PROXIES' => '0.0.0.0/0', 'REMOTE_ADDR' => '203.0.113.9'],
    'X-Forwarded-Proto, a host name' => $xfp + ['DW_TRUSTED_PROXIES' => 'localhost', 'REMOTE_ADDR' => '127.0.0.1'],
    'X-Forwarded-Proto, list over 4096 bytes' => $xfp + ['DW_TRUSTED_PROXIES' => str_repeat(' ', 4096) . '127.0.0.1', 'REMOTE_ADDR' => '127.0.0.1'],
    'CF-Visitor https, trusted peer' => ['HTTP_CF_VISITOR' => '{"scheme":"https"}'] + $proxy,
    'CF-Visitor http, trusted peer' => ['HTTP_CF_VISITOR' => '{"scheme":"http"}'] + $proxy,
    'CF-Visitor https, untrusted peer' => ['HTTP_CF_VISITOR' => '{"scheme":"https"}', 'REMOTE_ADDR' => '127.0.0.9'] + $proxy,
    'CF-Visitor not JSON, trusted peer' => ['HTTP_CF_VISITOR' => 'scheme=https'] + $proxy,
];
foreach ($secureCases as $label => $server) {
    printf("%-42s %s\n", $label, $secure($server));
}
?>
--EXPECT--
-- N = 16: what is kept, what is drawn
no header                    drawn (absent), Set-Cookie of that bucket, NOT cached
another cookie               drawn (absent), Set-Cookie of that bucket, NOT cached
exact 3                      kept 3, no Set-Cookie, cacheable
exact 0                      kept 0, no Set-Cookie, cacheable
exact 15 (N - 1)             kept 15, no Set-Cookie, cacheable
after another, a tab         kept 7, no Set-Cookie, cacheable
after another, spaces        kept 7, no Set-Cookie, cacheable
beside dw_sticky             kept 7, no Set-Cookie, cacheable
16 (N)                       drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
999                          drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
1024                         drawn (invalid), Set-Cookie of that bucket, NOT cached
99999                        drawn (invalid), Set-Cookie of that bucket, NOT cached
-1                           drawn (invalid), Set-Cookie of that bucket, NOT cached
+1                           drawn (invalid), Set-Cookie of that bucket, NOT cached
01                           drawn (invalid), Set-Cookie of that bucket, NOT cached
00                           drawn (invalid), Set-Cookie of that bucket, NOT cached
1e2                          drawn (invalid), Set-Cookie of that bucket, NOT cached
1.0                          drawn (invalid), Set-Cookie of that bucket, NOT cached
0x1                          drawn (invalid), Set-Cookie of that bucket, NOT cached
space before the value       drawn (invalid), Set-Cookie of that bucket, NOT cached
space after the value        drawn (invalid), Set-Cookie of that bucket, NOT cached
encoded value %33            drawn (invalid), Set-Cookie of that bucket, NOT cached
quoted                       drawn (invalid), Set-Cookie of that bucket, NOT cached
empty value                  drawn (invalid), Set-Cookie of that bucket, NOT cached
no =                         drawn (invalid), Set-Cookie of that bucket, NOT cached
dot                          drawn (invalid), Set-Cookie of that bucket, NOT cached
space in the name            drawn (invalid), Set-Cookie of that bucket, NOT cached
open bracket                 drawn (invalid), Set-Cookie of that bucket, NOT cached
array                        drawn (invalid), Set-Cookie of that bucket, NOT cached
space before =               drawn (invalid), Set-Cookie of that bucket, NOT cached
upper case                   drawn (invalid), Set-Cookie of that bucket, NOT cached
encoded underscore           drawn (invalid), Set-Cookie of that bucket, NOT cached
encoded name, then exact     drawn (invalid), Set-Cookie of that bucket, NOT cached
prefix                       drawn (invalid), Set-Cookie of that bucket, NOT cached
duplicate 3 then 3           drawn (invalid), Set-Cookie of that bucket, NOT cached
duplicate 3 then 5           drawn (invalid), Set-Cookie of that bucket, NOT cached
dot then exact               drawn (invalid), Set-Cookie of that bucket, NOT cached
exact then dot               drawn (invalid), Set-Cookie of that bucket, NOT cached
comma-separated              drawn (invalid), Set-Cookie of that bucket, NOT cached
in another cookie's value    drawn (invalid), Set-Cookie of that bucket, NOT cached
a 4 KB value                 drawn (invalid), Set-Cookie of that bucket, NOT cached (4106 bytes)
a 4 KB value of letters      drawn (invalid), Set-Cookie of that bucket, NOT cached (4106 bytes)
header of 8192 bytes         kept 3, no Set-Cookie, cacheable (8192 bytes)
header of 8193 bytes         drawn (invalid), Set-Cookie of that bucket, NOT cached (8193 bytes)
header not a string          drawn (absent), Set-Cookie of that bucket, NOT cached
-- the Set-Cookie line
dw_bucket=5; Max-Age=31536000; Path=/; SameSite=Lax; HttpOnly
dw_bucket=1023; Max-Age=31536000; Path=/; SameSite=Lax; HttpOnly; Secure
-- N off (0): no cookie read or set, no bucket, whatever the header
45 of 45 headers: bucket null, no Set-Cookie, cacheable
-- N's edges
N = -1: ValueError: buckets is -1, not 0 (off) or 2 to 1024
N = 1: ValueError: buckets is 1, not 0 (off) or 2 to 1024
N = 2: kept 1, no Set-Cookie, cacheable
N = 1024: kept 1, no Set-Cookie, cacheable
N = 1025: ValueError: buckets is 1025, not 0 (off) or 2 to 1024
N = 1024, dw_bucket=1023: kept 1023, no Set-Cookie, cacheable
N = 2, dw_bucket=2: drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
-- a change of N: a bucket below the new N is kept, one at or above it re-drawn
N 16 -> 4, dw_bucket=3: kept 3, no Set-Cookie, cacheable
N 16 -> 4, dw_bucket=4: drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
N 16 -> 4, dw_bucket=15: drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
N 4 -> 16, dw_bucket=3: kept 3, no Set-Cookie, cacheable
N 1024 -> 1000, dw_bucket=999: kept 999, no Set-Cookie, cacheable
N 1024 -> 1000, dw_bucket=1000: drawn (not canonical for N), Set-Cookie of that bucket, NOT cached
1024 -> 1000: every bucket within mean 100 +- 6 sigma: yes; buckets 0..23 hold about the mean
-- draws are uniform: 16,000 new visitors at N = 16
every bucket within 1000 +- 5 sigma (153): yes
-- Secure
no HTTPS                                   plain
HTTPS=on                                   Secure
HTTPS=1                                    Secure
HTTPS=off                                  plain
HTTPS=OFF                                  plain
HTTPS empty                                plain
X-Forwarded-Proto, no trusted proxy        plain
X-Forwarded-Proto, trusted peer            Secure
X-Forwarded-Proto HTTPS, trusted peer      Secure
X-Forwarded-Proto "https, http"            Secure
X-Forwarded-Proto "http, https"            plain
X-Forwarded-Proto http                     plain
X-Forwarded-Proto, untrusted peer          plain
X-Forwarded-Proto, peer in 10/8            Secure
X-Forwarded-Proto, peer 11.0.0.1           plain
X-Forwarded-Proto, peer ::ffff:10.1.2.3    Secure
X-Forwarded-Proto, peer 2001:db8::1        Secure
X-Forwarded-Proto, peer 2001:db9::1        plain
X-Forwarded-Proto, no REMOTE_ADDR          plain
X-Forwarded-Proto, /33                     plain
X-Forwarded-Proto, /07                     plain
X-Forwarded-Proto, 127.0.0.0/31 .1         Secure
X-Forwarded-Proto, 127.0.0.0/31 .2         plain
X-Forwarded-Proto, 128.0.0.0/1 .1          plain
X-Forwarded-Proto, 0.0.0.0/0               Secure
X-Forwarded-Proto, a host name             plain
X-Forwarded-Proto, list over 4096 bytes    plain
CF-Visitor https, trusted peer             Secure
CF-Visitor http, trusted peer              plain
CF-Visitor https, untrusted peer           plain
CF-Visitor not JSON, trusted peer          plain
