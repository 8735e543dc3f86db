<?php
/*
 * The verdicts of tests/autopilot/run over what the run recorded, one line each:
 * "ok WHAT", "bad WHAT" or "measured WHAT" (a figure reported, never a verdict).
 *   php check.php CONTROL_LOG AUTOPILOT_LOG WEIGHTS_LOG PHASES COUNTS...
 * CONTROL_LOG: "UNIX_TIME DE_RATE FR_RATE" per rate change; AUTOPILOT_LOG: the autopilot's
 * JSON events; WEIGHTS_LOG: "REVISION JSON" of every routing revision's DE and FR weights;
 * PHASES: JSON {ramp_start, ramp_end, down_end, restored} (unix seconds, restored null
 * when the weights did not come back); COUNTS: the drivers' per-second answers per origin.
 * Load in a second = the answers both nodes gave to the origin in that second; the checks
 * read a 3 s mean (sticky answers with random keys: one second's count is noisy).
 */
[, $controlLog, $autopilotLog, $weightsLog, $phasesJson] = $argv;
$countFiles = array_slice($argv, 5);
const TARGET = ['a' => 40.0, 'b' => 80.0, 'c' => 48.0];
const SHARE_A = 0.8; // a's weight in DE (80 of 100)
const RELIEF_BUDGET = 15; // seconds from crossing to a's load at or below target
const RESTORE_BUDGET = 30; // seconds from the ramp's end to the configured weights
$phases = json_decode(file_get_contents($phasesJson), true);

$load = []; // second => origin => answers
foreach ($countFiles as $file) {
    foreach (file($file, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
        $row = json_decode($line, true);
        foreach ($row['origins'] ?? [] as $origin => $n) {
            $load[$row['t']][$origin] = ($load[$row['t']][$origin] ?? 0) + $n;
        }
    }
}
ksort($load);
function mean3(array $load, int $s, string $origin): float
{
    return (($load[$s][$origin] ?? 0) + ($load[$s + 1][$origin] ?? 0) + ($load[$s + 2][$origin] ?? 0)) / 3;
}
$control = [];
foreach (file($controlLog, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
    [$t, $de, $fr] = preg_split('/\s+/', $line);
    $control[] = [(float) $t, (float) $de, (float) $fr];
}
$events = [];
foreach (file($autopilotLog, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
    $e = json_decode($line, true);
    if (is_array($e) && isset($e['event'])) {
        $e['t'] = isset($e['at']) ? (float) (new DateTimeImmutable($e['at']))->format('U.u') : 0.0;
        $events[] = $e;
    }
}
$acted = array_values(array_filter($events, fn ($e) => $e['event'] === 'acted'));
$out = fn (string $v, string $what) => print("$v $what\n");
$verdict = fn (bool $ok, string $what) => $out($ok ? 'ok' : 'bad', $what);

// Crossing: the first rate change that puts a's offered load over its target.
$crossing = null;
foreach ($control as [$t, $de]) {
    if ($t >= $phases['ramp_start'] && SHARE_A * $de > TARGET['a']) {
        $crossing = $t;
        break;
    }
}
$reliefs = array_values(array_filter($acted, fn ($e) => str_starts_with($e['kind'] ?? '', 'relieve') && ($e['origin'] ?? '') === 'a'));
if ($crossing === null || $reliefs === []) {
    $verdict(false, 'a relieved after its load crossed its target (crossing ' . var_export($crossing, true) . ', ' . count($reliefs) . ' reliefs)');
} else {
    $first = $reliefs[0];
    $relievedAt = null;
    for ($s = (int) ceil($first['t']); $s <= (int) $phases['down_end']; $s++) {
        if (mean3($load, $s, 'a') <= TARGET['a']) {
            $relievedAt = $s;
            break;
        }
    }
    $reacted = $first['t'] - $crossing;
    $verdict($reacted <= RELIEF_BUDGET, sprintf('first relief of a committed %.1f s after its offered load crossed the target (budget %d s; measured %.1f/s, predicted %.1f/s, target 40/s)',
        $reacted, RELIEF_BUDGET, $first['measured'] ?? -1, $first['predicted'] ?? -1));
    // The issue's budget: a relief of a rising load aims ahead by its trend
    // (--trend-horizon), so the first one brings a at or below target (docs/autopilot.md).
    $took = $relievedAt === null ? null : $relievedAt - $crossing;
    $verdict($took !== null && $took <= RELIEF_BUDGET, sprintf('a at or below target (3 s mean of its answers) %s s after its offered load crossed it (budget %d s)',
        $took === null ? 'never' : sprintf('%.1f', $took), RELIEF_BUDGET));
    // How long a stayed over target from the crossing to the ramp's end, and its peak.
    $over = 0; $peak = 0.0; $seconds = 0;
    for ($s = (int) ceil($crossing); $s + 2 <= (int) $phases['down_end']; $s++) {
        $m = mean3($load, $s, 'a');
        $seconds++;
        $over += $m > TARGET['a'] ? 1 : 0;
        $peak = max($peak, $m);
    }
    $out('measured', sprintf('a over target in %d of the %d seconds from crossing to the ramp down\'s end; its peak (3 s mean) %.1f/s, offered up to %.0f/s',
        $over, $seconds, $peak, SHARE_A * max(array_column($control, 1))));
}
foreach (['b', 'c'] as $origin) {
    $peak = 0.0;
    foreach (array_keys($load) as $s) {
        if ($s >= $phases['ramp_start'] && $s + 2 <= $phases['down_end'] + 40) {
            $peak = max($peak, mean3($load, $s, $origin));
        }
    }
    $verdict($peak <= TARGET[$origin], sprintf('%s stays at or below its target: peak %.1f/s (3 s mean), target %.0f/s', $origin, $peak, TARGET[$origin]));
}
$during = array_filter($acted, fn ($e) => $e['t'] >= $phases['ramp_start'] && $e['t'] <= $phases['down_end']);
$verdict(count($during) >= 1 && count($during) <= 3, sprintf('%d actions during the ramp (1 to 3): %s', count($during),
    implode(', ', array_map(fn ($e) => sprintf('%s %s at +%.0f s', $e['kind'], $e['origin'], $e['t'] - $phases['ramp_start']), $during)) ?: 'none'));
$backIn = $phases['restored'] === null ? null : $phases['restored'] - $phases['down_end'];
$verdict($backIn !== null && $backIn <= RESTORE_BUDGET, sprintf('configured weights back %s s after the ramp down (budget %d s: window 10 + restore-after 10 + evaluations)',
    $backIn === null ? 'never' : sprintf('%.1f', $backIn), RESTORE_BUDGET));
// Direction changes: per origin, the signs of its share's moves in each region over the
// revisions (weights are rescaled by a shed: 80/20 becomes 713/287), a shed then a give
// back being one change.
$series = [];
foreach (file($weightsLog, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
    [, $json] = explode(' ', $line, 2);
    foreach (json_decode($json, true) ?: [] as $geo => $weights) {
        $sum = array_sum($weights ?? []);
        foreach ($weights ?? [] as $origin => $w) {
            $series[$origin][$geo][] = $sum > 0 ? round($w / $sum, 6) : 0.0;
        }
    }
}
foreach ($series as $origin => $byGeo) {
    $signs = [];
    foreach ($byGeo as $values) {
        for ($i = 1; $i < count($values); $i++) {
            $d = $values[$i] <=> $values[$i - 1];
            if ($d !== 0 && end($signs) !== $d) {
                $signs[] = $d;
            }
        }
    }
    $verdict(count($signs) <= 2, sprintf('%s changes direction at most once (moves: %s)', $origin,
        $signs === [] ? 'none' : implode(' ', array_map(fn ($d) => $d > 0 ? 'up' : 'down', $signs))));
}
