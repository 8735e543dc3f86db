<?php

declare(strict_types=1);

/*
 * Writes crates/routing/tests/bucket-cases.json, the visitor-bucket cases that
 * dw_routing::buckets (crates/routing/tests/it/bucket_cases.rs) and php/Buckets.php
 * (tests/differential/twin-selftest.php) are both held to, bit for bit: counts, encoded
 * assignments and error messages.
 *
 * Two kinds of case:
 *   - by hand: every expectation below marked so was worked out by hand from
 *     docs/routing.md ("Buckets"), not computed by either implementation;
 *   - seeded: 40 sequences of random changes (mt_srand(41)) whose expectations are what
 *     php/Buckets.php computes when this script runs; the Rust side must then give the
 *     same bytes. Their properties (exact counts, moves = sum of the decreases) are
 *     checked by the Rust property tests (crates/routing/tests/it/buckets.rs) and again
 *     below before the file is written.
 *
 *   scripts/devenv exec -- php tests/differential/bucket-cases.php > crates/routing/tests/bucket-cases.json
 */

require_once __DIR__ . '/../../php/Buckets.php';
require_once __DIR__ . '/../lib/bucket-properties.php';

use DwRouter\BucketError;
use DwRouter\Buckets;

$counts = [];
foreach ([2 => null, 1024 => null, 1 => 'is 1, not an integer from 2 to 1024', 1025 => 'is 1025, not an integer from 2 to 1024',
    0 => 'is 0, not an integer from 2 to 1024', -1 => 'is -1, not an integer from 2 to 1024'] as $n => $error) {
    $counts[] = $error === null ? ['n' => $n] : ['n' => $n, 'error' => "policy: field `buckets`: $error"];
}

// By hand: quotas w * n / S, floors, leftover to the largest remainder w * n mod S, ties first listed.
$noWeight = 'region: field `weight`: no listed origin has a positive weight';
$apportion = [
    [[50, 30, 20], 10, [5, 3, 2]],
    [[1, 1, 1], 10, [4, 3, 3]],          // 3.33 each, one left over: the first
    [[1, 1, 1], 2, [1, 1, 0]],           // 0.67 each, two left over: the first two
    [[1, 1, 1], 1024, [342, 341, 341]],
    [[2, 1], 4, [3, 1]],                 // 2.67, 1.33: remainders 2 and 1
    [[0, 5], 4, [0, 4]],
    [[3, 3, 2], 3, [1, 1, 1]],           // 1.125, 1.125, 0.75: remainders 1, 1, 6
    [[5, 5], 3, [2, 1]],                 // 1.5 each: the first
    [[1000000, 1], 1024, [1024, 0]],     // 1023 r 998977, 0 r 1024
    [[4294967295, 4294967295], 1024, [512, 512]],
    [[0, 0], 4, $noWeight],
    [[], 4, $noWeight],
    [[1, 1], 1, 'policy: field `buckets`: is 1, not an integer from 2 to 1024'],
];
$apportion = array_map(static fn (array $c): array => ['weights' => $c[0], 'n' => $c[1]]
    + (\is_string($c[2]) ? ['error' => $c[2]] : ['counts' => $c[2]]), $apportion);

// By hand: the canonical text form, read as hostile input.
$syntax = 'is not ORIGIN:COUNT (decimal integers of at most 5 digits, without sign or leading zeros)';
$decode = [
    ['0:5,1:5', 10, 2, null], ['1:2', 2, 2, null], ['0:1024', 1024, 1, null], ['1:1,0:1,1:1', 3, 2, null],
    ['', 2, 2, 'is empty'],
    ['01:2', 2, 2, "run 0 $syntax"], ['0:02', 2, 2, "run 0 $syntax"], ['+0:2', 2, 2, "run 0 $syntax"],
    ['-1:2', 2, 2, "run 0 $syntax"], ['0:1e2', 2, 2, "run 0 $syntax"], [' 0:2', 2, 2, "run 0 $syntax"],
    ['0:2 ', 2, 2, "run 0 $syntax"], ["0:2\n", 2, 2, "run 0 $syntax"], ['0:2,', 2, 2, "run 1 $syntax"],
    [',0:2', 2, 2, "run 0 $syntax"], ['0:1,,1:1', 2, 2, "run 1 $syntax"], ['0:1:1', 2, 2, "run 0 $syntax"],
    ['0', 2, 2, "run 0 $syntax"], [':2', 2, 2, "run 0 $syntax"], ['0:', 2, 2, "run 0 $syntax"],
    ['0;2', 2, 2, "run 0 $syntax"], ['0:1,1:100000', 2, 2, "run 1 $syntax"], ['000000:2', 2, 2, "run 0 $syntax"],
    ['0:1,2:1', 2, 2, 'run 1 gives origin 2; the region lists 2 origins'],
    ['0:1,99999:1', 2, 2, 'run 1 gives origin 99999; the region lists 2 origins'],
    ['0:0,1:2', 2, 2, 'run 0 counts no bucket'],
    ['0:1,0:1', 2, 2, 'run 1 gives origin 0 as the run before it does: one run'],
    ['0:1,1:2', 2, 2, "covers more than the policy's 2 buckets (at run 1)"],
    ['0:1', 2, 2, "covers 1 buckets, not the policy's 2"],
    ['0:512,1:512', 512, 2, "covers more than the policy's 512 buckets (at run 1)"],
    ['0:256,1:256', 1024, 2, "covers 512 buckets, not the policy's 1024"],
];
$longest = implode(',', array_map(static fn (int $b): string => (10000 + $b % 2) . ':1', range(0, 1023)));
$decode[] = [$longest, 1024, 10002, null];
$decode[] = [$longest . ',', 1024, 10002, 'is 8192 bytes; an encoded assignment is at most 8191'];
$decode = array_map(static fn (array $c): array => ['text' => $c[0], 'n' => $c[1], 'origins' => $c[2]]
    + ($c[3] === null ? ['want' => $c[0]] : ['error' => "region: field `buckets`: {$c[3]}"]), $decode);

// Sequences: a start (names, weights, N) whose default is `default`, then steps, each the
// new names and weights and the assignment after (reassign on an unchanged list,
// reassignByName otherwise) with the buckets moved, or the error (the next step starts
// from the last assignment).
$sequences = [];
$seq = static function (string $name, int $n, array $names, array $weights, string $default, array $steps) use (&$sequences): void {
    $sequences[] = ['name' => $name, 'n' => $n, 'origins' => $names, 'weights' => $weights, 'default' => $default,
        'steps' => array_map(static fn (array $s): array => ['origins' => $s[0], 'weights' => $s[1]]
            + (\is_int($s[3]) ? ['want' => $s[2], 'moved' => $s[3]] : ['error' => $s[2]]), $steps)];
};
// By hand (docs/routing.md, "Buckets": free surplus off the new default's blocks first,
// highest first; fill to the default's origin first, then in list order).
$seq('50/50: drain a, restore it: the same buckets back', 1024, ['a', 'b'], [50, 50], '0:512,1:512', [
    [['a', 'b'], [0, 50], '1:1024', 512], [['a', 'b'], [50, 50], '0:512,1:512', 512]]);
$seq('thirds: drain the middle one, restore it', 1024, ['a', 'b', 'c'], [1, 1, 1], '0:342,1:341,2:341', [
    [['a', 'b', 'c'], [1, 0, 1], '0:512,2:512', 341], [['a', 'b', 'c'], [1, 1, 1], '0:342,1:341,2:341', 341]]);
$seq('shed a by 40 %: 128 buckets of its 512 move, and back', 1024, ['a', 'b'], [50, 50], '0:512,1:512', [
    [['a', 'b'], [30, 50], '0:384,1:640', 128], [['a', 'b'], [50, 50], '0:512,1:512', 128]]);
$seq('N = 2, three origins in turn: one bucket a step, the same weights end elsewhere', 2, ['a', 'b', 'c'], [1, 1, 0], '0:1,1:1', [
    [['a', 'b', 'c'], [0, 1, 1], '2:1,1:1', 1], [['a', 'b', 'c'], [1, 0, 1], '2:1,0:1', 1], [['a', 'b', 'c'], [1, 1, 0], '1:1,0:1', 1]]);
$seq('an origin added in the middle takes one bucket off each', 4, ['a', 'b'], [1, 1], '0:2,1:2', [
    [['a', 'c', 'b'], [1, 2, 1], '0:1,1:2,2:1', 2]]);
$seq('an origin removed: its buckets go to the default blocks', 6, ['a', 'b', 'c'], [1, 1, 1], '0:2,1:2,2:2', [
    [['a', 'c'], [1, 1], '0:3,1:3', 2]]);
$seq('the list reordered: nothing moves, the indices follow', 4, ['a', 'b'], [1, 1], '0:2,1:2', [
    [['b', 'a'], [1, 1], '1:2,0:2', 0]]);
$seq('largest remainder\'s population paradox: draining an origin without a bucket moves another\'s', 2, ['a', 'b', 'c'], [3, 1, 1], '0:1,1:1', [
    [['a', 'b', 'c'], [3, 1, 0], '0:2', 1]]);
$seq('no history: a restore pulls toward the default block, not back to the drained buckets', 4, ['a', 'b'], [1, 1], '0:2,1:2', [
    [['b', 'a'], [1, 1], '1:2,0:2', 0], [['b', 'a'], [1, 0], '0:4', 2], [['b', 'a'], [1, 1], '0:2,1:2', 2]]);
$seq('every weight 0: refused, the next change starts from the last assignment', 4, ['a', 'b'], [1, 1], '0:2,1:2', [
    [['a', 'b'], [0, 0], $noWeight, null], [['a', 'b'], [1, 0], '0:4', 2]]);

// Seeded sequences, computed by php/Buckets.php.
mt_srand(41, MT_RAND_MT19937);
$pickN = static fn (): int => [2, 3, 5, 16, 100, 1000, 1024, mt_rand(2, 1024)][mt_rand(0, 7)];
$added = 0;
for ($s = 0; $s < 40; $s++) {
    $n = $pickN();
    $names = array_map(static fn (int $i): string => "o$i", range(0, mt_rand(0, 4)));
    do {
        $weights = array_map(static fn (): int => bucket_random_weight(), $names);
    } while (array_sum($weights) === 0);
    $assignment = Buckets::defaultAssignment($weights, $n);
    $start = [$names, $weights, Buckets::encode($assignment)];
    $steps = [];
    for ($k = mt_rand(2, 6); $k > 0; $k--) {
        [$newNames, $newWeights] = bucket_random_change($names, $weights, $added);
        try {
            $next = $newNames === $names ? Buckets::reassign($assignment, $newWeights)
                : Buckets::reassignByName($assignment, $names, $newNames, $newWeights);
        } catch (BucketError $e) {
            $steps[] = [$newNames, $newWeights, $e->getMessage(), null];
            continue;
        }
        // The properties, before anything is written: exact counts, moves = decreases.
        $problems = bucket_step_problems($assignment, $names, $next, $newNames, $newWeights);
        if ($problems !== []) {
            fwrite(STDERR, "sequence $s: " . implode('; ', $problems) . "\n");
            exit(1);
        }
        $moved = 0;
        foreach ($assignment as $b => $o) {
            $moved += (int) ($names[$o] !== $newNames[$next[$b]]);
        }
        $steps[] = [$newNames, $newWeights, Buckets::encode($next), $moved];
        [$names, $weights, $assignment] = [$newNames, $newWeights, $next];
    }
    $seq("seeded $s", $n, $start[0], $start[1], $start[2], $steps);
}

echo json_encode([
    'note' => 'Visitor-bucket cases (docs/routing.md, "Buckets"), checked against dw_routing::buckets by crates/routing/tests/it/bucket_cases.rs and against php/Buckets.php by tests/differential/twin-selftest.php. Written by tests/differential/bucket-cases.php: the cases not named "seeded" by hand, the seeded ones as php/Buckets.php computed them. Assignments in their text form; origins by index into the step\'s origins; a step with an error leaves the assignment as it was.',
    'counts' => $counts,
    'apportion' => $apportion,
    'decode' => $decode,
    'sequences' => $sequences,
], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR), "\n";
