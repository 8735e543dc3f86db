--TEST--
A deleted snapshot keeps the table in use (not a failed load); poll mode (directory created later) picks files up within the interval
--EXTENSIONS--
dw_router
--INI--
dw_router.poll_interval_ms=50
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
// Poll mode: the directory does not exist when this router is constructed. (It comes
// first so that this test does not depend on 059's subject: a new directory while the
// watcher is busy.)
$late = "$dir/late/dw-routing.json";
$poller = new RegionRouter($late);
dw_publish($path, 7, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
$router = new RegionRouter($path);
var_dump($router->revision());

unlink($path);
usleep(100000);
$stats = $router->stats();
var_dump($router->revision(), $router->resolve('DE')['shard'], $stats['failed_loads'], $stats['last_error'], $router->reload());

dw_publish($path, 8, ['region/DE' => dw_region('eu-2', ['fra-b'], ['fra-b' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 8), $router->stats()['loads']);

// The poller.
var_dump($poller->stats()['reload_mechanism'], $poller->revision());
mkdir("$dir/late");
dw_publish($late, 20, ['region/DE' => dw_region('eu-20', ['x'], ['x' => 1])]);
var_dump(dw_wait_until(fn () => $poller->revision() === 20), $poller->resolve('DE')['shard']);
dw_publish($late, 21, ['region/DE' => dw_region('eu-21', ['x'], ['x' => 1])]);
// resolve() alone drives the poll.
var_dump(dw_wait_until(fn () => $poller->resolve('DE')['shard'] === 'eu-21'));
// Polling, or inotify if the router upgraded once the directory appeared: either way
// never "none" and the file was followed.
var_dump($poller->stats()['loads'], in_array($poller->stats()['reload_mechanism'], ['poll', 'inotify'], true));
// The inotify-watched router of the other path is unaffected.
var_dump($router->stats()['reload_mechanism']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(7)
int(7)
string(4) "eu-1"
int(0)
NULL
bool(false)
bool(true)
int(2)
string(4) "poll"
int(0)
bool(true)
string(5) "eu-20"
bool(true)
int(2)
bool(true)
string(7) "inotify"
