<?php

declare(strict_types=1);

/*
 * The one ordering rule the end-to-end and chaos checkers share: a worker answers one
 * request at a time, so ordered by X-DW-Clock (the monotonic time it read the route) its
 * revisions never go backwards.
 */

/**
 * Every step back in revision among each worker's answers, in clock order.
 *
 * @param array<int|string, list<array{int, int}>> $byWorker worker => its [clock, revision] answers
 * @return list<array{int|string, int, int, int}> [worker, revision before, revision after, clock]
 */
function revision_steps_back(array $byWorker): array
{
    $steps = [];
    foreach ($byWorker as $worker => $answers) {
        usort($answers, fn (array $a, array $b): int => $a[0] <=> $b[0]);
        $last = 0;
        foreach ($answers as [$clock, $revision]) {
            if ($revision < $last) {
                $steps[] = [$worker, $last, $revision, $clock];
            }
            $last = max($last, $revision);
        }
    }
    return $steps;
}
