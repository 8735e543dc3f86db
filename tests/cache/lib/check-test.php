<?php

declare(strict_types=1);

// Self-test of tests/cache/lib/check.php, the cache chaos checker, at its edges: which
// answers it checks (settled after a write, recovered after a fault, not in flight when
// either began), that it finds a wrong one, and its minimums. States come from a file
// (--states) instead of etcd. Prints "ok"/"FAIL" per case and "cache chaos check: N passed,
// M failed"; exit 1 on a failure.
$dir = sys_get_temp_dir() . '/cache-chaos-check-test-' . getmypid();
@mkdir($dir, 0755, true);
$region = fn (string $origin) => json_encode(['shard' => 'eu-1', 'origins' => [$origin], 'weight' => [$origin => 100]]);
$us = ['shard' => 'us-1', 'origins' => ['iad-a'], 'weight' => ['iad-a' => 100]];
file_put_contents("$dir/states.json", json_encode([
    '2' => ['/dw/routing/region/DE' => $region('fra-a'), '/dw/routing/region/US' => json_encode($us)],
    '3' => ['/dw/routing/region/DE' => $region('fra-b'), '/dw/routing/region/US' => json_encode($us)],
]));
// settle 3 s; the seed ends at 1.1 s (rev 2), a change at 10 s ends at 10.2 s (rev 3); a
// 1 s purge-down at 20 s (recovered at 21 + 3 + 1 = 25 s) and a 10 s agent-kill at 30 s
// (recovered at 40 + 3 + 5, the retry cap = 48 s)
file_put_contents("$dir/writes.log", "1000000 1100000 0 2 seed\n10000000 10200000 0 3 drain fra-a\n");
file_put_contents("$dir/faults.log", "purge-down 20000000 21000000\nagent-kill 30000000 40000000\n");
$answers = [
    // [start, end, cookie, code, cache, origin, what it is]
    [4_099_999, 4_110_000, '-', '200', 'hit', 'fra-a', 'unsettled: 1 us before the seed settled'],
    [4_100_000, 4_110_000, '-', '200', 'hit', 'fra-a', 'checked: the seed settled (the edge)'],
    [9_990_000, 10_010_000, '-', '200', 'miss', 'fra-b', 'unsettled: in flight when the change began'],
    [13_199_999, 13_210_000, '-', '200', 'hit', 'fra-a', 'unsettled: 1 us before the change settled'],
    [13_200_000, 13_210_000, '-', '200', 'hit', 'fra-b', 'checked: the change settled (the edge)'],
    [14_000_000, 14_010_000, '-', '200', 'hit', 'fra-a', 'checked, wrong: the drained origin from the cache'],
    [19_995_000, 20_005_000, '-', '200', 'hit', 'fra-b', 'recovering: in flight when the fault began'],
    [24_999_999, 25_010_000, '-', '200', 'hit', 'fra-a', 'recovering: 1 us before the fault recovered'],
    [25_000_000, 25_010_000, 'v1', '200', 'miss', 'fra-b', 'checked: recovered (the edge), sticky'],
    [26_000_000, 26_010_000, '-', '503', '', '', 'checked, wrong: not 200'],
    [47_999_999, 48_010_000, '-', '200', 'hit', 'fra-a', 'recovering: 1 us before the long fault recovered (retry cap)'],
    [48_000_000, 48_010_000, '-', '200', 'hit', 'fra-b', 'checked: the long fault recovered (the edge)'],
];
$passed = 0;
$failed = 0;
$case = function (bool $ok, string $what) use (&$passed, &$failed): void {
    $ok ? $passed++ : $failed++;
    echo $ok ? 'ok   ' : 'FAIL ', $what, "\n";
};
$run = function (array $answers, int $minChecked, int $minHits) use ($dir): array {
    $lines = '';
    foreach ($answers as [$start, $end, $cookie, $code, $cache, $origin]) {
        $lines .= "$start|$end|DE|$cookie|$code|$cache|2|" . ($code === '200' ? 'eu-1' : '') . "|$origin\n";
    }
    file_put_contents("$dir/load-0.txt", $lines);
    $cmd = sprintf('%s %s --log %s --states %s --min-checked %d --min-hits %d 2>&1', escapeshellarg(PHP_BINARY),
        escapeshellarg(__DIR__ . '/check.php'), escapeshellarg($dir), escapeshellarg("$dir/states.json"), $minChecked, $minHits);
    exec($cmd, $out, $rc);
    preg_match('/^cchaos-check: checked (\d+) hits (\d+) wrong (\d+) unsettled (\d+) recovering (\d+)$/m', implode("\n", $out), $m);
    return [$rc, array_map('intval', array_slice($m, 1)), implode("\n", $out)];
};

[$rc, $n, $out] = $run($answers, 6, 4);
$case($n === [6, 4, 2, 3, 3], 'counts: 6 checked (4 hits), 2 wrong, 3 unsettled, 3 recovering (got ' . json_encode($n) . ')');
$case($rc === 1 && str_contains($out, 'CHECK FAIL 0 wrong'), 'the wrong answers fail the check (exit 1)');
$case(str_contains($out, 'DE cookie - at +9900 ms: 200 hit rev 2 "eu-1 fra-a", want "eu-1 fra-b" (etcd at rev 3)'),
    'the wrong cached answer is shown with the state it was checked against');
$right = array_values(array_filter($answers, fn ($a) => !str_contains($a[6], 'wrong')));
[$rc, $n, $out] = $run($right, 4, 3);
$case($rc === 0 && $n === [4, 3, 0, 3, 3], 'without them: 4 checked, 0 wrong, exit 0 (got ' . json_encode($n) . ", exit $rc)");
[$rc, , $out] = $run($right, 5, 3);
$case($rc === 1 && str_contains($out, 'CHECK FAIL enough settled answers'), 'one checked answer fewer than the minimum fails');
[$rc, , $out] = $run($right, 4, 4);
$case($rc === 1 && str_contains($out, 'CHECK FAIL enough settled answers'), 'one hit fewer than the minimum fails');
foreach (['states.json', 'writes.log', 'faults.log', 'load-0.txt'] as $f) {
    @unlink("$dir/$f");
}
@rmdir($dir);
echo "cache chaos check: $passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
