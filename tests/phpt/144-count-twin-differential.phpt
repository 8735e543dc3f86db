--TEST--
Answer counting, extension vs userland twin in one process: 5,000 answers over every kind of geo, with and without sticky keys, give the same traffic() rows
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish($path, 5, [
    'policy/global' => json_encode(['default' => 'US', 'failover' => ['JP']]),
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 1, 'fra-b' => 2]),
    'region/US-CA' => dw_region('us-2', ['sfo-a'], ['sfo-a' => 1]),
    'region/JP' => dw_region('ap-1', ['nrt-a', 'nrt-b'], ['nrt-a' => 1, 'nrt-b' => 1]),
    'region/continent/EU' => dw_region('eu-2', ['ams-a'], ['ams-a' => 1]),
    'region/opaque-pop' => dw_region('x-1', ['pop-a'], ['pop-a' => 1]),
]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-twin.php', [$path]);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECTF--
5000 answers; extension %d rows, twin %d rows
same rows
twin state: userland, this process
