--TEST--
dw_router.poll_interval_ms above 1 day is clamped to 1 day (a larger one overflowed into a stat per request); php --ri shows the effective value
--EXTENSIONS--
dw_router
--INI--
dw_router.poll_interval_ms=99999999999999999
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
// The directory does not exist yet: no inotify watch is possible, the router polls.
$dir = "$base/later";
$path = "$dir/dw-routing.json";
$router = new RegionRouter($path);
var_dump($router->revision(), $router->stats()['reload_mechanism'], $router->resolve('DE')['shard']);

mkdir($dir);
dw_publish($path, 5, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
// 1e17 ms overflowed the next poll's deadline, so every call stat()ed and saw the file at
// once. Clamped to one day, the poll is not due: the old (empty) table, however many calls.
for ($i = 0; $i < 1000; $i++) {
    $shard = $router->resolve('DE')['shard'];
}
var_dump($router->revision(), $shard);
var_dump($router->reload(), $router->revision());

$so = dw_extension_path();
foreach (['99999999999999999', '86400001', '86400000', '75', '0'] as $setting) {
    $cmd = [PHP_BINARY, '-n', '-d', "extension=$so", '-d', "dw_router.poll_interval_ms=$setting", '--ri', 'dw_router'];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    proc_close($proc);
    preg_match('/^poll interval => .*$/m', $out, $row);
    echo $row[0] ?? "no poll interval row\n", "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(0)
string(4) "poll"
string(4) "us-1"
int(0)
string(4) "us-1"
bool(true)
int(5)
poll interval => 86400000 ms (dw_router.poll_interval_ms 99999999999999999 clamped to 1 day)
poll interval => 86400000 ms (dw_router.poll_interval_ms 86400001 clamped to 1 day)
poll interval => 86400000 ms
poll interval => 75 ms
poll interval => 1 ms (dw_router.poll_interval_ms 0 raised to 1 ms)
