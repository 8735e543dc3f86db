--TEST--
Answer counting with visitor buckets: kind plain, sticky or bucket; a bucket past N counts as plain; the series do not grow with N
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish($path, 5, [
    'policy/global' => json_encode(['default' => 'US', 'buckets' => 4]),
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 1, 'fra-b' => 1]),
    'region/US' => dw_region('us-1', ['iad-a', 'iad-b'], ['iad-a' => 1, 'iad-b' => 1]),
]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-buckets.php', [$path]);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
DE country DE fra-a eu-1 bucket => 3
DE country DE fra-b eu-1 bucket => 1
DE country DE fra-b eu-1 plain => 4
DE country DE fra-b eu-1 sticky (sticky) => 2
FR default US iad-b us-1 bucket => 1
series after 4,000 more bucketed answers: 0 new
total: 4011, overflow: 0
