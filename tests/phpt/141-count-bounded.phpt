--TEST--
Answer counting bounds: 100,000 junk and 100,000 well-formed unknown geos make no series of their own (other takes them; junk that happens to spell a built-in code, or a subdivision of one, counts as it) and a known geo still gets its series; past 4,096 label sets answers go to the overflow counter
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish($path, 5, [
    'policy/global' => json_encode(['default' => 'US']),
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'region/US' => dw_region('us-1', ['iad-a', 'iad-b'], ['iad-a' => 1, 'iad-b' => 1]),
]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-junk.php', [$path]);
$kvs = ['policy/global' => json_encode(['default' => 'US']),
    'region/US' => dw_region('us-1', ['iad-a'], ['iad-a' => 1])];
for ($i = 0; $i < 4200; $i++) {
    $kvs["region/pop-$i"] = dw_region('p', ['o'], ['o' => 1]);
}
dw_publish("$dir/many.json", 6, $kvs);
echo dw_traffic_run("$dir/answers-many", __DIR__ . '/fixtures/traffic/count-overflow.php', ["$dir/many.json"]);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
after 200,000 hostile geos: 13 series, total 200000
AR default US iad-b us-1 - => 1
BB default US iad-a us-1 - => 1
CG default US iad-b us-1 - => 1
CZ default US iad-b us-1 - => 1
GI default US iad-a us-1 - => 1
HU default US iad-b us-1 - => 1
KI default US iad-b us-1 - => 1
MR default US iad-a us-1 - => 1
NL default US iad-b us-1 - => 1
QA default US iad-b us-1 - => 950
T1 default US iad-a us-1 - => 1
other default US iad-a us-1 - => 99372
other default US iad-b us-1 - => 99668
DE country DE fra-a eu-1 - => 1
4096 series, overflow 208, total 8400
