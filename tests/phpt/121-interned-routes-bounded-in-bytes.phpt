--TEST--
Interned route arrays are bounded in bytes (8 MiB a process): past the bound, routes are built per call and still right
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
// 600 regions, each with a shard name of 15,000 bytes of its own: 600 pairs of about
// 30 KB each (the names twice, plus 512 bytes) would be 18 MB interned.
$letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
$geos = [];
foreach (str_split($letters) as $first) {
    foreach (str_split($letters) as $second) {
        $geos[] = $first . $second;
    }
}
$geos = array_slice($geos, 0, 600);
$shard = fn (string $geo) => "s-$geo-" . str_repeat(strtolower($geo), 7497);
$kvs = [];
foreach ($geos as $geo) {
    $kvs["region/$geo"] = dw_region($shard($geo), ["o-$geo"], ["o-$geo" => 1]);
}
dw_publish($path, 7, $kvs);
$router = new RegionRouter($path);
$wrong = 0;
foreach ([1, 2] as $round) {
    foreach ($geos as $geo) {
        $route = $router->resolve($geo);
        $wrong += (int) ($route !== ['shard' => $shard($geo), 'origin' => "o-$geo"]);
    }
}
$stats = $router->stats();
echo "wrong answers: $wrong\n";
echo 'bytes within 8 MiB: ', var_export($stats['interned_bytes'] <= 8 * 1024 * 1024, true), "\n";
echo 'bytes near the bound: ', var_export($stats['interned_bytes'] > 7 * 1024 * 1024, true), "\n";
echo 'some interned, not all: ', var_export($stats['interned_routes'] > 100 && $stats['interned_routes'] < 600, true), "\n";
// A route past the bound is a fresh array each call: writing to it changes nothing else.
$route = $router->resolve('WB');
$route['shard'] = 'changed';
echo 'next answer unchanged: ', var_export($router->resolve('WB')['shard'] === $shard('WB'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
wrong answers: 0
bytes within 8 MiB: true
bytes near the bound: true
some interned, not all: true
next answer unchanged: true
