--TEST--
phpinfo(INFO_MODULES): version, then per snapshot path its revision, regions, invalid keys, reload mechanism, counters, last error; ini entries
--EXTENSIONS--
dw_router
--INI--
dw_router.fallback_shard=info-shard
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

function dw_router_section(): string
{
    ob_start();
    phpinfo(INFO_MODULES);
    $all = ob_get_clean();
    // The module's section runs from its title to the next module's title.
    if (!preg_match('/^dw_router\n(.*?)(?=^\S+\n\n)/ms', $all, $m)) {
        return "no dw_router section\n";
    }
    return $m[1];
}

$before = dw_router_section();
var_dump(str_contains($before, 'dw_router support => enabled'));
var_dump(str_contains($before, 'version => ' . phpversion('dw_router')), phpversion('dw_router') !== false);
var_dump(str_contains($before, 'none used in this process yet'));
// The commit the build came from (build.rs): 12 hex digits, or "unknown" outside git.
var_dump(preg_match('/^build => ([0-9a-f]{12}|unknown)$/m', $before) === 1);

$path = "$dir/dw-routing.json";
dw_publish($path, 321, [
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'region/FR' => dw_region('eu-2', ['par-a'], ['par-a' => 1]),
    'region/XX' => '{"shard":""}',
]);
$router = new RegionRouter($path);
dw_publish($path, 322, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]), 'region/YY' => 'nope']);
dw_wait_until(fn () => $router->revision() === 322);
dw_write_atomic($path, '{"format":2,"revision":400,"kvs":{}}');
dw_wait_until(fn () => $router->stats()['failed_loads'] === 1);

$after = dw_router_section();
$lines = array_values(array_filter(explode("\n", $after), fn ($l) => str_contains($l, ' => ')));
foreach ($lines as $line) {
    echo preg_replace(
        ['~^snapshot path => ' . preg_quote($dir, '~') . '~', '~^version => .*~', '~^build => .*~', '~^(engine shortcuts => on) \(PHP API \d{8}\)$~'],
        ['snapshot path => DIR', 'version => V', 'build => B', '$1 (PHP API N)'],
        $line,
    ), "\n";
}
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
dw_router support => enabled
version => V
build => B
engine shortcuts => on (PHP API N)
trusted snapshot owner => root or the directory's owner
continent table => countries-list 3.4.1 (annexare/Countries, MIT)
poll interval => 250 ms
answer counting => off (dw_router.count_answers)
snapshot path => DIR/dw-routing.json
revision => 322
regions => 1
invalid keys => 1
stages applied => none
reload mechanism => inotify
loads => 2
failed loads => 1
last error => snapshot: unsupported format 2 (this reader knows 1)
Directive => Local Value => Master Value
dw_router.answers_dir => /run/dw-router-answers => /run/dw-router-answers
dw_router.count_answers => auto => auto
dw_router.engine_shortcuts => all => all
dw_router.fallback_origin => iad-a => iad-a
dw_router.fallback_shard => info-shard => info-shard
dw_router.max_snapshot_bytes => 67108864 => 67108864
dw_router.poll_interval_ms => 250 => 250
dw_router.preload => auto => auto
dw_router.snapshot_path => /run/dw-router/routing.json => /run/dw-router/routing.json
dw_router.trusted_owner => no value => no value
