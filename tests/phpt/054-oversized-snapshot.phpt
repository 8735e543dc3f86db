--TEST--
dw_router.max_snapshot_bytes: a file of exactly the limit loads, one byte more is refused (last good kept)
--EXTENSIONS--
dw_router
--INI--
dw_router.max_snapshot_bytes=400
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
var_dump(ini_get('dw_router.max_snapshot_bytes'));

// Valid JSON padded with trailing whitespace to an exact size.
$sized = function (int $revision, string $shard, int $size): string {
    $json = dw_snapshot($revision, ['region/DE' => dw_region($shard, ['fra-a'], ['fra-a' => 1])]);
    if (strlen($json) > $size) {
        throw new LogicException('fixture too large: ' . strlen($json));
    }
    return str_pad($json, $size, ' ');
};
dw_write_atomic($path, $sized(1, 'eu-1', 400));
$router = new RegionRouter($path);
var_dump(filesize($path), $router->revision(), $router->resolve('DE')['shard']);

dw_write_atomic($path, $sized(2, 'eu-2', 401));
var_dump(dw_wait_until(fn () => $router->stats()['failed_loads'] === 1));
$stats = $router->stats();
var_dump($router->revision(), $router->resolve('DE')['shard'], $stats['loads']);
var_dump(str_contains($stats['last_error'], 'max_snapshot_bytes'), str_contains($stats['last_error'], '401'));

// A very large one is refused without being read (well past the limit).
dw_write_atomic($path, $sized(3, 'eu-3', 5 << 20));
var_dump(dw_wait_until(fn () => $router->stats()['failed_loads'] === 2), $router->revision());

dw_write_atomic($path, $sized(4, 'eu-4', 399));
var_dump(dw_wait_until(fn () => $router->revision() === 4), $router->resolve('DE')['shard'], $router->stats()['last_error']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
string(3) "400"
int(400)
int(1)
string(4) "eu-1"
bool(true)
int(1)
string(4) "eu-1"
int(1)
bool(true)
bool(true)
bool(true)
int(1)
bool(true)
string(4) "eu-4"
NULL
