--TEST--
resolve(): fail-open route from the default ini when nothing in the chain routes
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

// Regions exist, but neither the country, nor default, nor failover has one.
dw_publish("$dir/a.json", 3, [
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'policy/global' => '{"default":"ZZ","failover":["YY"]}',
]);
$router = new RegionRouter("$dir/a.json");
var_dump($router->revision());
var_dump($router->resolve('FR'));
var_dump($router->resolve('FR', 'sticky') === ['shard' => 'us-1', 'origin' => 'iad-a']);
var_dump($router->resolve('DE'));

// No keys at all; no policy: default US has no region either.
dw_publish("$dir/b.json", 4, []);
$empty = new RegionRouter("$dir/b.json");
var_dump($empty->revision(), $empty->stats()['regions'], $empty->policy());
var_dump($empty->resolve('US') === ['shard' => 'us-1', 'origin' => 'iad-a']);
var_dump(ini_get('dw_router.fallback_shard'), ini_get('dw_router.fallback_origin'));
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(3)
array(2) {
  ["shard"]=>
  string(4) "us-1"
  ["origin"]=>
  string(5) "iad-a"
}
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-1"
  ["origin"]=>
  string(5) "fra-a"
}
int(4)
int(0)
array(0) {
}
bool(true)
string(4) "us-1"
string(5) "iad-a"
