--TEST--
A snapshot renamed over the old one is picked up without reload() (inotify); revision, answers and loads follow
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 10, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);

$router = new RegionRouter($path);
var_dump($router->revision(), $router->resolve('DE')['origin'], $router->stats()['reload_mechanism']);
$firstLoad = $router->stats()['last_load_time'];

// Rename in a new snapshot; do not call reload().
usleep(10000);
dw_publish($path, 11, ['region/DE' => dw_region('eu-1', ['fra-b'], ['fra-b' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 11));
var_dump($router->resolve('DE'));
$stats = $router->stats();
var_dump($stats['loads'], $stats['failed_loads'], $stats['last_load_time'] > $firstLoad);

// resolve() alone also sees the next one (no revision() call in the loop).
dw_publish($path, 12, ['region/DE' => dw_region('eu-3', ['ber-a'], ['ber-a' => 1])]);
var_dump(dw_wait_until(fn () => $router->resolve('DE')['shard'] === 'eu-3'));
var_dump($router->revision(), $router->stats()['loads']);
// Nothing changed since: reload() has nothing to do.
var_dump($router->reload(), $router->stats()['loads']);
// Other files in the directory do not trigger loads. inotify reports events in order, so
// once a snapshot published after them is in use, their events have been handled too.
file_put_contents("$dir/other.json", 'x');
rename("$dir/other.json", "$dir/other2.json");
dw_publish($path, 13, ['region/DE' => dw_region('eu-3', ['ber-b'], ['ber-b' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 13));
var_dump($router->stats()['loads'], $router->stats()['failed_loads']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(10)
string(5) "fra-a"
string(7) "inotify"
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-1"
  ["origin"]=>
  string(5) "fra-b"
}
int(2)
int(0)
bool(true)
bool(true)
int(12)
int(3)
bool(false)
int(3)
bool(true)
int(4)
int(0)
