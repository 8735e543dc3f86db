--TEST--
Route arrays can be stored in APCu and fetched back (alone, nested, fail-open), also after the router reloaded
--EXTENSIONS--
dw_router
apcu
--INI--
apc.enable_cli=1
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 1, ['region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 1, 'fra-b' => 1])]);
$router = new RegionRouter($path);
var_dump(apcu_enabled());

$de = $router->resolve('DE', 'visitor-1');
var_dump(apcu_store('route:de', $de));
var_dump(apcu_store('route:open', $router->resolve('XX')));
var_dump(apcu_store('routes', ['a' => $router->resolve('DE', 'a'), 'b' => $router->resolve('DE', 'b'), 'same' => [$de, $de]]));
var_dump(apcu_store('serialised', serialize($de)));
var_dump(apcu_add('route:de', ['nope']));

var_dump(apcu_fetch('route:de') === $de);
var_dump(apcu_fetch('route:open'));
$routes = apcu_fetch('routes');
var_dump($routes['a'] === $router->resolve('DE', 'a'), $routes['b'] === $router->resolve('DE', 'b'), $routes['same'] === [$de, $de]);
var_dump(unserialize(apcu_fetch('serialised')) === $de);

// A fetched route is an ordinary array: writable, and the router is unaffected.
$fetched = apcu_fetch('route:de');
$fetched['origin'] = 'changed';
var_dump($router->resolve('DE', 'visitor-1') === $de, apcu_fetch('route:de') === $de);

// Stored routes survive the table they came from.
dw_publish($path, 2, ['region/DE' => dw_region('eu-2', ['ber-a'], ['ber-a' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 2));
gc_collect_cycles();
var_dump(apcu_fetch('route:de') === $de, $router->resolve('DE', 'visitor-1'));
// apcu_entry with a route as the generated value.
var_dump(apcu_entry('entry', fn () => $router->resolve('DE')) === ['shard' => 'eu-2', 'origin' => 'ber-a']);
var_dump(apcu_fetch('entry') === ['shard' => 'eu-2', 'origin' => 'ber-a']);
var_dump(apcu_delete('route:de'), apcu_fetch('route:de', $found), $found);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(false)
bool(true)
array(2) {
  ["shard"]=>
  string(4) "us-1"
  ["origin"]=>
  string(5) "iad-a"
}
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-2"
  ["origin"]=>
  string(5) "ber-a"
}
bool(true)
bool(true)
bool(true)
bool(false)
bool(false)
