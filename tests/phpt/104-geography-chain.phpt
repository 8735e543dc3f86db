--TEST--
resolve(): subdivision -> country -> continent bucket -> defaults; hash keys; XX, T1
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

$two = fn (string $shard) => dw_region($shard, ["$shard-a", "$shard-b"], ["$shard-a" => 1, "$shard-b" => 1]);
$kvs = [
    'region/US' => $two('us-2'),
    'region/US-CA' => $two('ca-1'),
    'region/AS' => $two('samoa-1'),
    'region/continent/EU' => $two('eu-1'),
    'region/continent/AS' => $two('asia-1'),
    'region/continent/AF' => '{"shard":"","origins":[]}',
    'region/continent/ZZ' => $two('never-1'),
    'policy/global' => '{"default":"US","failover":["continent/EU"],"continent_of":{"TR":"EU","EG":"AS","CY":"Europe"}}',
];
$path = "$dir/chain.json";
dw_publish($path, 7, $kvs);
$router = new RegionRouter($path);
$shard = fn (string $geo, ?string $sticky = null) => $router->resolve($geo, $sticky)['shard'];

foreach ([
    'PT' => 'eu-1', 'PT-11' => 'eu-1', 'US-CA' => 'ca-1', 'US-NY' => 'us-2', 'AS' => 'samoa-1',
    'JP' => 'asia-1', 'TR' => 'eu-1', 'EG' => 'asia-1', 'CY' => 'eu-1', 'KE' => 'us-2', 'XX' => 'us-2',
    'T1' => 'us-2', 'XK' => 'eu-1', 'continent/EU' => 'us-2', 'continent/ZZ' => 'us-2', 'pt' => 'us-2',
    'US-' => 'us-2', 'US-CALI' => 'us-2', '' => 'us-2', "PT\0" => 'us-2',
] as $geo => $expected) {
    dw_check("'" . addcslashes((string) $geo, "\0") . "'", $shard((string) $geo), $expected);
}

// A subdivision answered by its country hashes the country, so it lands with it.
$same = true;
foreach (range(1, 50) as $i) {
    $same = $same && $router->resolve('US-NY') === $router->resolve('US')
        && $router->resolve('US-NY', "v$i") === $router->resolve('US', "v$i");
}
dw_check('US-NY lands where US does', $same, true);
$moved = false;
foreach (range(1, 50) as $i) {
    $moved = $moved || $router->resolve('US-CA', "v$i") !== $router->resolve('US', "v$i");
}
dw_check('US-CA has its own region', $moved, true);

// Invalid bucket keys are listed, the bucket of no continent among them.
$invalid = array_keys($router->stats()['invalid']);
sort($invalid);
dw_check('invalid keys', $invalid, ['/dw/routing/region/continent/AF', '/dw/routing/region/continent/ZZ']);

// No bucket keys and country codes only: as before buckets.
dw_publish("$dir/plain.json", 8, ['region/DE' => $two('eu-1'), 'region/US' => $two('us-2')]);
$plain = new RegionRouter("$dir/plain.json");
$weights = ['us-2-a' => 1, 'us-2-b' => 1];
foreach (['PT', 'KE', 'XX', 'AS'] as $country) {
    dw_check("plain: $country to the default, hashing $country", $plain->resolve($country),
        dw_route('us-2', dw_legacy_pick(['us-2-a', 'us-2-b'], $weights, $country)));
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   'PT'
ok   'PT-11'
ok   'US-CA'
ok   'US-NY'
ok   'AS'
ok   'JP'
ok   'TR'
ok   'EG'
ok   'CY'
ok   'KE'
ok   'XX'
ok   'T1'
ok   'XK'
ok   'continent/EU'
ok   'continent/ZZ'
ok   'pt'
ok   'US-'
ok   'US-CALI'
ok   ''
ok   'PT\000'
ok   US-NY lands where US does
ok   US-CA has its own region
ok   invalid keys
ok   plain: PT to the default, hashing PT
ok   plain: KE to the default, hashing KE
ok   plain: XX to the default, hashing XX
ok   plain: AS to the default, hashing AS
