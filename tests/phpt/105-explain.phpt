--TEST--
explain(): the chain walked step by step, skip reasons, fail-open labelled
--EXTENSIONS--
dw_router
--INI--
dw_router.fallback_shard=open-1
dw_router.fallback_origin=open-a
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

$one = fn (string $shard) => dw_region($shard, ["$shard-a"], ["$shard-a" => 1]);
dw_publish("$dir/explain.json", 11, [
    'region/DE-BY' => '{"shard":"","origins":[]}',
    'region/continent/EU' => $one('eu-1'),
    'policy/global' => '{"default":"ZZ","failover":["continent/NA","continent/EU"],"continent_of":{"TR":"EU"}}',
]);
$router = new RegionRouter("$dir/explain.json");

function steps(array $explanation): string
{
    return implode(' | ', array_map(
        fn (array $s) => $s['stage'] . (isset($s['index']) ? "[{$s['index']}]" : '') . ' ' . ($s['geo'] ?? '-') . ': '
            . $s['outcome'] . (isset($s['reason']) ? " ({$s['reason']})" : ''),
        $explanation['steps'],
    ));
}

foreach ([['DE-BY', null], ['TR', null], ['XX', null], ['T1', 'visitor-9'], ['continent/EU', null], ['JP', null]] as [$geo, $sticky]) {
    $e = $router->explain($geo, $sticky);
    echo "$geo: ", steps($e), "\n";
    echo '  => ', $e['fail_open'] ? 'FAIL-OPEN ' : '', $e['shard'], '/', $e['origin'], ' by ', $e['answered_by'] ?? '-',
        ', hash ', $e['hash_key'] ?? '-', ' (', $e['hash_key_from'] ?? '-', '), continent ', $e['continent'] ?? '-',
        ' from ', $e['continent_source'] ?? '-', "\n";
    // explain() answers what resolve() answers.
    dw_check("  $geo same as resolve()", ['shard' => $e['shard'], 'origin' => $e['origin']], $router->resolve($geo, $sticky));
}
$e = $router->explain('DE');
dw_check('revision', $e['revision'], 11);
dw_check('table source', $e['continent_table'], 'countries-list 3.4.1 (annexare/Countries, MIT)');
dw_check('an empty geo', steps($router->explain('')), 'geo : no key | default ZZ: no key | failover[0] continent/NA: no key | failover[1] continent/EU: answered');
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
DE-BY: subdivision DE-BY: invalid (region: field `shard`: is empty) | country DE: no key | continent continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash DE (country), continent EU from table
ok     DE-BY same as resolve()
TR: country TR: no key | continent continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash TR (country), continent EU from policy.continent_of
ok     TR same as resolve()
XX: country XX: no key | continent -: no continent | default ZZ: no key | failover[0] continent/NA: no key | failover[1] continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash XX (country), continent - from -
ok     XX same as resolve()
T1: geo T1: no key | default ZZ: no key | failover[0] continent/NA: no key | failover[1] continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash visitor-9 (sticky), continent - from -
ok     T1 same as resolve()
continent/EU: geo continent/EU: bucket namespace | default ZZ: no key | failover[0] continent/NA: no key | failover[1] continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash continent/EU (geo), continent - from -
ok     continent/EU same as resolve()
JP: country JP: no key | continent continent/AS: no key | default ZZ: no key | failover[0] continent/NA: no key | failover[1] continent/EU: answered
  => eu-1/eu-1-a by /dw/routing/region/continent/EU, hash JP (country), continent AS from table
ok     JP same as resolve()
ok   revision
ok   table source
ok   an empty geo
