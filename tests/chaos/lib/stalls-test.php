<?php

declare(strict_types=1);

// Self-test of tests/chaos/lib/stalls.php: which gaps the chaos checker counts apart.
// Prints "ok"/"FAIL" per case and "stalls: N passed, M failed"; exit 1 on a failure.
require __DIR__ . '/stalls.php';

$s = 1_000_000_000;
$faults = [
    ['kill-lsphp', '3', 10 * $s, 12 * $s],
    ['restart-pool', '3', 30 * $s, 31 * $s],
    ['kill-lsphp', '2', 50 * $s, 51 * $s],
];
$cases = [
    // [what, node, from, to, counted apart]
    ['a stall across the kill on its node', 3, 9 * $s, 70 * $s, true],
    ['a stall that begins during the kill', 3, 11 * $s, 20 * $s, true],
    ['a stall that begins 1 s after the kill healed (the edge)', 3, 13 * $s, 20 * $s, true],
    ['a stall that begins 1 ns past that edge', 3, 13 * $s + 1, 20 * $s, false],
    ['a stall that ends when the kill starts (the edge)', 3, 7 * $s, 10 * $s, true],
    ['a stall that ends 1 ns before the kill', 3, 7 * $s, 10 * $s - 1, false],
    ['a stall across the kill, on another node', 1, 9 * $s, 70 * $s, false],
    ['a stall across a restart-pool', 3, 29 * $s, 40 * $s, false],
    ['a stall across node 2\'s kill, on node 2', 2, 49 * $s, 60 * $s, true],
    ['no faults at all', 3, 9 * $s, 70 * $s, false, []],
];
$passed = $failed = 0;
foreach ($cases as $case) {
    [$what, $node, $from, $to, $want] = $case;
    $got = dw_chaos_spans_kill_lsphp($case[5] ?? $faults, $node, $from, $to);
    if ($got === $want) {
        $passed++;
        echo "ok    $what\n";
    } else {
        $failed++;
        printf("FAIL  %s: counted apart %s, want %s\n", $what, var_export($got, true), var_export($want, true));
    }
}
echo "stalls: $passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
