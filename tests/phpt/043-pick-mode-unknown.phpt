--TEST--
policy.pick: only "rendezvous" selects rendezvous; absent, "legacy", unknown, wrong case, non-string keep legacy
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$weights = ['o1' => 1, 'o2' => 2, 'o3' => 3, 'o4' => 4];
$region = dw_region('m-1', array_keys($weights), $weights);
$keys = array_map(fn ($i) => "k$i", range(1, 200));

$picks = [
    'absent' => '{}',
    'legacy' => '{"pick":"legacy"}',
    'rendezvous' => '{"pick":"rendezvous"}',
    'Rendezvous' => '{"pick":"Rendezvous"}',
    'rendezvous + space' => '{"pick":"rendezvous "}',
    'consistent' => '{"pick":"consistent"}',
    'true' => '{"pick":true}',
    'array' => '{"pick":["rendezvous"]}',
    'null' => '{"pick":null}',
    'duplicate, last is rendezvous' => '{"pick":"legacy","pick":"rendezvous"}',
    'duplicate, last is legacy' => '{"pick":"rendezvous","pick":"legacy"}',
];
$i = 0;
foreach ($picks as $name => $policy) {
    $path = "$dir/p" . $i++ . '.json';
    dw_publish($path, 1, ['policy/global' => $policy, 'region/M' => $region]);
    $router = new RegionRouter($path);
    $legacy = $rendezvous = 0;
    foreach ($keys as $key) {
        $origin = $router->resolve('M', $key)['origin'];
        $l = dw_legacy_pick(array_keys($weights), $weights, $key);
        $r = dw_rendezvous_pick(array_keys($weights), $weights, $key);
        if ($l === $r) {
            continue;   // uninformative key
        }
        $origin === $l && $legacy++;
        $origin === $r && $rendezvous++;
    }
    echo str_pad($name, 32), $legacy > 0 && $rendezvous === 0 ? 'legacy' : ($rendezvous > 0 && $legacy === 0 ? 'rendezvous' : "mixed ($legacy/$rendezvous)"), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
absent                          legacy
legacy                          legacy
rendezvous                      rendezvous
Rendezvous                      legacy
rendezvous + space              legacy
consistent                      legacy
true                            legacy
array                           legacy
null                            legacy
duplicate, last is rendezvous   rendezvous
duplicate, last is legacy       legacy
