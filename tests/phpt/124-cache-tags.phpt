--TEST--
cacheTags(): each tag kind, %XX encoding, the 128-byte dw:long edge, the same tags as the userland twin; null before any resolve(), after a reload between resolve() and cacheTags(), and with no table
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/../../php/RegionRouter.php';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
$region = fn (string $shard) => dw_region($shard, ["$shard-a", "$shard-b"], ["$shard-a" => 2, "$shard-b" => 1]);
$kvs = [
    'region/DE' => $region('eu-de'),
    'region/US' => $region('us-1'),
    'region/US-CA' => $region('us-ca'),
    'region/continent/EU' => $region('eu-1'),
    'region/PT' => 'not json',
    'region/x,y' => $region('odd'),
    'policy/global' => json_encode(['default' => 'BR', 'failover' => ['continent/AS', 'US']]),
];
dw_publish($path, 7, $kvs);

$router = new RegionRouter($path);
echo 'before any resolve: ', var_export($router->cacheTags('DE'), true), "\n";
$twin = new DwRouter\RegionRouter($path, ['apcu' => false]);
$geos = ['DE', 'US-CA', 'US-NY', 'FR', 'PT', 'PT-11', 'XX', 'continent/EU', 'x,y', 'a b%', "\xff\x00",
    '', str_repeat('g', 123), str_repeat('g', 124), str_repeat(',', 41), str_repeat(',', 42)];
foreach ($geos as $geo) {
    $router->resolve($geo);
    $twin->resolve($geo);
    $tags = $router->cacheTags($geo);
    $same = $tags === $twin->cacheTags($geo) ? '' : ' (TWIN DIFFERS: ' . implode(',', $twin->cacheTags($geo) ?? ['null']) . ')';
    $shown = strlen($geo) > 40 ? substr($geo, 0, 3) . '...(' . strlen($geo) . ')' : bin2hex($geo);
    $tags = array_map(fn ($t) => strlen($t) > 40 ? substr($t, 0, 8) . '...(' . strlen($t) . ')' : $t, $tags);
    echo "$shown: ", implode(',', $tags), $same, "\n";
}
// A sticky key never changes the tags.
$router->resolve('FR', 'visitor-1');
dw_check('sticky', $router->cacheTags('FR', 'visitor-1'), $router->cacheTags('FR'));

// A reload between resolve() and cacheTags(): the table in use is not the one that answered.
$router->resolve('DE');
dw_publish($path, 8, ['region/DE' => $region('eu-8')] + $kvs);
var_dump(dw_wait_until(fn () => $router->revision() === 8));
echo 'after the reload: ', var_export($router->cacheTags('DE'), true), ', answered ', $router->answeredRevision(), "\n";
$router->resolve('DE');
echo 'resolve again: ', implode(',', $router->cacheTags('DE')), "\n";
$twin->resolve('DE');
$twin->reload();
echo 'twin after its reload: ', var_export($twin->cacheTags('DE'), true), "\n";

// No table: the answer is fail-open at revision 0.
$none = new RegionRouter("$dir/missing.json");
echo 'no table: ', $none->resolve('DE')['shard'], ' ', var_export($none->cacheTags('DE'), true), "\n";
$twinNone = new DwRouter\RegionRouter("$dir/missing.json", ['apcu' => false]);
$twinNone->resolve('DE');
echo 'twin, no table: ', var_export($twinNone->cacheTags('DE'), true), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
before any resolve: NULL
4445: dw,dw:r:DE
55532d4341: dw,dw:r:US-CA
55532d4e59: dw,dw:r:US,dw:m:US-NY
4652: dw,dw:r:continent/EU,dw:m:FR,dw:cont
5054: dw,dw:r:continent/EU,dw:m:PT,dw:cont
50542d3131: dw,dw:r:continent/EU,dw:m:PT-11,dw:m:PT,dw:cont
5858: dw,dw:r:US,dw:m:XX,dw:m:BR,dw:m:continent/AS,dw:chain,dw:cont
636f6e74696e656e742f4555: dw,dw:r:US,dw:m:BR,dw:m:continent/AS,dw:chain
782c79: dw,dw:r:x%2Cy
61206225: dw,dw:r:US,dw:m:a%20b%25,dw:m:BR,dw:m:continent/AS,dw:chain
ff00: dw,dw:r:US,dw:m:%FF%00,dw:m:BR,dw:m:continent/AS,dw:chain
: dw,dw:r:US,dw:m:,dw:m:BR,dw:m:continent/AS,dw:chain
ggg...(123): dw,dw:r:US,dw:m:ggg...(128),dw:m:BR,dw:m:continent/AS,dw:chain
ggg...(124): dw,dw:r:US,dw:long,dw:m:BR,dw:m:continent/AS,dw:chain
,,,...(41): dw,dw:r:US,dw:m:%2C...(128),dw:m:BR,dw:m:continent/AS,dw:chain
,,,...(42): dw,dw:r:US,dw:long,dw:m:BR,dw:m:continent/AS,dw:chain
ok   sticky
bool(true)
after the reload: NULL, answered 7
resolve again: dw,dw:r:DE
twin after its reload: NULL
no table: us-1 NULL
twin, no table: NULL
