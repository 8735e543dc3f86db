<?php

declare(strict_types=1);

/*
 * Checks the responses wrk recorded (record.lua): every one is 200 and carries a worker,
 * a clock and a revision > 0, and no worker's revision ever goes backwards (its answers
 * ordered by X-DW-Clock, the monotonic time it read the route: a worker answers one
 * request at a time). Prints a summary; exits 1 with the first violations otherwise.
 *
 *   php check-records.php RECORDS [MIN_DISTINCT_REVISIONS]
 */

require __DIR__ . '/../../lib/revision-order.php';

[, $path, $minRevisions] = $argv + [null, null, '1'];
$lines = file((string) $path, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES);
if ($lines === false || $lines === []) {
    echo "no records in $path\n";
    exit(1);
}
$problems = [];
$byWorker = [];
$revisions = [];
foreach ($lines as $n => $line) {
    $fields = explode(' ', $line);
    if (count($fields) !== 4 || $fields[0] !== '200' || !ctype_digit($fields[1]) || !ctype_digit($fields[2])
        || !ctype_digit($fields[3]) || (int) $fields[3] === 0) {
        $problems[] = "response $n: '$line' (want: 200 with worker, clock and revision > 0)";
        continue;
    }
    $byWorker[(int) $fields[1]][] = [(int) $fields[2], (int) $fields[3]];
    $revisions[(int) $fields[3]] = true;
}
$stepsBack = revision_steps_back($byWorker);
$backwards = count($stepsBack);
foreach (array_slice($stepsBack, 0, 5) as [$worker, $from, $to, $clock]) {
    $problems[] = "worker $worker went back from revision $from to $to (clock $clock)";
}
ksort($revisions);
printf("%d responses from %d workers, revisions seen: %s; %d went backwards\n",
    count($lines), count($byWorker), implode(',', array_keys($revisions)), $backwards);
if (count($revisions) < (int) $minRevisions) {
    $problems[] = sprintf('only %d distinct revisions served during the load, expected at least %d',
        count($revisions), (int) $minRevisions);
}
foreach (array_slice($problems, 0, 10) as $problem) {
    echo "  $problem\n";
}
exit($problems === [] ? 0 : 1);
