<?php

declare(strict_types=1);

/*
 * The properties of a visitor-bucket change (docs/routing.md, "Buckets") on the PHP side,
 * the same as crates/routing/tests/it/buckets.rs asserts on the Rust side, and the random
 * changes they are tried on (mt_rand: seed it first): used by
 * tests/differential/bucket-cases.php before it writes a seeded case, and by the twin's
 * self-test on sequences of its own.
 */

require_once __DIR__ . '/../../php/Buckets.php';

use DwRouter\Buckets;

/**
 * What is wrong with the step from $before (indexing $names) to $after (indexing
 * $newNames, weights $newWeights): [] when the counts are exactly the apportionment, the
 * buckets moved are the sum of the origins' decreases, each from an origin whose count
 * fell to one whose count rose, and the text form reads back the same.
 *
 * @param list<int> $before
 * @param list<string> $names
 * @param list<int> $after
 * @param list<string> $newNames
 * @param list<int> $newWeights
 * @return list<string>
 */
function bucket_step_problems(array $before, array $names, array $after, array $newNames, array $newWeights): array
{
    $n = \count($before);
    $problems = [];
    $want = Buckets::apportion($newWeights, $n);
    $got = array_fill(0, \count($newNames), 0);
    foreach ($after as $origin) {
        $got[$origin]++;
    }
    if ($got !== $want || \count($after) !== $n) {
        $problems[] = 'counts ' . json_encode($got) . ', not ' . json_encode($want);
    }
    $old = array_fill_keys($names, 0);
    foreach ($before as $origin) {
        $old[$names[$origin]]++;
    }
    $new = array_fill_keys($newNames, 0);
    foreach ($after as $origin) {
        $new[$newNames[$origin]]++;
    }
    $decreases = 0;
    foreach ($old as $name => $count) {
        $decreases += max(0, $count - ($new[$name] ?? 0));
    }
    $moved = 0;
    foreach ($before as $bucket => $origin) {
        [$from, $to] = [$names[$origin], $newNames[$after[$bucket]]];
        if ($from === $to) {
            continue;
        }
        $moved++;
        if (($new[$from] ?? 0) >= $old[$from] || $new[$to] <= ($old[$to] ?? 0)) {
            $problems[] = "bucket $bucket moved from $from to $to";
        }
    }
    if ($moved !== $decreases) {
        $problems[] = "$moved buckets moved, the decreases sum to $decreases";
    }
    if (Buckets::decode(Buckets::encode($after), $n, \count($newNames)) !== $after) {
        $problems[] = 'the text form does not read back';
    }

    return $problems;
}

/** A weight: 0 one time in four, else small (1 to 10) or large (to 1,000,000) alike. */
function bucket_random_weight(): int
{
    return mt_rand(0, 3) === 0 ? 0 : (mt_rand(0, 1) === 0 ? mt_rand(1, 10) : mt_rand(1, 1000000));
}

/**
 * One change as dwctl makes it, at random: every weight set, an origin drained, restored,
 * shed by 1 to 99 %, added (named `new<$added>`), removed (unless it is the last), or the
 * list shuffled. The result may have no positive weight (reassign refuses it).
 *
 * @param list<string> $names
 * @param list<int> $weights
 * @return array{0: list<string>, 1: list<int>}
 */
function bucket_random_change(array $names, array $weights, int &$added): array
{
    [$newNames, $newWeights] = [$names, $weights];
    $i = mt_rand(0, \count($names) - 1);
    switch (mt_rand(0, 6)) {
        case 0:
            $newWeights = array_map(static fn (): int => bucket_random_weight(), $names);
            break;
        case 1:
            $newWeights[$i] = 0;
            break;
        case 2:
            $newWeights[$i] = mt_rand(1, 1000);
            break;
        case 3:
            $newWeights[$i] = intdiv($weights[$i] * (100 - mt_rand(1, 99)), 100);
            break;
        case 4:
            $at = mt_rand(0, \count($names));
            array_splice($newNames, $at, 0, ['new' . ++$added]);
            array_splice($newWeights, $at, 0, [bucket_random_weight()]);
            break;
        case 5:
            if (\count($names) > 1) {
                array_splice($newNames, $i, 1);
                array_splice($newWeights, $i, 1);
            }
            break;
        case 6:
            $order = range(0, \count($names) - 1);
            shuffle($order);
            $newNames = array_map(static fn (int $j): string => $names[$j], $order);
            $newWeights = array_map(static fn (int $j): int => $weights[$j], $order);
            break;
    }

    return [$newNames, $newWeights];
}
