--TEST--
resolve(): the fail-open route follows dw_router.fallback_shard / fallback_origin
--EXTENSIONS--
dw_router
--INI--
dw_router.fallback_shard=zz-9
dw_router.fallback_origin=nowhere-z
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

var_dump(ini_get('dw_router.fallback_shard'), ini_get('dw_router.fallback_origin'));

// A missing snapshot: nothing routes.
$missing = new RegionRouter("$dir/missing.json");
var_dump($missing->resolve('DE'));

// A snapshot whose chain has no region for this country.
dw_publish("$dir/s.json", 8, [
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'policy/global' => '{"default":"ZZ"}',
]);
$router = new RegionRouter("$dir/s.json");
var_dump($router->resolve('JP', 'k') === ['shard' => 'zz-9', 'origin' => 'nowhere-z']);
var_dump($router->resolve('DE') === ['shard' => 'eu-1', 'origin' => 'fra-a']);
// The ini default must not leak in anywhere.
var_dump(in_array('us-1', $router->resolve(''), true), in_array('iad-a', $router->resolve(str_repeat('x', 5000)), true));
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
string(4) "zz-9"
string(9) "nowhere-z"
array(2) {
  ["shard"]=>
  string(4) "zz-9"
  ["origin"]=>
  string(9) "nowhere-z"
}
bool(true)
bool(true)
bool(false)
bool(false)
