<?php

declare(strict_types=1);

/*
 * bench/24-bucket-cache.sh's model: the page cache's hit ratio with visitor buckets, by N,
 * beside buckets off, under a Zipf page mix. A model, not a cache run: one geo, one TTL
 * window, a cache that keeps every variant for the window (no eviction, no purge), each
 * request a page drawn by Zipf(s) over P pages and a visitor whose bucket is uniform over N.
 * A variant (page, bucket) misses its first request in the window and hits after, so
 *
 *   hit ratio = 1 - E[distinct variants] / R,  E[distinct] = sum_p N (1 - (1 - q_p / N)^R)
 *
 * (buckets off: N = 1). New visitors' first pages (the ones that set dw_bucket) are never
 * cached whatever N is: a share f of such requests lowers every column by the same f and
 * is shown apart. A Monte Carlo run of the same model checks the closed form (the figures
 * agree to the stated tolerance, or the plug-in fails).
 *
 *   php hit-ratio.php [--quick]   prints the Markdown section body
 */

$quick = in_array('--quick', $argv, true);
$pages = 10000;
$exponents = [0.8, 1.0];
$windows = [10000, 100000, 1000000]; // requests per geo per TTL window
$ns = [1, 4, 16, 64, 256];

require __DIR__ . '/model.php';

$pct = fn (float $x) => sprintf('%.1f %%', 100 * $x);
echo "Hit ratio of one URL set in one geo over one TTL window (no eviction), by the requests\n";
echo "the window holds, beside buckets off. $pages pages, Zipf popularity.\n\n";
$table = [];
foreach ($exponents as $s) {
    $q = zipf($pages, $s);
    echo "**Zipf s = $s**\n\n";
    echo '| requests per window | off | ' . implode(' | ', array_map(fn ($n) => "N = $n", array_slice($ns, 1))) . " |\n";
    echo '|---|' . str_repeat('---|', count($ns)) . "\n";
    foreach ($windows as $r) {
        $row = [];
        foreach ($ns as $n) {
            $row[] = $table[(string) $s][$r][$n] = hitRatio($q, $n, $r);
        }
        echo '| ' . number_format($r) . ' | ' . implode(' | ', array_map($pct, $row)) . " |\n";
    }
    echo "\n";
}

// The closed form against a draw of the same model.
$checks = [];
$worst = 0.0;
$q = zipf($pages, 1.0);
$r = $quick ? 20000 : 100000;
foreach ([1, 16, 256] as $i => $n) {
    $model = hitRatio($q, $n, $r);
    $drawn = simulated($q, $n, $r, 41 + $i);
    $worst = max($worst, abs($model - $drawn));
    $checks[] = sprintf('N = %s: closed form %s, drawn %s', $n === 1 ? 'off' : $n, $pct($model), $pct($drawn));
}
echo 'Check, Zipf 1.0, ' . number_format($r) . ' requests drawn (seeded): ' . implode('; ', $checks)
    . sprintf('; largest gap %.2f points (tolerance 1.0).', 100 * $worst) . "\n\n";
$lose = fn (float $s, int $r, int $n) => 100 * ($table[(string) $s][$r][1] - $table[(string) $s][$r][$n]);
printf("The cost in points at Zipf 1.0, 100,000 requests per window: N = 4 %.1f, 16 %.1f, 64 %.1f, 256 %.1f.\n",
    $lose(1.0, 100000, 4), $lose(1.0, 100000, 16), $lose(1.0, 100000, 64), $lose(1.0, 100000, 256));
if ($worst > 0.01) {
    fwrite(STDERR, "the closed form and the draw differ by more than 1 point\n");
    exit(1);
}
