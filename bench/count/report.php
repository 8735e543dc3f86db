<?php
/*
 * The Markdown section of bench/13-count-load.sh from its raw results:
 * `php report.php RAW_DIR` (params.json, cli.jsonl, children.jsonl, http.jsonl,
 * memory.jsonl, load-end.txt). Medians over rounds, with the rounds' min-max beside them;
 * every ratio compares figures of this one run.
 */
$raw = $argv[1];
$params = json_decode((string) @file_get_contents("$raw/params.json"), true) ?: [];
$rows = static function (string $name) use ($raw): array {
    $out = [];
    foreach (@file("$raw/$name", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
        $out[] = json_decode($line, true);
    }
    return $out;
};
$median = static function (array $v): float {
    if ($v === []) {
        return NAN;
    }
    sort($v);
    $n = count($v);
    return $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2;
};
$f = static fn (float $x, int $d = 1): string => is_nan($x) ? '-' : number_format($x, $d, '.', ',');
$spread = static fn (array $v, int $d = 1): string => $v === [] ? '-' : $f(min($v), $d) . '-' . $f(max($v), $d);
$met = static fn (float $v, float $target): string => is_nan($v) ? 'not measured' : ($v <= $target ? 'met' : 'not met');
$load = trim((string) @file_get_contents("$raw/load-end.txt"));

echo "## Counting answers under load: two processes, eight lsphp children, CPU per request, memory\n\n";
printf("How measured: `bench/13-count-load.sh`, %s, %d rounds, each alternating `dw_router.count_answers=1` and `=0`\n", $params['measured'] ?? '?', $params['rounds'] ?? 0);
echo "(the order turns every round); medians over the rounds, min-max beside them. Load average\n";
printf("%s at the start, %s at the end: the box is shared (2 CPUs, other engineers' builds and\n", $params['load_start'] ?? '?', $load ?: '?');
echo "test runs), so wall-clock figures carry their noise; CPU times are the processes' own.\n";
if (($params['perf'] ?? 'none') !== 'cycles') {
    echo "**No hardware counters here** (`perf stat -e cycles` is not supported on this virtual machine,\n";
    echo "and the devenv has no perf): per-call cost is the process's CPU time from `getrusage()` over\n";
    echo "the loop, the closest measure to cycles (it excludes time spent waiting for a CPU).\n";
}
echo "\n";

// 1. CLI
$cli = $rows('cli.jsonl');
if ($cli !== []) {
    printf("**1. Two processes counting at once.** PHP CLI, 250 regions, `resolve('%s')` (memoised, no sticky\n", $params['geo'] ?? 'DE');
    printf("key) %s times per process after a warm-up; `one`: one process on the last CPU; `two`: one\n", $f($params['n_cli'] ?? 0, 0));
    echo "on each CPU at once, both counting into the same counter file (a slot each). Per call:\n\n";
    echo "| count_answers | one alone: CPU ns | two at once: CPU ns | two / one | one alone: wall ns | two at once: wall ns |\n";
    echo "|---|---|---|---|---|---|\n";
    $m = [];
    foreach ([0, 1] as $c) {
        $get = fn (string $mode, string $k): array => array_column(array_filter($cli, fn ($r) => $r['count'] === $c && $r['mode'] === $mode), $k);
        $m[$c] = ['one' => $median($get('one', 'cpu_ns')), 'two' => $median($get('two', 'cpu_ns'))];
        printf("| %d | %s (%s) | %s (%s) | %sx | %s (%s) | %s (%s) |\n", $c,
            $f($m[$c]['one']), $spread($get('one', 'cpu_ns')), $f($m[$c]['two']), $spread($get('two', 'cpu_ns')),
            $f($m[$c]['two'] / $m[$c]['one'], 3),
            $f($median($get('one', 'wall_ns'))), $spread($get('one', 'wall_ns')), $f($median($get('two', 'wall_ns'))), $spread($get('two', 'wall_ns')));
    }
    $onOff = $m[1]['two'] / $m[0]['two'];
    printf("\nCounting on / off, two at once: **%sx** (target ≤ 1.2x: %s); one alone: %sx.\n\n",
        $f($onOff, 3), $met($onOff, 1.2), $f($m[1]['one'] / $m[0]['one'], 3));
}

// 2. eight children
$children = $rows('children.jsonl');
if (is_file("$raw/no-litespeed.json")) {
    echo "**2-4. Not measured:** " . (json_decode(file_get_contents("$raw/no-litespeed.json"), true)['no_litespeed'] ?? 'no LiteSpeed') . "\n";
    exit(0);
}
if ($children !== []) {
    printf("**2. Eight lsphp children answering one geo at once.** OpenLiteSpeed + lsphp (%d children, both\n", $params['children'] ?? 8);
    printf("CPUs, 250 regions), `spin.php` (`bench/count/`) resolving `%s` %s times per request; `eight`:\n", $params['geo'] ?? 'DE', $f($params['n_child'] ?? 0, 0));
    echo "eight such requests at once (eight children, four per CPU), `one`: one request alone. CPU ns per\n";
    echo "call, each child's own (`getrusage`), median over children and rounds:\n\n";
    echo "| count_answers | one child alone | eight at once | eight / one | children seen at once |\n";
    echo "|---|---|---|---|---|\n";
    $m = [];
    foreach ([0, 1] as $c) {
        $get = fn (string $mode): array => array_column(array_filter($children, fn ($r) => $r['count'] === $c && $r['mode'] === $mode), 'cpu_ns');
        $pids = [];
        foreach (array_filter($children, fn ($r) => $r['count'] === $c && $r['mode'] === 'eight') as $r) {
            $pids[$r['round']][$r['pid']] = true;
        }
        $distinct = $pids === [] ? 0 : min(array_map('count', $pids));
        $counting = array_values(array_unique(array_column(array_filter($children, fn ($r) => $r['count'] === $c), 'counting')));
        $m[$c] = ['one' => $median($get('one')), 'eight' => $median($get('eight'))];
        printf("| %d%s | %s (%s) | %s (%s) | %sx | %d |\n", $c, $counting === [(bool) $c] ? '' : ' (counting: ' . json_encode($counting) . '!)',
            $f($m[$c]['one']), $spread($get('one')), $f($m[$c]['eight']), $spread($get('eight')), $f($m[$c]['eight'] / $m[$c]['one'], 3), $distinct);
    }
    $onOff = $m[1]['eight'] / $m[0]['eight'];
    printf("\nCounting on / off, eight at once: **%sx** (target ≤ 1.2x: %s); one alone: %sx.\n\n",
        $f($onOff, 3), $met($onOff, 1.2), $f($m[1]['one'] / $m[0]['one'], 3));
}

// 3. CPU per request
$http = $rows('http.jsonl');
if ($http !== []) {
    printf("**3. CPU per request behind OpenLiteSpeed.** `php/front.php`, 250 regions, `wrk -c8` for %d s per\n", $params['seconds'] ?? 0);
    echo "round over 22-lsphp's \"countries\" geos; OpenLiteSpeed and lsphp (8 children) pinned to the last CPU, wrk\n";
    echo "to the other; CPU µs per request = the server processes' own user + system time (`/proc/PID/stat`,\n";
    echo "with reaped children) over the requests wrk completed.\n\n";
    echo "| count_answers | CPU µs / request: median | rounds | spread (max - min) | req/s: median | errors |\n";
    echo "|---|---|---|---|---|---|\n";
    $m = $s = [];
    foreach ([0, 1] as $c) {
        $sel = array_values(array_filter($http, fn ($r) => $r['count'] === $c));
        $us = array_column($sel, 'cpu_us');
        $m[$c] = $median($us);
        $s[$c] = $us === [] ? NAN : max($us) - min($us);
        printf("| %d | %s | %s | %s | %s | %d |\n", $c, $f($m[$c], 2), implode(', ', array_map(fn ($x) => $f($x, 2), $us)),
            $f($s[$c], 2), $f($median(array_column($sel, 'rps')), 0), array_sum(array_column($sel, 'errors')));
    }
    $diff = $m[1] - $m[0];
    $within = abs($diff) <= max($s[0], $s[1]);
    printf("\nCounting on - off: **%s µs per request** (%s%%), %s the round-to-round spread (%s µs, the larger of the two).\n\n",
        ($diff >= 0 ? '+' : '') . $f($diff, 2), $f(100 * $diff / $m[0], 1), $within ? 'within' : '**outside**', $f(max($s[0], $s[1]), 2));
}

// 4. memory
$memory = $rows('memory.jsonl');
if ($memory !== []) {
    echo "**4. Private memory per lsphp child at 2,500 regions** (8 children, preload on, `wrk -c8` for 2 s over\n";
    echo "22-lsphp's geo rotation, then USS = Private_Clean + Private_Dirty from `smaps_rollup`, mean of the children).\n";
    echo "`routing-off`: the extension loaded, the page without routing (`DW_ROUTING=off`).\n\n";
    echo "| variant | children | USS KiB: mean | min-max | over routing-off |\n";
    echo "|---|---|---|---|---|\n";
    $mean = [];
    foreach (['routing-off', 'count-off', 'count-on'] as $v) {
        $uss = array_column(array_filter($memory, fn ($r) => $r['variant'] === $v), 'uss_kb');
        $mean[$v] = $uss === [] ? NAN : array_sum($uss) / count($uss);
        printf("| %s | %d | %s | %s | %s |\n", $v, count($uss), $f($mean[$v], 0), $spread($uss, 0),
            $v === 'routing-off' ? '' : ($mean[$v] - $mean['routing-off'] >= 0 ? '+' : '') . $f($mean[$v] - $mean['routing-off'], 0));
    }
    $added = $mean['count-on'] - $mean['routing-off'];
    printf("\nRouting with counting on adds **%s KiB** per child (target ≤ 256 KiB: %s); counting on over off: %s KiB.\n",
        $f($added, 0), $met($added, 256), ($mean['count-on'] - $mean['count-off'] >= 0 ? '+' : '') . $f($mean['count-on'] - $mean['count-off'], 0));
    // Visitor buckets (issue 41): the same with N = 1024 and stored assignments.
    $bucketed = [];
    foreach (['count-off-page', 'count-off-buckets', 'count-on-buckets'] as $v) {
        $uss = array_column(array_filter($memory, fn ($r) => $r['variant'] === $v), 'uss_kb');
        if ($uss !== []) {
            $bucketed[$v] = $uss;
        }
    }
    if ($bucketed !== []) {
        $runs = trim((string) @file_get_contents("$raw/bucket-snapshot.txt"));
        printf("\nWith visitor buckets: the same 2,500 regions with `policy/global`'s `buckets` at 1024 and every\n"
            . "multi-origin region a stored assignment of realistic runs (`bench/count/bucket-snapshot.php`: 30 random\n"
            . "drains, restores, sheds and weight sets reassigned from 50 each, then the value's weights; %s), the\n"
            . "table preloaded in MINIT; the page `bench/count/bucketed.php` resolves each request's geo with a random\n"
            . "bucket, so a child answers many (region, origin) pairs where a plain visitor of a geo reaches one. The\n"
            . "mean hides children that served little: the largest child is the figure to hold to the target.\n"
            . "`count-off-page`: that page on the table without buckets (counting off), its own cost: the control.\n\n",
            $runs === '' ? 'runs not recorded' : preg_replace('/^bucket-snapshot: /', '', $runs));
        echo "| variant | children | USS KiB: mean | min-max | mean over the control | largest over the control's |\n";
        echo "|---|---|---|---|---|---|\n";
        $control = $bucketed['count-off-page'] ?? [];
        $cMean = $control === [] ? NAN : array_sum($control) / count($control);
        $cMax = $control === [] ? NAN : max($control);
        $sign = static fn (float $x): string => ($x >= 0 ? '+' : '') . $f($x, 0);
        foreach ($bucketed as $v => $uss) {
            $m = array_sum($uss) / count($uss);
            printf("| %s | %d | %s | %s | %s | %s |\n", $v, count($uss), $f($m, 0), $spread($uss, 0),
                $v === 'count-off-page' ? '' : $sign($m - $cMean), $v === 'count-off-page' ? '' : $sign(max($uss) - $cMax));
        }
        if (isset($bucketed['count-on-buckets']) && $control !== []) {
            $on = $bucketed['count-on-buckets'];
            $byBuckets = array_sum($on) / count($on) - $cMean;
            $estimate = $mean['count-on'] - $mean['routing-off'] + max(0.0, $byBuckets);
            printf("\nVisitor buckets with counting on add %s KiB per child over the same page without them (mean; the\n"
                . "largest child %s KiB), so routing with buckets and counting costs at most about %s KiB per child (count-on\n"
                . "over routing-off plus that, none taken off when negative: counting counted twice, on the safe side): target ≤ 256 KiB %s. The assignments themselves are in\n"
                . "the table preloaded in MINIT, shared by the children.\n",
                $sign($byBuckets), $sign(max($on) - $cMax), $f($estimate, 0), $met($estimate, 256));
        }
    }
}
