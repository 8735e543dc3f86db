--TEST--
A snapshot that appears after the router was constructed is picked up without reload() (inotify)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";

$router = new RegionRouter($path);
var_dump($router->revision(), $router->stats()['reload_mechanism']);
var_dump($router->resolve('DE') === ['shard' => 'us-1', 'origin' => 'iad-a']);

dw_publish($path, 41, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 41));
var_dump($router->resolve('DE'));
$stats = $router->stats();
var_dump($stats['loads'], $stats['failed_loads'], $stats['regions'], is_float($stats['last_load_time']));

// A router constructed afterwards shares the loaded table.
$again = new RegionRouter($path);
var_dump($again->revision(), $again->stats()['loads']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(0)
string(7) "inotify"
bool(true)
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-1"
  ["origin"]=>
  string(5) "fra-a"
}
int(1)
int(0)
int(1)
bool(true)
int(41)
int(1)
