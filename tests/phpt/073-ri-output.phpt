--TEST--
php --ri dw_router: the extension's section from the command line
--EXTENSIONS--
dw_router
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$so = dw_extension_path();
$cmd = [PHP_BINARY, '-n', '-d', "extension=$so", '-d', 'dw_router.poll_interval_ms=75', '--ri', 'dw_router'];
$proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
$out = stream_get_contents($pipes[1]);
$err = stream_get_contents($pipes[2]);
$status = proc_close($proc);
var_dump($status, $err);
// The engine shortcuts are on for every PHP version the suite runs on (src/engine.rs).
echo preg_replace(
    ['/^version => .*$/m', '/^build => ([0-9a-f]{12}|unknown)$/m', '/^(engine shortcuts => on) \(PHP API \d{8}\)$/m'],
    ['version => V', 'build => B', '$1 (PHP API N)'],
    $out,
);
var_dump(str_contains($out, 'version => ' . phpversion('dw_router') . "\n"));
?>
--EXPECT--
int(0)
string(0) ""

dw_router

dw_router support => enabled
version => V
build => B
engine shortcuts => on (PHP API N)
trusted snapshot owner => root or the directory's owner
continent table => countries-list 3.4.1 (annexare/Countries, MIT)
poll interval => 75 ms
answer counting => off (dw_router.count_answers)
snapshot => none used in this process yet

Directive => Local Value => Master Value
dw_router.snapshot_path => /run/dw-router/routing.json => /run/dw-router/routing.json
dw_router.fallback_shard => us-1 => us-1
dw_router.fallback_origin => iad-a => iad-a
dw_router.poll_interval_ms => 75 => 75
dw_router.max_snapshot_bytes => 67108864 => 67108864
dw_router.trusted_owner => no value => no value
dw_router.preload => auto => auto
dw_router.engine_shortcuts => all => all
dw_router.count_answers => auto => auto
dw_router.answers_dir => /run/dw-router-answers => /run/dw-router-answers
bool(true)
