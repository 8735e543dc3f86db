<?php
/*
 * dwctl's predicted per-origin load against the load measured in Prometheus, for
 * tests/traffic-ops/capacity-real and make demo's capacity scene (tests/traffic-ops/capacity.sh).
 *   php capacity-compare.php MODE PLAN C0 C1 DRIVE WHAT
 * PLAN: the JSON of a dwctl change (`--output json`), its `prediction`. C0, C1: {origin:
 * answers} from Prometheus before and after DRIVE (capacity-drive.php's OUT: `total`
 * answers in `elapsed` seconds, every one of them counted between C0 and C1).
 * Compared as SHARES of all answers, so the rate does not matter: predicted `after / total`
 * against measured `(C1 - C0) / total`, bound max(5 % of the prediction, 1 % of all
 * traffic) (issue 32). Origins the prediction does not list are those whose load the
 * change leaves alone: their sum is predicted as `1 - listed / total - unplaced`, and
 * compared as one line. The sticky sampling error is printed beside: a drive of N answers
 * has N/2 sticky ones, each its own key (capacity-drive.php), and each key lands on an
 * origin independently with that origin's share p of its geo, so an origin's measured share
 * of all N has variance sum over keys of p(1 - p) / N^2 <= (N/2) / 4 / N^2: 3 sigma is at
 * most 3 sqrt(N/8) / N (0.75 % of all answers at N = 20,000).
 * MODE `verdicts`: one line per origin, "ok|bad WHAT: ORIGIN predicted P measured M (...)";
 * a plan without a prediction is one "bad" line. MODE `table`: predicted and measured loads
 * side by side (answers/s: the prediction's, and the drive's answers over its seconds), and
 * exit 1 if an origin is outside its bound. MODE `guard`: one line per origin with a
 * capacity in the plan, "ok|bad WHAT: ORIGIN ...": its measured load, measured share times
 * the prediction's total rate, is within the guard (headroom x capacity) up to the same
 * bound (max(5 % of the predicted share, 1 % of all traffic), times the total rate).
 */
[, $mode, $planFile, $c0File, $c1File, $driveFile, $what] = $argv + array_fill(0, 7, '');
$read = static fn (string $f) => json_decode((string) @file_get_contents($f), true);
$plan = $read($planFile)['prediction'] ?? null;
$c0 = $read($c0File) ?? [];
$c1 = $read($c1File) ?? [];
$drive = $read($driveFile) ?? [];
$n = (int) ($drive['total'] ?? 0);
if (!is_array($plan) || empty($plan['made']) || !(($plan['total'] ?? 0) > 0) || $n <= 0) {
    $why = is_array($plan) && isset($plan['why']) ? ": " . $plan['why'] : '';
    echo "bad $what: dwctl made a prediction and the drive counted answers$why\n";
    exit(1);
}
$total = (float) $plan['total'];
$rate = ($drive['elapsed'] ?? 0) > 0 ? $n / $drive['elapsed'] : null;
$sigma = 3 * sqrt($n / 8) / $n;
$measured = static fn (string $o) => (($c1[$o] ?? 0) - ($c0[$o] ?? 0)) / $n;

$rows = [];
$listed = 0.0;
foreach ($plan['origins'] as $o) {
    $listed += $o['after'];
    $rows[] = ['origin' => $o['origin'], 'before' => $o['before'] / $total, 'predicted' => $o['after'] / $total,
        'measured' => $measured($o['origin']), 'capacity' => $o['capacity'] ?? null, 'after_rate' => $o['after'],
        'before_rate' => $o['before']];
}
$names = array_column($plan['origins'], 'origin');
$others = array_values(array_filter(array_unique(array_merge(array_keys($c0), array_keys($c1))),
    static fn ($o) => $o !== '' && !in_array($o, $names, true) && ($c1[$o] ?? 0) > ($c0[$o] ?? 0)));
if ($others) {
    sort($others);
    $share = 1 - $listed / $total - (float) ($plan['unplaced_share'] ?? 0);
    $rows[] = ['origin' => implode('+', $others) . ' (unchanged)', 'before' => $share, 'predicted' => $share,
        'measured' => array_sum(array_map($measured, $others)), 'capacity' => null,
        'after_rate' => $share * $total, 'before_rate' => $share * $total];
}
$bad = 0;
foreach ($rows as &$r) {
    $r['bound'] = max(0.05 * $r['predicted'], 0.01);
    $r['ok'] = abs($r['measured'] - $r['predicted']) <= $r['bound'];
    $bad += $r['ok'] ? 0 : 1;
}
unset($r);

if ($mode === 'guard') {
    $headroom = (float) ($plan['headroom'] ?? 0);
    foreach ($rows as $r) {
        if (!is_numeric($r['capacity'])) {
            continue;
        }
        $limit = $headroom * (float) $r['capacity'];
        $load = $r['measured'] * $total;
        $slack = $r['bound'] * $total;
        printf("%s %s: %s measured %.0f/s, guard %.0f/s (%.2f x capacity %.0f; bound %.0f/s)\n",
            $load <= $limit + $slack && $headroom > 0 ? 'ok' : 'bad', $what, $r['origin'], $load, $limit,
            $headroom, $r['capacity'], $slack);
    }
    exit(0);
}
if ($mode === 'verdicts') {
    foreach ($rows as $r) {
        printf("%s %s: %s predicted %.4f measured %.4f (bound %.4f; sticky 3-sigma %.4f)\n",
            $r['ok'] ? 'ok' : 'bad', $what, $r['origin'], $r['predicted'], $r['measured'], $r['bound'], $sigma);
    }
    exit(0);
}
printf("  %-18s %-22s %-22s %-22s %s\n", 'origin', 'before (predicted)', 'after: predicted', 'after: measured', '');
foreach ($rows as $r) {
    $m = $rate === null ? '' : sprintf('%5.0f/s ', $r['measured'] * $rate);
    printf("  %-18s %5.0f/s %5.1f%%         %5.0f/s %5.1f%%         %s%5.1f%%         %s\n",
        $r['origin'], $r['before_rate'], 100 * $r['before'], $r['after_rate'], 100 * $r['predicted'],
        $m, 100 * $r['measured'], $r['ok'] ? 'within' : 'OUTSIDE');
}
printf("  (measured: %d answers in %.1f s, %s; within: |measured - predicted| <= max(5%% of the\n" .
    "   prediction, 1%% of all answers); sticky sampling error, 3 sigma: %.1f%% of all answers)\n",
    $n, $drive['elapsed'] ?? 0, $rate === null ? '' : sprintf('%.0f/s', $rate), 100 * $sigma);
exit($bad ? 1 : 0);
