<?php

declare(strict_types=1);

/*
 * The page cache's hit-ratio model with visitor buckets (issue 41), shared by
 * bench/buckets/hit-ratio.php (the model's table and its seeded check) and
 * bench/buckets/measure.php (the same model beside LSCache's measured hits): Zipf page
 * popularity, the closed form 1 - E[distinct variants] / R, and a seeded draw of it.
 */

/** Zipf(s) probabilities over $pages pages, most popular first. */
function zipf(int $pages, float $s): array
{
    $w = [];
    for ($i = 1; $i <= $pages; $i++) {
        $w[] = 1.0 / ($i ** $s);
    }
    $sum = array_sum($w);

    return array_map(fn (float $x) => $x / $sum, $w);
}

/** The closed form's hit ratio. */
function hitRatio(array $q, int $n, int $requests): float
{
    $distinct = 0.0;
    foreach ($q as $p) {
        // N (1 - (1 - p/N)^R), with log1p/expm1 for small p/N.
        $distinct += -$n * expm1($requests * log1p(-$p / $n));
    }

    return 1.0 - $distinct / $requests;
}

/** The same model drawn: R requests, Zipf pages (by inverse CDF), uniform buckets. */
function simulated(array $q, int $n, int $requests, int $seed): float
{
    mt_srand($seed);
    $cdf = [];
    $acc = 0.0;
    foreach ($q as $p) {
        $acc += $p;
        $cdf[] = $acc;
    }
    $last = count($cdf) - 1;
    $seen = [];
    $hits = 0;
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
        $key = $lo * 2048 + mt_rand(0, $n - 1);
        if (isset($seen[$key])) {
            $hits++;
        } else {
            $seen[$key] = true;
        }
    }

    return $hits / $requests;
}
