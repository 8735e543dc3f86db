<?php
/*
 * A snapshot with visitor buckets on, for bench/13-count-load.sh's memory part:
 *   php bucket-snapshot.php IN OUT N CHANGES SEED
 * IN's policy/global gains `buckets: N`, and every region value with more than one listed
 * origin a stored assignment with realistic runs: its default for weights 50 each, then
 * CHANGES random dwctl-like changes (a drain, a restore, a shed by 40 %, a weight set),
 * each a Buckets::reassign of the one before, and last the value's own weights (so the
 * table reads it as stored, not stale). Prints the runs' mean and max on stderr.
 */
require __DIR__ . '/../../php/Buckets.php';

use DwRouter\Buckets;

[, $in, $out, $n, $changes, $seed] = $argv;
[$n, $changes] = [(int) $n, (int) $changes];
mt_srand((int) $seed);
$snapshot = json_decode(file_get_contents($in), true, 512, JSON_THROW_ON_ERROR);
$prefix = $snapshot['prefix'];
$policyKey = $prefix . 'policy/global';
$policy = json_decode($snapshot['kvs'][$policyKey] ?? '{}', true) ?: [];
$policy['buckets'] = $n;
$snapshot['kvs'][$policyKey] = json_encode($policy);
$runs = [];
foreach ($snapshot['kvs'] as $key => $raw) {
    if (!str_starts_with($key, $prefix . 'region/')) {
        continue;
    }
    $value = json_decode($raw, true);
    $origins = $value['origins'] ?? [];
    if (!is_array($origins) || count($origins) < 2) {
        continue;
    }
    $final = array_map(static fn ($o) => (int) ($value['weight'][$o] ?? 0), $origins);
    if (array_sum($final) === 0) {
        continue;
    }
    $weights = array_fill(0, count($origins), 50);
    $owners = Buckets::defaultAssignment($weights, $n);
    for ($c = 0; $c < $changes; $c++) {
        $i = mt_rand(0, count($origins) - 1);
        $next = $weights;
        $next[$i] = match (mt_rand(0, 3)) {
            0 => 0,                                  // drain
            1 => 50,                                 // restore
            2 => intdiv($weights[$i] * 60, 100),     // shed 40 %
            default => mt_rand(1, 100),              // a weight set
        };
        if (array_sum($next) === 0) {
            continue;
        }
        $owners = Buckets::reassign($owners, $next);
        $weights = $next;
    }
    $owners = Buckets::reassign($owners, $final);
    $text = Buckets::encode($owners);
    $runs[] = substr_count($text, ',') + 1;
    $value['buckets'] = $text;
    $snapshot['kvs'][$key] = json_encode($value, JSON_UNESCAPED_SLASHES);
}
file_put_contents($out, json_encode($snapshot, JSON_UNESCAPED_SLASHES));
fprintf(STDERR, "bucket-snapshot: %d regions assigned, runs mean %.1f, max %d\n",
    count($runs), $runs === [] ? 0 : array_sum($runs) / count($runs), $runs === [] ? 0 : max($runs));
