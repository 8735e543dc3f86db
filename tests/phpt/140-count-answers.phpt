--TEST--
Answer counting: every resolve() answer counted once, labelled by geo, step, key, origin, shard and sticky; exact over 10,000 more; off by default in the CLI
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
    'region/US' => dw_region('us-1', ['iad-a'], ['iad-a' => 1]),
    'region/US-CA' => dw_region('us-2', ['sfo-a'], ['sfo-a' => 1]),
    'region/continent/EU' => dw_region('eu-2', ['ams-a'], ['ams-a' => 1]),
    'region/opaque-pop' => dw_region('x-1', ['pop-a'], ['pop-a' => 1]),
]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-basic.php', [$path]);
// This process: the CLI, where counting is off by default.
$traffic = (new RegionRouter($path))->traffic();
var_dump($traffic['counting'], $traffic['state'], $traffic['answers']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
{
    "counting": true,
    "overflow": 0,
    "lines": [
        "DE country DE fra-a eu-1 - => 4",
        "DE country DE fra-a eu-1 sticky => 2",
        "FR continent continent/EU ams-a eu-2 - => 2",
        "T1 default US iad-a us-1 - => 1",
        "US-CA subdivision US-CA sfo-a us-2 - => 2",
        "XX default US iad-a us-1 - => 1",
        "empty default US iad-a us-1 - => 1",
        "opaque-pop geo opaque-pop pop-a x-1 - => 1",
        "other default US iad-a us-1 - => 2"
    ]
}
total after 10,000 more: 10016
bool(false)
string(29) "off (dw_router.count_answers)"
array(0) {
}
