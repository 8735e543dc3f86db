--TEST--
cacheTags($geo, $stickyKey, $bucket): dw:b last exactly where the bucket picked the origin (buckets on, below N, no sticky key, a region answers), the same tags as the userland twin; N off, past N and a sticky key give none; a negative bucket is a ValueError; memoised resolve() calls in between change nothing
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/../../php/RegionRouter.php';
$dir = dw_test_dir(__FILE__);
$region = fn (string $shard) => dw_region($shard, ["$shard-a", "$shard-b"], ["$shard-a" => 1, "$shard-b" => 1]);
$kvs = [
    'region/DE' => $region('eu-de'),
    'region/US' => $region('us-1'),
    'region/continent/EU' => $region('eu-1'),
];
dw_publish("$dir/on.json", 7, $kvs + ['policy/global' => '{"buckets":4}']);
dw_publish("$dir/off.json", 7, $kvs);
dw_publish("$dir/empty.json", 7, ['policy/global' => '{"buckets":4}']);

// As an application's own front controller does it: resolve(), then cacheTags() with the
// same arguments; each printed with whether the twin agrees.
foreach (['on', 'off', 'empty'] as $file) {
    $router = new RegionRouter("$dir/$file.json");
    $twin = new DwRouter\RegionRouter("$dir/$file.json", ['apcu' => false]);
    echo "-- $file.json (buckets() = {$router->buckets()})\n";
    foreach ([['DE', null, null], ['DE', null, 0], ['DE', null, 3], ['DE', null, 4], ['DE', null, PHP_INT_MAX],
        ['DE', 'K', 1], ['DE-BY', null, 1], ['FR', null, 2], ['zz', null, 1]] as $args) {
        $router->resolve(...$args);
        $twin->resolve(...$args);
        $tags = $router->cacheTags(...$args);
        $same = $tags === $twin->cacheTags(...$args) ? '' : ' (TWIN DIFFERS: ' . implode(',', $twin->cacheTags(...$args) ?? ['null']) . ')';
        printf("  %-5s %-4s %-19s %s%s\n", $args[0], $args[1] ?? '-', $args[2] ?? '-', implode(',', $tags ?? ['null']), $same);
    }
}

// The tags follow the arguments given, not resolve()'s memo: a plain resolve() of the
// country between a bucketed one and its cacheTags() leaves dw:b where the bucket picks.
$router = new RegionRouter("$dir/on.json");
$router->resolve('DE', null, 2);
$router->resolve('DE');
dw_check('memo in between', $router->cacheTags('DE', null, 2), ['dw', 'dw:r:DE', 'dw:b']);
dw_check('no bucket', $router->cacheTags('DE'), ['dw', 'dw:r:DE']);

foreach ([$router, new DwRouter\RegionRouter("$dir/on.json", ['apcu' => false])] as $r) {
    $r->resolve('DE');
    try {
        $r->cacheTags('DE', null, -1);
        echo "no error\n";
    } catch (ValueError $e) {
        echo get_class($r), ': ', $e->getMessage(), "\n";
    }
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
-- on.json (buckets() = 4)
  DE    -    -                   dw,dw:r:DE
  DE    -    0                   dw,dw:r:DE,dw:b
  DE    -    3                   dw,dw:r:DE,dw:b
  DE    -    4                   dw,dw:r:DE
  DE    -    9223372036854775807 dw,dw:r:DE
  DE    K    1                   dw,dw:r:DE
  DE-BY -    1                   dw,dw:r:DE,dw:m:DE-BY,dw:b
  FR    -    2                   dw,dw:r:continent/EU,dw:m:FR,dw:cont,dw:b
  zz    -    1                   dw,dw:r:US,dw:m:zz,dw:chain,dw:b
-- off.json (buckets() = 0)
  DE    -    -                   dw,dw:r:DE
  DE    -    0                   dw,dw:r:DE
  DE    -    3                   dw,dw:r:DE
  DE    -    4                   dw,dw:r:DE
  DE    -    9223372036854775807 dw,dw:r:DE
  DE    K    1                   dw,dw:r:DE
  DE-BY -    1                   dw,dw:r:DE,dw:m:DE-BY
  FR    -    2                   dw,dw:r:continent/EU,dw:m:FR,dw:cont
  zz    -    1                   dw,dw:r:US,dw:m:zz,dw:chain
-- empty.json (buckets() = 4)
  DE    -    -                   dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE    -    0                   dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE    -    3                   dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE    -    4                   dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE    -    9223372036854775807 dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE    K    1                   dw,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  DE-BY -    1                   dw,dw:m:DE-BY,dw:m:DE,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  FR    -    2                   dw,dw:m:FR,dw:m:continent/EU,dw:m:US,dw:chain,dw:cont
  zz    -    1                   dw,dw:m:zz,dw:m:US,dw:chain
ok   memo in between
ok   no bucket
RegionRouter: RegionRouter::cacheTags(): Argument #3 ($bucket) must be greater than or equal to 0
DwRouter\RegionRouter: RegionRouter::cacheTags(): Argument #3 ($bucket) must be greater than or equal to 0
