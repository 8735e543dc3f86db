<?php
// The independent oracle of tests/it/twin_oracle.rs: the userland twin (php/RegionRouter.php)
// resolves each geo, and each sticky key, one at a time. argv[1] is a JSON file:
// {"snapshot": PATH, "plain": [[geo, count], ...], "sticky": [[geo, keys, prefix], ...],
//  "bucket": [[geo, n], ...]} ("bucket" optional: one answer for each visitor bucket 0..n-1).
// Prints {"plain": {origin: answers}, "sticky": {geo: {origin: answers}},
// "bucket": {origin: answers}}; fail-open answers count under the origin "__fail_open__".
declare(strict_types=1);
require __DIR__ . '/../../../../php/RegionRouter.php';

$input = json_decode((string) file_get_contents($argv[1]), true, 16, JSON_THROW_ON_ERROR);
$router = new DwRouter\RegionRouter($input['snapshot'], [
    'apcu' => false,
    'fallback_shard' => '__fail_open__',
    'fallback_origin' => '__fail_open__',
]);
if ($router->revision() === 0) {
    fwrite(STDERR, "the twin did not load the snapshot\n");
    exit(1);
}
$plain = [];
foreach ($input['plain'] as [$geo, $count]) {
    $origin = $router->resolve($geo)['origin'];
    $plain[$origin] = ($plain[$origin] ?? 0) + $count;
}
$sticky = [];
foreach ($input['sticky'] as [$geo, $keys, $prefix]) {
    $counts = [];
    for ($i = 0; $i < $keys; $i++) {
        $origin = $router->resolve($geo, $prefix . $i)['origin'];
        $counts[$origin] = ($counts[$origin] ?? 0) + 1;
    }
    $sticky[$geo] = $counts;
}
$bucket = [];
foreach ($input['bucket'] ?? [] as [$geo, $n]) {
    for ($b = 0; $b < $n; $b++) {
        $origin = $router->resolve($geo, null, $b)['origin'];
        $bucket[$origin] = ($bucket[$origin] ?? 0) + 1;
    }
}
echo json_encode(
    ['plain' => (object) $plain, 'sticky' => (object) $sticky, 'bucket' => (object) $bucket],
    JSON_THROW_ON_ERROR
), "\n";
