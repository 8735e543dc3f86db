<?php
/*
 * tests/traffic-ops/run's check of `dwctl traffic --by-node --output json` against the real
 * node's traffic: `php node-check.php TRAFFIC_JSON NODE_JSON WINDOW NODE_ID`. NODE_JSON is
 * what tests/traffic-ops/node.php answered (per origin and geo, over its seconds). Each
 * rate dwctl reports must be the node's within the window's resolution (10% + 1/window):
 * all answers, each origin, each origin's geos, each origin's node NODE_ID.
 * Prints a line per check: "ok WHAT" or "FAIL WHAT: got G, want W".
 */
[, $trafficFile, $nodeFile, $window, $nodeId] = $argv;
$traffic = json_decode((string) file_get_contents($trafficFile), true);
$node = json_decode((string) file_get_contents($nodeFile), true);
$window = (float) $window;
if (!is_array($traffic) || !is_array($node)) {
    echo "FAIL dwctl's JSON and the node's answers are readable\n";
    exit(1);
}
$check = static function (string $what, $got, float $want) use ($window): void {
    $ok = is_numeric($got) && abs($got - $want) <= 0.10 * $want + 1.0 / $window;
    printf("%s %s%s\n", $ok ? 'ok' : 'FAIL', $what, $ok ? '' : sprintf(': got %s, want %.2f', var_export($got, true), $want));
};
$rate = static fn (int $answers): float => $answers / $node['seconds'];
$row = static function (array $rows, string $label, string $name) {
    foreach ($rows as $r) {
        if ($r[$label] === $name) {
            return $r['per_second'];
        }
    }
    return null;
};
$origins = [];
foreach ($traffic['origins'] ?? [] as $o) {
    $origins[$o['origin']] = $o;
}
$check(sprintf('all answers: %.1f/s', $rate($node['total'])), $traffic['per_second'] ?? null, $rate($node['total']));
foreach ($node['origins'] as $origin => $answers) {
    $o = $origins[$origin] ?? ['geos' => [], 'nodes' => []];
    $check(sprintf('%s: %.1f/s', $origin, $rate($answers)), $o['per_second'] ?? null, $rate($answers));
    $check(sprintf('%s on node %s: %.1f/s', $origin, $nodeId, $rate($answers)), $row($o['nodes'] ?? [], 'node', $nodeId), $rate($answers));
}
// Each origin's geo rows: DE, FR and US as sent (ZZ, outside the country table, counts as
// `other`).
foreach ($node['geo_origins'] as $pair => $answers) {
    [$geo, $origin] = explode(' ', $pair);
    if ($geo === 'ZZ') {
        continue;
    }
    $check(sprintf('%s answered by %s: %.1f/s', $geo, $origin, $rate($answers)), $row($origins[$origin]['geos'] ?? [], 'geo', $geo), $rate($answers));
}
