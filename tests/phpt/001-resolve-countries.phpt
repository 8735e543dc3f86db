--TEST--
resolve(): answers for several countries of a healthy snapshot
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';

$router = new RegionRouter(__DIR__ . '/fixtures/basic.json');
var_dump($router->revision());

// Expected answers are fixed here; the legacy expression is re-evaluated as a cross-check.
$expected = [
    'DE' => ['eu-1', 'fra-b'],
    'FR' => ['eu-2', 'par-a'],
    'GB' => ['uk-1', 'lon-b'],
    'US' => ['us-2', 'iad-b'],
    'JP' => ['ap-1', 'nrt-a'],
    'BR' => ['sa-1', 'gru-b'],   // gru-a has weight 0
];
$snapshot = json_decode(file_get_contents(__DIR__ . '/fixtures/basic.json'), true);
foreach ($expected as $country => [$shard, $origin]) {
    $region = json_decode($snapshot['kvs']['/dw/routing/region/' . $country], true);
    dw_check("$country oracle", dw_legacy_pick($region['origins'], $region['weight'], $country), $origin);
    dw_check("$country", $router->resolve($country), dw_route($shard, $origin));
    dw_check("$country, null sticky key", $router->resolve($country, null), dw_route($shard, $origin));
}

// Geos match byte for byte: no case folding, no trimming. The default region (US) then
// picks with the country itself as the hash key.
$us = json_decode($snapshot['kvs']['/dw/routing/region/US'], true);
foreach (['de', 'De', ' DE', 'DE ', 'DEU', 'D'] as $country) {
    $origin = dw_legacy_pick($us['origins'], $us['weight'], $country);
    dw_check("'$country' goes to the default", $router->resolve($country), dw_route('us-2', $origin));
}
// Both of US's origins are reachable that way, so the check above has teeth.
var_dump(dw_legacy_pick($us['origins'], $us['weight'], ' DE'), dw_legacy_pick($us['origins'], $us['weight'], 'de'));

$stats = $router->stats();
var_dump($stats['path'] === __DIR__ . '/fixtures/basic.json', $stats['revision'], $stats['regions'],
    $stats['invalid_keys'], $stats['invalid'], $stats['loads'], $stats['failed_loads'], $stats['last_error']);
var_dump(array_keys($stats));
?>
--EXPECT--
int(1234)
ok   DE oracle
ok   DE
ok   DE, null sticky key
ok   FR oracle
ok   FR
ok   FR, null sticky key
ok   GB oracle
ok   GB
ok   GB, null sticky key
ok   US oracle
ok   US
ok   US, null sticky key
ok   JP oracle
ok   JP
ok   JP, null sticky key
ok   BR oracle
ok   BR
ok   BR, null sticky key
ok   'de' goes to the default
ok   'De' goes to the default
ok   ' DE' goes to the default
ok   'DE ' goes to the default
ok   'DEU' goes to the default
ok   'D' goes to the default
string(5) "sfo-a"
string(5) "iad-b"
bool(true)
int(1234)
int(6)
int(0)
array(0) {
}
int(1)
int(0)
NULL
array(17) {
  [0]=>
  string(4) "path"
  [1]=>
  string(8) "revision"
  [2]=>
  string(7) "regions"
  [3]=>
  string(7) "buckets"
  [4]=>
  string(12) "invalid_keys"
  [5]=>
  string(5) "loads"
  [6]=>
  string(14) "reloads_reused"
  [7]=>
  string(12) "failed_loads"
  [8]=>
  string(14) "last_load_time"
  [9]=>
  string(16) "reload_mechanism"
  [10]=>
  string(10) "last_error"
  [11]=>
  string(19) "inotify_unavailable"
  [12]=>
  string(17) "tables_in_process"
  [13]=>
  string(15) "interned_routes"
  [14]=>
  string(14) "interned_bytes"
  [15]=>
  string(7) "invalid"
  [16]=>
  string(6) "stages"
}
