--TEST--
resolve(): any byte string is a country: empty, 10 KB, NUL bytes, invalid UTF-8, huge sticky keys
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
// One watched directory in this test (routers for several directories: 059).
dw_publish_fixture("$dir/hostile-geos.json", 'hostile-geos.json');
$router = new RegionRouter("$dir/hostile-geos.json");
var_dump($router->revision(), $router->stats()['regions'], $router->stats()['invalid_keys']);
$us = dw_route('us-2', 'iad-b');   // no policy: default US, one origin

$hostile = [
    'empty' => '',
    '10 KB' => str_repeat('D', 10240),
    '1 MB' => str_repeat("\xfe", 1 << 20),
    'NUL only' => "\0",
    'NUL inside' => "DE\0",
    'NUL before' => "\0DE",
    'A NUL' => "A\0",
    'invalid UTF-8' => "\xc3\x28\xa0\xa1\xff\xfe",
    'overlong UTF-8' => "\xc0\xaf",
    'lone surrogate (CESU)' => "\xed\xa0\x80",
    'all bytes' => implode('', array_map('chr', range(0, 255))),
    'percent / format' => '%s%n%x%d',
    'JSON-ish' => '{"shard":"evil"}',
    'prefix-ish' => '/dw/routing/region/US',
    'region/US' => 'region/US',
    'long geo minus one' => str_repeat('L', 299),
    'long geo plus one' => str_repeat('L', 301),
    'space then NUL' => " \0",
];
foreach ($hostile as $name => $country) {
    dw_check("$name", $router->resolve($country), $us);
    dw_check("$name, hostile sticky key", $router->resolve($country, $country . "\0\xff" . str_repeat('k', 100000)), $us);
}

// Geos that are themselves unusual match exactly their bytes.
dw_check('NUL geo', $router->resolve("A\0B"), dw_route('nul-1', 'n-a'));
dw_check('NUL geo, NUL sticky', $router->resolve("A\0B", "\0"), dw_route('nul-1', 'n-a'));
dw_check('UTF-8 geo', $router->resolve('Ünïcødé'), dw_route('uni-1', 'u-a'));
dw_check('UTF-8 geo, NFD spelling differs', $router->resolve("U\u{0308}nïcødé"), $us);
dw_check('300-byte geo', $router->resolve(str_repeat('L', 300)), dw_route('long-1', 'l-a'));
dw_check('space geo', $router->resolve(' '), dw_route('space-1', 's-a'));

// A very long sticky key on a multi-origin region goes through the pick like any other.
dw_publish("$dir/multi.json", 3, ['region/M' => dw_region('m-1', ['m-a', 'm-b', 'm-c'], ['m-a' => 1, 'm-b' => 2, 'm-c' => 3])]);
$multi = new RegionRouter("$dir/multi.json");
$origins = ['m-a', 'm-b', 'm-c'];
$weights = ['m-a' => 1, 'm-b' => 2, 'm-c' => 3];
foreach ([1 << 10, 1 << 16, 1 << 20, 3 << 20] as $length) {
    $key = substr(str_repeat(hash('sha256', (string) $length, true), intdiv($length, 32) + 1), 0, $length);
    dw_check("sticky key of $length bytes", $multi->resolve('M', $key)['origin'], dw_legacy_pick($origins, $weights, $key));
}
echo "done\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(5)
int(5)
int(0)
ok   empty
ok   empty, hostile sticky key
ok   10 KB
ok   10 KB, hostile sticky key
ok   1 MB
ok   1 MB, hostile sticky key
ok   NUL only
ok   NUL only, hostile sticky key
ok   NUL inside
ok   NUL inside, hostile sticky key
ok   NUL before
ok   NUL before, hostile sticky key
ok   A NUL
ok   A NUL, hostile sticky key
ok   invalid UTF-8
ok   invalid UTF-8, hostile sticky key
ok   overlong UTF-8
ok   overlong UTF-8, hostile sticky key
ok   lone surrogate (CESU)
ok   lone surrogate (CESU), hostile sticky key
ok   all bytes
ok   all bytes, hostile sticky key
ok   percent / format
ok   percent / format, hostile sticky key
ok   JSON-ish
ok   JSON-ish, hostile sticky key
ok   prefix-ish
ok   prefix-ish, hostile sticky key
ok   region/US
ok   region/US, hostile sticky key
ok   long geo minus one
ok   long geo minus one, hostile sticky key
ok   long geo plus one
ok   long geo plus one, hostile sticky key
ok   space then NUL
ok   space then NUL, hostile sticky key
ok   NUL geo
ok   NUL geo, NUL sticky
ok   UTF-8 geo
ok   UTF-8 geo, NFD spelling differs
ok   300-byte geo
ok   space geo
ok   sticky key of 1024 bytes
ok   sticky key of 65536 bytes
ok   sticky key of 1048576 bytes
ok   sticky key of 3145728 bytes
done
