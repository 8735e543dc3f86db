<?php
/*
 * The traffic of tests/traffic-ops/run's real node: one PHP process with the extension
 * (dw_router.count_answers=1, the node's answers directory) answering resolve() at steady
 * rates for a while, so that its counter file, read by dw-agent and scraped by Prometheus,
 * has known rates behind it.
 *   php node.php SNAPSHOT SECONDS OUT
 * Per second: DE 20 (3 of them with a sticky key), FR 6, US 4, ZZ 1 (no region of its own:
 * the policy's default), and JP 1 answered fail-open (a router whose snapshot does not
 * exist), in 20 ticks of 50 ms. Writes OUT (JSON) when done: the answers
 * given per origin, per geo and per "geo origin", their total, and the seconds taken.
 */
[, $snapshot, $seconds, $out] = $argv;
$seconds = (float) $seconds;
$router = new RegionRouter($snapshot);
// A router whose snapshot does not exist (as a process tree started before the agent
// published): it answers fail-open, with the ini's fallback route.
$failOpen = new RegionRouter(dirname($snapshot) . '/none.json');
if (!$router->traffic()['counting']) {
    fwrite(STDERR, "node.php: not counting: " . $router->traffic()['state'] . "\n");
    exit(1);
}
// Per tick (50 ms): [geo, sticky, answers] with fractional answers carried over.
$plan = [['DE', null, 17 / 20], ['DE', 'sticky', 3 / 20], ['FR', null, 6 / 20], ['US', null, 4 / 20], ['ZZ', null, 1 / 20],
    ['JP', 'fail-open', 1 / 20]];
$carry = array_fill(0, count($plan), 0.0);
$byOrigin = $byGeo = $byGeoOrigin = [];
$total = 0;
$key = 0;
$start = hrtime(true);
for ($tick = 0; ($tick * 0.05) < $seconds; $tick++) {
    foreach ($plan as $i => [$geo, $sticky, $perTick]) {
        $carry[$i] += $perTick;
        while ($carry[$i] >= 1.0) {
            $carry[$i] -= 1.0;
            // Three sticky keys in turn, three a second: every second has the same mix, so
            // the rates of the origins they land on do not depend on the window.
            $route = match ($sticky) {
                null => $router->resolve($geo),
                'fail-open' => $failOpen->resolve($geo),
                default => $router->resolve($geo, 'user-' . ($key++ % 3)),
            };
            $byOrigin[$route['origin']] = ($byOrigin[$route['origin']] ?? 0) + 1;
            $byGeo[$geo] = ($byGeo[$geo] ?? 0) + 1;
            $byGeoOrigin["$geo {$route['origin']}"] = ($byGeoOrigin["$geo {$route['origin']}"] ?? 0) + 1;
            $total++;
        }
    }
    // The next tick at its time, not 50 ms after this one's work.
    $next = $start + (int) (($tick + 1) * 50_000_000);
    $wait = $next - hrtime(true);
    if ($wait > 0) {
        usleep(intdiv($wait, 1000));
    }
}
$taken = (hrtime(true) - $start) / 1e9;
ksort($byOrigin);
ksort($byGeo);
ksort($byGeoOrigin);
file_put_contents($out, json_encode(['total' => $total, 'seconds' => $taken, 'origins' => $byOrigin, 'geos' => $byGeo,
    'geo_origins' => $byGeoOrigin]) . "\n");
