--TEST--
A missing snapshot file: fail-open, revision 0, no load counted, nothing throws
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

$router = new RegionRouter("$dir/never-written.json");
var_dump($router->revision());
var_dump($router->resolve('DE') === ['shard' => 'us-1', 'origin' => 'iad-a']);
var_dump($router->resolve('US', 'visitor') === ['shard' => 'us-1', 'origin' => 'iad-a']);
var_dump($router->policy());
var_dump($router->reload());
$stats = $router->stats();
var_dump($stats['path'] === "$dir/never-written.json");
foreach (['revision', 'regions', 'invalid_keys', 'loads', 'failed_loads', 'last_load_time', 'reload_mechanism', 'last_error', 'invalid'] as $key) {
    echo "$key: ", json_encode($stats[$key]), "\n";
}

// A directory that does not exist either.
$nodir = new RegionRouter("$dir/no/such/dir/snap.json");
var_dump($nodir->revision(), $nodir->resolve('DE') === ['shard' => 'us-1', 'origin' => 'iad-a']);
var_dump($nodir->stats()['failed_loads'], $nodir->stats()['last_error']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(0)
bool(true)
bool(true)
array(0) {
}
bool(false)
bool(true)
revision: 0
regions: 0
invalid_keys: 0
loads: 0
failed_loads: 0
last_load_time: null
reload_mechanism: "inotify"
last_error: null
invalid: []
int(0)
bool(true)
int(0)
NULL
