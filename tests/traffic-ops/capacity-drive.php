<?php
/*
 * The traffic of tests/traffic-ops/capacity-real: one PHP process with the extension
 * counting, answering N resolve() calls of a fixed mix, spread evenly over SECONDS.
 *   php capacity-drive.php SNAPSHOT N SECONDS KEYS OUT
 * Request i: geo GEOS[i % 5]; every other request carries a sticky key out of KEYS
 * distinct ones ('k' . (intdiv(i, 2) % KEYS)). The mix is the same whatever N, so shares of
 * geos are stationary across runs. Writes OUT (JSON): answers per origin, the total and the
 * seconds the answers took (`elapsed`: the measured rate is total / elapsed).
 */
[, $snapshot, $n, $seconds, $keys, $out] = $argv;
$n = (int) $n; $seconds = (float) $seconds; $keys = (int) $keys;
$router = new RegionRouter($snapshot);
if (!$router->traffic()['counting']) {
    fwrite(STDERR, "capacity-drive.php: not counting: " . $router->traffic()['state'] . "\n");
    exit(1);
}
$geos = ['DE', 'DE', 'AT', 'CH', 'FR'];
$byOrigin = [];
$start = hrtime(true);
for ($i = 0; $i < $n; $i++) {
    $geo = $geos[$i % count($geos)];
    $route = ($i % 2 === 0) ? $router->resolve($geo, 'k' . (intdiv($i, 2) % $keys)) : $router->resolve($geo);
    $byOrigin[$route['origin']] = ($byOrigin[$route['origin']] ?? 0) + 1;
    if ($seconds > 0 && $i % 50 === 49) {
        $wait = $start + (int) (($i + 1) / $n * $seconds * 1e9) - hrtime(true);
        if ($wait > 0) {
            usleep(intdiv($wait, 1000));
        }
    }
}
ksort($byOrigin);
$elapsed = (hrtime(true) - $start) / 1e9;
file_put_contents($out, json_encode(['total' => $n, 'elapsed' => $elapsed, 'origins' => $byOrigin]) . "\n");
