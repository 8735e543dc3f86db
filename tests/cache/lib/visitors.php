<?php

declare(strict_types=1);

/*
 * tests/cache/buckets' visitors (issue 41): plain HTTP/1.0 GETs on loopback from one
 * process (a connection each, no curl process per request), against OpenLiteSpeed +
 * lsphp with LSCache on and php/front.php as the page. Each phase prints `PASS text` or
 * `FAIL text` lines (the suite counts them) and keeps what it learnt in STATE (JSON).
 *
 *   php visitors.php new     STATE URL N V WEIGHTS  V new visitors (no cookie) on URL, N the
 *                                                   table's buckets, WEIGHTS the region's
 *                                                   origins in list order (`fra-a=50,...`)
 *   php visitors.php return  STATE URL [moved:O]    each visitor of STATE once with its
 *                                                   cookie: its first origin (moved:O: those
 *                                                   first on O another, the others their own)
 *   php visitors.php variants STATE URL             a warm pass over every cookie value,
 *                                                   twice, and cookie-less visitors: distinct
 *                                                   cached responses (X-DW-Clock) <= N + 1
 *   php visitors.php hostile STATE URL              issue 41's hostile dw_bucket headers, each
 *                                                   twice on a URL of its own, then every
 *                                                   bucket's visitor and a cookie-less one
 *
 * Every loop is bounded (V <= 100,000; 10 s a request).
 */

const GEO = 'DE';

/** @return array{status: int, headers: array<string, list<string>>} */
function get(string $url, array $headers): array
{
    $parts = parse_url($url);
    $path = ($parts['path'] ?? '/') . (isset($parts['query']) ? '?' . $parts['query'] : '');
    $socket = @stream_socket_client("tcp://{$parts['host']}:{$parts['port']}", $errno, $error, 10.0);
    if ($socket === false) {
        return ['status' => 0, 'headers' => ['x-error' => ["connect: $error"]]];
    }
    stream_set_timeout($socket, 10);
    $lines = ["GET $path HTTP/1.0", "Host: {$parts['host']}", 'CF-IPCountry: ' . GEO];
    foreach ($headers as $header) {
        $lines[] = $header;
    }
    fwrite($socket, implode("\r\n", $lines) . "\r\n\r\n");
    $response = (string) stream_get_contents($socket, 1 << 20);
    fclose($socket);
    [$head] = explode("\r\n\r\n", $response, 2) + [''];
    $headLines = explode("\r\n", $head);
    $status = preg_match('#^HTTP/\d\.\d (\d{3})#', $headLines[0] ?? '', $m) === 1 ? (int) $m[1] : 0;
    $parsed = [];
    foreach (array_slice($headLines, 1) as $line) {
        $colon = strpos($line, ':');
        if ($colon !== false) {
            $parsed[strtolower(substr($line, 0, $colon))][] = trim(substr($line, $colon + 1));
        }
    }

    return ['status' => $status, 'headers' => $parsed];
}

function one(array $response, string $name): string
{
    return $response['headers'][$name][0] ?? '';
}

/** The bucket a response set, when its Set-Cookie is exactly the helper's line; else null. */
function setBucket(array $response, int $n): ?int
{
    $set = $response['headers']['set-cookie'] ?? [];
    if (count($set) !== 1 || preg_match('/^dw_bucket=(0|[1-9][0-9]*); Max-Age=31536000; Path=\/; SameSite=Lax; HttpOnly$/', $set[0], $m) !== 1) {
        return null;
    }

    return (int) $m[1] < $n ? (int) $m[1] : null;
}

function hit(array $response): bool
{
    return str_starts_with(one($response, 'x-litespeed-cache'), 'hit');
}

$failed = 0;
function check(bool $ok, string $what): void
{
    global $failed;
    echo ($ok ? 'PASS ' : 'FAIL ') . $what . "\n";
    $failed += $ok ? 0 : 1;
}

[$phase, $stateFile, $url] = [$argv[1] ?? '', $argv[2] ?? '', $argv[3] ?? ''];
$state = is_file($stateFile) ? json_decode((string) file_get_contents($stateFile), true) : [];
$sep = str_contains($url, '?') ? '&' : '?';

switch ($phase) {
    case 'new':
        $n = (int) ($argv[4] ?? 0);
        $visitors = (int) ($argv[5] ?? 0);
        $weights = [];
        foreach (explode(',', $argv[6] ?? '') as $pair) {
            [$origin, $weight] = explode('=', $pair) + ['', '0'];
            $weights[$origin] = (int) $weight;
        }
        if ($n < 2 || $visitors < 1 || $visitors > 100000 || $weights === []) {
            fwrite(STDERR, "usage: new STATE URL N V WEIGHTS\n");
            exit(2);
        }
        $started = hrtime(true);
        $list = [];
        $bad = [];
        $assignment = [];
        $conflicts = 0;
        for ($i = 0; $i < $visitors; $i++) {
            $r = get($url, []);
            $bucket = setBucket($r, $n);
            $origin = one($r, 'x-dw-origin');
            $uncached = !hit($r) && one($r, 'cache-control') === 'private, no-store';
            if ($r['status'] !== 200 || $bucket === null || !$uncached || one($r, 'x-dw-bucket') !== (string) $bucket || !isset($weights[$origin])) {
                if (count($bad) < 5) {
                    $bad[] = json_encode($r['status'] === 200 ? array_intersect_key($r['headers'], array_flip(['set-cookie', 'cache-control', 'x-litespeed-cache', 'x-dw-origin', 'x-dw-bucket'])) : $r);
                }
                $list[] = null;
                continue;
            }
            if (isset($assignment[$bucket]) && $assignment[$bucket] !== $origin) {
                $conflicts++;
            }
            $assignment[$bucket] ??= $origin;
            $list[] = [$bucket, $origin];
        }
        $seconds = (hrtime(true) - $started) / 1e9;
        $good = count(array_filter($list));
        check($good === $visitors, sprintf('new visitors: %d of %d got a bucket in 0..%d set by the exact Set-Cookie line, on a page not cached (Cache-Control: private, no-store; not a hit), in %.1f s%s',
            $good, $visitors, $n - 1, $seconds, $bad === [] ? '' : '; e.g. ' . implode(' ', $bad)));
        check($conflicts === 0, "new visitors: one origin per bucket ($conflicts visitors answered otherwise than the first of their bucket)");
        // Shares: each origin's visitors within its weight's share +- (1/N + 3 sigma).
        $total = array_sum($weights);
        $counts = array_count_values(array_map(fn ($v) => $v[1], array_filter($list)));
        foreach ($weights as $origin => $weight) {
            $share = $weight / $total;
            $got = ($counts[$origin] ?? 0) / max(1, $good);
            $sigma = sqrt($share * (1 - $share) / max(1, $good));
            $allowed = 1 / $n + 3 * $sigma;
            check(abs($got - $share) <= $allowed, sprintf('share of %s: %.4f, weight share %.4f +- %.4f (1/N + 3 sigma)', $origin, $got, $share, $allowed));
        }
        ksort($assignment);
        echo 'assignment seen: ', json_encode($assignment), "\n";
        $state = ['n' => $n, 'visitors' => $list, 'assignment' => $assignment];
        file_put_contents($stateFile, json_encode($state));
        break;

    case 'return':
        $moved = str_starts_with($argv[4] ?? '', 'moved:') ? substr($argv[4], 6) : null;
        $wrong = 0;
        $hits = 0;
        $examples = [];
        $movedCount = 0;
        $now = [];
        $started = hrtime(true);
        foreach ($state['visitors'] as [$bucket, $first]) {
            $r = get($url, ["Cookie: dw_bucket=$bucket"]);
            $origin = one($r, 'x-dw-origin');
            $hits += hit($r) ? 1 : 0;
            $want = $moved !== null && $first === $moved ? $origin !== $moved && $origin !== '' : $origin === $first;
            $set = $r['headers']['set-cookie'] ?? [];
            if (!$want || $set !== [] || $r['status'] !== 200) {
                $wrong++;
                if (count($examples) < 5) {
                    $examples[] = "bucket $bucket: first $first, now '$origin'" . ($set === [] ? '' : ' (a Set-Cookie)');
                }
            }
            $movedCount += $origin !== $first ? 1 : 0;
            $now[$bucket] = $origin;
        }
        $seconds = (hrtime(true) - $started) / 1e9;
        $visitors = count($state['visitors']);
        $firstOn = count(array_filter($state['visitors'], fn ($v) => $moved !== null && $v[1] === $moved));
        ksort($now);
        echo 'assignment now: ', json_encode($now), "\n";
        if ($moved === null) {
            check($wrong === 0, sprintf('returning visitors: %d of %d got the origin of their first answer, no cookie set again (%d cache hits; %.1f s)%s',
                $visitors - $wrong, $visitors, $hits, $seconds, $examples === [] ? '' : '; ' . implode('; ', $examples)));
        } else {
            check($wrong === 0 && $movedCount === $firstOn, sprintf('after draining %s: exactly its %d visitors moved (%d moved; %d wrong; %d cache hits)%s',
                $moved, $firstOn, $movedCount, $wrong, $hits, $examples === [] ? '' : '; ' . implode('; ', $examples)));
        }
        break;

    case 'variants':
        $n = $state['n'];
        $clocks = [];
        $second = 0;
        for ($pass = 1; $pass <= 2; $pass++) {
            for ($b = 0; $b < $n; $b++) {
                $r = get($url, ["Cookie: dw_bucket=$b"]);
                $clocks[one($r, 'x-dw-clock')] = true;
                $second += $pass === 2 && hit($r) && one($r, 'x-dw-origin') === $state['assignment'][$b] ? 1 : 0;
            }
        }
        $cookieLess = 0;
        for ($i = 0; $i < 3; $i++) {
            $r = get($url, []);
            $cookieLess += !hit($r) && setBucket($r, $n) !== null ? 1 : 0;
        }
        check(count($clocks) <= $n + 1 && $second === $n, sprintf('variants: a warm pass over the %d cookie values, twice: %d distinct responses (X-DW-Clock) for the URL, at most N + 1 = %d; the second pass %d of %d hits naming their bucket\'s origin',
            $n, count($clocks), $n + 1, $second, $n));
        check($cookieLess === 3, "variants: cookie-less visitors are never served a cached page ($cookieLess of 3 set a cookie, not hits)");
        break;

    case 'hostile':
        $n = $state['n'];
        $cases = [
            '999' => ['Cookie: dw_bucket=999'], '-1' => ['Cookie: dw_bucket=-1'], '01' => ['Cookie: dw_bucket=01'],
            '1e2' => ['Cookie: dw_bucket=1e2'], 'N' => ["Cookie: dw_bucket=$n"], 'dot' => ['Cookie: dw.bucket=1'],
            'space' => ['Cookie: dw bucket=1'], 'upper case' => ['Cookie: DW_BUCKET=1'],
            'duplicate 1 then 2' => ['Cookie: dw_bucket=1; dw_bucket=2'], 'duplicate 1 then 1' => ['Cookie: dw_bucket=1; dw_bucket=1'],
            'dot then exact' => ['Cookie: dw.bucket=1; dw_bucket=2'], 'two headers: 1, 2' => ['Cookie: dw_bucket=1', 'Cookie: dw_bucket=2'],
            'a 4 KB value' => ['Cookie: dw_bucket=' . str_repeat('1', 4096)],
        ];
        $i = 0;
        foreach ($cases as $label => $headers) {
            $i++;
            $page = $url . $sep . 'hostile=' . $i . '-' . getmypid();
            $attack = [];
            $attackOk = true;
            for ($k = 0; $k < 2; $k++) {
                $r = get($page, $headers);
                $set = setBucket($r, $n);
                $attack[] = (hit($r) ? 'hit' : 'not hit') . ($set !== null ? ", set $set" : ', none set') . ' -> ' . one($r, 'x-dw-origin');
                // Either a new bucket, set and not cached, or (a header the page reads as one
                // valid bucket) that bucket's own origin.
                $routedBy = one($r, 'x-dw-bucket');
                $attackOk = $attackOk && $routedBy !== '' && one($r, 'x-dw-origin') === ($state['assignment'][(int) $routedBy] ?? '?')
                    && ($set !== null ? !hit($r) && (string) $set === $routedBy : true);
            }
            $wrong = [];
            for ($b = 0; $b < $n; $b++) {
                $r = get($page, ["Cookie: dw_bucket=$b"]);
                if (one($r, 'x-dw-origin') !== $state['assignment'][$b] || ($r['headers']['set-cookie'] ?? []) !== []) {
                    $wrong[] = "$b -> " . one($r, 'x-dw-origin');
                }
            }
            $r = get($page, []);
            $cookieLess = !hit($r) && setBucket($r, $n) !== null;
            check($attackOk && $wrong === [] && $cookieLess, sprintf('hostile %s: (attack twice: %s) then every bucket\'s visitor gets its own origin%s, a cookie-less one a new bucket, not a hit',
                $label, implode('; ', $attack), $wrong === [] ? '' : ' (NOT: ' . implode(', ', $wrong) . ')'));
        }
        break;

    default:
        fwrite(STDERR, "unknown phase '$phase'\n");
        exit(2);
}
exit($failed > 0 ? 1 : 0);
