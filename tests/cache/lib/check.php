<?php

declare(strict_types=1);

/*
 * The cache chaos checker (tests/cache/chaos). For every answer the clients recorded whose
 * request started once the last change had settled (SETTLE after the commit of the last
 * write begun before it, dwctl returning) and after the last fault had recovered (SETTLE
 * plus the agent's longest purge retry delay the fault could have caused, min(fault length,
 * --retry-max-ms), after it ended), recomputes the route from etcd's state of the routing
 * prefix at that write's revision (read back from etcd: a range at that revision) with the
 * userland twin, as the chaos checker does (tests/chaos/lib/twin.php), and compares shard
 * and origin; a sticky answer with its dw_sticky cookie's key. Whether LSCache served it
 * (hit) or PHP did (miss) does not matter: a cached page must be the answer of now.
 * An answer in flight when a write or a fault began is not checked (either table may answer).
 * Prints "CHECK ok|FAIL <what>" lines and the counts.
 *
 *   php check.php --log DIR --etcd URL [--settle-ms 3000] [--retry-max-ms 5000]
 *                 [--min-checked 100] [--min-hits 50] [--states FILE (instead of --etcd)]
 * DIR holds load-*.txt (start_us|end_us|geo|cookie|code|cache|rev|shard|origin, cookie
 * '-' for none), writes.log (begin_us end_us rc rev what...) and faults.log (kind begin_us
 * end_us).
 */

require __DIR__ . '/../../chaos/lib/twin.php';

$opts = getopt('', ['log:', 'etcd:', 'states:', 'settle-ms:', 'retry-max-ms:', 'min-checked:', 'min-hits:']);
$log = (string) ($opts['log'] ?? '.');
$etcd = rtrim((string) ($opts['etcd'] ?? 'http://127.0.0.1:2379'), '/');
// --states FILE: {"<rev>": {"<full key>": "<value>", ...}, ...} instead of etcd (check-test.php)
$states = isset($opts['states']) ? json_decode((string) file_get_contents((string) $opts['states']), true) : null;
$settle = 1000 * (int) ($opts['settle-ms'] ?? 3000);
$retryMax = 1000 * (int) ($opts['retry-max-ms'] ?? 5000);
$minChecked = (int) ($opts['min-checked'] ?? 100);
$minHits = (int) ($opts['min-hits'] ?? 50);
$fails = 0;
$check = function (bool $ok, string $what) use (&$fails): void {
    $ok || $fails++;
    echo $ok ? 'CHECK ok   ' : 'CHECK FAIL ', $what, "\n";
};

// ---- the writes and the faults ------------------------------------------------------------
$writes = []; // [begin, end, rc, rev, what]
foreach (@file("$log/writes.log", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $f = explode(' ', $line, 5);
    if (count($f) === 5 && ctype_digit($f[0]) && ctype_digit($f[1]) && ctype_digit($f[3])) {
        $writes[] = [(int) $f[0], (int) $f[1], $f[2], (int) $f[3], $f[4]];
    }
}
usort($writes, fn ($a, $b) => $a[0] <=> $b[0]);
$refused = array_filter($writes, fn ($w) => $w[2] !== '0');
$check($writes !== [] && $refused === [], sprintf('%d writes (the seed and the changes), all committed (dwctl exit 0)%s',
    count($writes), $refused === [] ? '' : ': refused: ' . implode('; ', array_map(fn ($w) => "$w[4] (exit $w[2])", $refused))));
$faults = []; // [kind, begin, end]
$kinds = [];
foreach (@file("$log/faults.log", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $f = explode(' ', $line);
    if (count($f) >= 3 && ctype_digit($f[1]) && ctype_digit($f[2])) {
        $faults[] = [$f[0], (int) $f[1], (int) $f[2]];
        $kinds[$f[0]] = ($kinds[$f[0]] ?? 0) + 1;
    }
}
ksort($kinds);

// ---- etcd's state at a revision, and the twin on it ----------------------------------------
$stateAt = function (int $rev) use ($etcd, $states): ?array {
    if (is_array($states)) {
        return is_array($states[(string) $rev] ?? null) ? dw_chaos_effective($states[(string) $rev], null)[0] : null;
    }
    $body = json_encode(['key' => base64_encode(DW_CHAOS_PREFIX), 'range_end' => base64_encode(substr(DW_CHAOS_PREFIX, 0, -1) . '0'),
        'revision' => $rev]);
    $ctx = stream_context_create(['http' => ['method' => 'POST', 'header' => "Content-Type: application/json\r\n",
        'content' => $body, 'timeout' => 10, 'ignore_errors' => true]]);
    $r = json_decode((string) @file_get_contents("$etcd/v3/kv/range", false, $ctx), true);
    if (!is_array($r) || !isset($r['header'])) {
        return null;
    }
    $state = [];
    foreach ($r['kvs'] ?? [] as $kv) {
        $state[base64_decode($kv['key'])] = base64_decode($kv['value'] ?? '');
    }
    return dw_chaos_effective($state, null)[0];
};

// ---- the answers ---------------------------------------------------------------------------
$answers = []; // [start, end, geo, cookie, code, cache, rev, shard, origin]
foreach (glob("$log/load-*.txt") ?: [] as $file) {
    foreach (file($file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
        $f = explode('|', $line);
        if (count($f) === 9 && ctype_digit($f[0]) && ctype_digit($f[1])) {
            $f[0] = (int) $f[0];
            $f[1] = (int) $f[1];
            $answers[] = $f;
        }
    }
}
$lastWrite = function (int $t) use ($writes): ?array {
    $found = null;
    foreach ($writes as $w) {
        if ($w[0] < $t) {
            $found = $w;
        }
    }
    return $found;
};
$recovering = function (int $t, int $end) use ($faults, $settle, $retryMax): bool {
    foreach ($faults as [, $b, $e]) {
        if ($b < $end && $t < $e + $settle + min($e - $b, $retryMax)) {
            return true;
        }
    }
    return false;
};
$need = []; // rev => [case => true]
$todo = []; // index => rev
$unsettled = 0;
$inFault = 0;
$hitsAll = 0;
foreach ($answers as $i => $a) {
    $a[5] === 'hit' && $hitsAll++;
    $w = $lastWrite($a[0]);
    // settled at its start, and no write began while it was in flight (it may answer from either)
    if ($w === null || $a[0] < $w[1] + $settle || $lastWrite($a[1]) !== $w) {
        $unsettled++;
        continue;
    }
    if ($recovering($a[0], $a[1])) {
        $inFault++;
        continue;
    }
    $todo[$i] = $w[3];
    $need[$w[3]][$a[2] . '|' . ($a[3] === '-' ? '~' : $a[3])] = true;
}
$twinDir = sys_get_temp_dir() . '/cache-chaos-twin-' . getmypid();
@mkdir($twinDir, 0755, true);
$expected = []; // rev => case => "shard origin"
$unread = [];
foreach ($need as $rev => $cases) {
    $kvs = $stateAt($rev);
    if ($kvs === null) {
        $unread[] = $rev;
        continue;
    }
    [$expected[$rev], $loaded] = dw_chaos_twin_routes($twinDir, $kvs, $rev, $cases);
    $loaded || $unread[] = $rev;
}
@rmdir($twinDir);
$check($unread === [], sprintf('etcd\'s state read back at the %d revisions answers were checked at%s', count($need),
    $unread === [] ? '' : ' (unread: ' . implode(' ', $unread) . ')'));

$checked = 0;
$hits = 0;
$wrong = 0;
$wrongHits = 0;
$shown = [];
$t0 = $answers === [] ? 0 : min(array_column($answers, 0));
foreach ($todo as $i => $rev) {
    [$start, , $geo, $cookie, $code, $cache, $arev, $shard, $origin] = $answers[$i];
    $want = $expected[$rev][$geo . '|' . ($cookie === '-' ? '~' : $cookie)] ?? null;
    if ($want === null) {
        continue;
    }
    $checked++;
    $cache === 'hit' && $hits++;
    if ($code !== '200' || "$shard $origin" !== $want) {
        $wrong++;
        $cache === 'hit' && $wrongHits++;
        count($shown) < 8 && $shown[] = sprintf('  wrong: %s cookie %s at +%d ms: %s %s rev %s "%s %s", want "%s" (etcd at rev %d)',
            $geo, $cookie, intdiv($start - $t0, 1000), $code, $cache ?: '-', $arev, $shard, $origin, $want, $rev);
    }
}
$faultText = $kinds === [] ? 'none' : implode(', ', array_map(fn ($k, $n) => "$k x$n", array_keys($kinds), $kinds));
printf("answers: %d (%d hits); unsettled after a change: %d; recovering from a fault: %d; checked: %d (%d hits); faults: %s\n",
    count($answers), $hitsAll, $unsettled, $inFault, $checked, $hits, $faultText);
foreach ($shown as $s) {
    echo $s, "\n";
}
$check($checked >= $minChecked && $hits >= $minHits,
    "enough settled answers to prove something: $checked checked (at least $minChecked), $hits of them hits (at least $minHits)");
$check($wrong === 0, "0 wrong: each settled answer is the twin's on etcd's state at its request ($wrong wrong, $wrongHits of them hits)");
echo "cchaos-check: checked $checked hits $hits wrong $wrong unsettled $unsettled recovering $inFault\n";
exit($fails === 0 ? 0 : 1);
