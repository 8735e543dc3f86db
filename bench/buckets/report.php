<?php

declare(strict_types=1);

/*
 * bench/24-bucket-cache.sh's measured table: bench/buckets/measure.php's JSON lines (one per
 * configuration, buckets off first) as Markdown, measured beside the model.
 *
 *   php report.php MEASURED.jsonl
 */

$rows = [];
foreach (file($argv[1], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $rows[] = json_decode($line, true, 8, JSON_THROW_ON_ERROR);
}
if ($rows === []) {
    fwrite(STDERR, "report.php: no measured configuration in {$argv[1]}\n");
    exit(1);
}
$pct = fn (float $x) => sprintf('%.1f %%', 100 * $x);
echo "| buckets | requests | visitors (buckets seen) | model | ideal for the sequence sent | measured: `x-litespeed-cache: hit` | X-DW-Clock repeats | measured − model | seconds |\n";
echo "|---|---|---|---|---|---|---|---|---|\n";
$off = null;
foreach ($rows as $r) {
    $measured = $r['hits'] / $r['requests'];
    $off ??= $r['n'] === 0 ? $measured : null;
    printf("| %s | %s | %s | %s | %s | %s | %s | %+.1f points | %.0f |\n",
        $r['n'] === 0 ? 'off' : "N = {$r['n']}",
        number_format($r['requests']),
        $r['n'] === 0 ? '(no cookie)' : number_format($r['visitors']) . " ({$r['buckets_seen']})",
        $pct($r['model']),
        $pct($r['ideal_hits'] / $r['requests']),
        $pct($measured),
        $pct($r['clock_repeats'] / $r['requests']),
        100 * ($measured - $r['model']),
        $r['enrol_seconds'] + $r['run_seconds']);
}
echo "\n";
$bad = array_filter($rows, fn ($r) => $r['errors'] > 0 || $r['set_cookie_again'] > 0 || $r['hits'] !== $r['clock_repeats']);
foreach ($bad as $r) {
    printf("Note, %s: %d failed requests, %d responses set the cookie again, %d header hits beside %d clock repeats.\n",
        $r['n'] === 0 ? 'off' : "N = {$r['n']}", $r['errors'], $r['set_cookie_again'], $r['hits'], $r['clock_repeats']);
}
if ($bad === []) {
    echo "Every request answered 200, no returning visitor was sent a cookie again, and the hits counted by the header equal the X-DW-Clock repeats in every configuration.\n";
}
if ($off !== null) {
    $cost = [];
    foreach ($rows as $r) {
        if ($r['n'] !== 0) {
            $cost[] = sprintf('N = %d %.1f', $r['n'], 100 * ($off - $r['hits'] / $r['requests']));
        }
    }
    echo "\nMeasured cost in points beside buckets off: " . implode(', ', $cost) . ".\n";
}
