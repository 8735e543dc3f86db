<?php
// `make demo` until the full-stack demo lands: resolve a few countries against the example
// snapshot with the extension, and with the userland twin beside it.
declare(strict_types=1);

require __DIR__ . '/../php/RegionRouter.php';

$snapshot = $argv[1] ?? __DIR__ . '/../examples/snapshot.json';
if (!extension_loaded('dw_router')) {
    fwrite(STDERR, "demo: the dw_router extension is not loaded\n");
    exit(1);
}
$native = new RegionRouter($snapshot);
$twin = new DwRouter\RegionRouter($snapshot, ['apcu' => false]);

printf("snapshot %s at etcd revision %d, %d regions, reload by %s\n\n",
    $snapshot, $native->revision(), $native->stats()['regions'], $native->stats()['reload_mechanism']);
printf("%-10s %-12s %-10s %-10s %s\n", 'country', 'sticky key', 'shard', 'origin', 'userland twin agrees');
$cases = [['DE', null], ['FR', null], ['BR', null], ['JP', null], ['ZZ', null], ['', null],
    ['DE', 'visitor-1'], ['DE', 'visitor-2'], ['DE', 'visitor-3']];
$disagreements = 0;
foreach ($cases as [$country, $sticky]) {
    $route = $native->resolve($country, $sticky);
    $same = $route === $twin->resolve($country, $sticky);
    $disagreements += $same ? 0 : 1;
    printf("%-10s %-12s %-10s %-10s %s\n", var_export($country, true), $sticky ?? '-',
        $route['shard'], $route['origin'], $same ? 'yes' : 'NO');
}
echo "\n(ZZ and '' have no region: policy.default and policy.failover answer.)\n";
exit($disagreements === 0 ? 0 : 1);
