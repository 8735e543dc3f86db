--TEST--
reload(): re-checks the file now; true only when the revision changed (poll mode with a long interval, so nothing else reloads)
--EXTENSIONS--
dw_router
--INI--
dw_router.poll_interval_ms=600000
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
// The directory does not exist yet: no inotify watch is possible, the router polls.
$dir = "$base/later";
$path = "$dir/dw-routing.json";
$router = new RegionRouter($path);
var_dump($router->revision(), $router->stats()['reload_mechanism'], $router->stats()['inotify_unavailable']);

mkdir($dir);
dw_publish($path, 5, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
// The poll interval has not passed: still the old (empty) table.
var_dump($router->revision(), $router->resolve('DE')['shard']);
var_dump($router->reload(), $router->revision(), $router->resolve('DE')['shard']);
var_dump($router->reload());

// A new file with the same revision: the table changes, reload() says false.
dw_publish($path, 5, ['region/DE' => dw_region('eu-2', ['fra-b'], ['fra-b' => 1])]);
var_dump($router->resolve('DE')['shard']);
var_dump($router->reload(), $router->resolve('DE')['shard'], $router->stats()['loads']);

// A lower revision is a change too.
dw_publish($path, 4, ['region/DE' => dw_region('eu-4', ['fra-d'], ['fra-d' => 1])]);
var_dump($router->reload(), $router->revision());

// reload() on one router object serves every router of the path.
$other = new RegionRouter($path);
dw_publish($path, 6, []);
var_dump($other->reload(), $router->revision(), $router->resolve('DE')['shard']);
var_dump($router->stats()['loads'], $router->stats()['failed_loads'], $router->stats()['reload_mechanism']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(0)
string(4) "poll"
NULL
int(0)
string(4) "us-1"
bool(true)
int(5)
string(4) "eu-1"
bool(false)
string(4) "eu-1"
bool(false)
string(4) "eu-2"
int(2)
bool(true)
int(4)
bool(true)
int(6)
string(4) "us-1"
int(4)
int(0)
string(4) "poll"
