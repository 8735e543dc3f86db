--TEST--
resolve(): the candidate chain country -> policy.default -> policy.failover, in order
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

$regions = [
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'region/GB' => dw_region('uk-1', ['lon-a'], ['lon-a' => 1]),
    'region/US' => dw_region('us-2', ['iad-b'], ['iad-b' => 1]),
    'region/BAD' => '{"shard":"bad-1","origins":[],"weight":{}}',
];
$de = dw_route('eu-1', 'fra-a');
$gb = dw_route('uk-1', 'lon-a');
$us = dw_route('us-2', 'iad-b');
$open = dw_route('us-1', 'iad-a');

// name => [policy value or null for no policy key, extra kvs, [country => expected route]]
$cases = [
    'no policy: default US' => [null, [], ['DE' => $de, 'XX' => $us, '' => $us]],
    'default names a region' => ['{"default":"GB","failover":["DE"]}', [], ['XX' => $gb, 'DE' => $de, 'US' => $us]],
    'default without region, failover in order' => ['{"default":"ZZ","failover":["YY","DE","GB"]}', [], ['XX' => $de, 'GB' => $gb]],
    'default invalid region, failover' => ['{"default":"BAD","failover":["GB","DE"]}', [], ['XX' => $gb, 'BAD' => $gb]],
    'country invalid region goes down the chain' => ['{"default":"DE"}', [], ['BAD' => $de]],
    'failover non-strings ignored' => ['{"default":"ZZ","failover":[1,null,["GB"],{"g":"GB"},true,"DE"]}', [], ['XX' => $de]],
    'default non-string means US' => ['{"default":42,"failover":["DE"]}', [], ['XX' => $us]],
    'default null means US' => ['{"default":null,"failover":["DE"]}', [], ['XX' => $us]],
    'failover not an array is empty' => ['{"default":"ZZ","failover":"DE"}', [], ['XX' => $open, 'DE' => $de]],
    'failover object is empty' => ['{"default":"ZZ","failover":{"0":"DE"}}', [], ['XX' => $open]],
    'policy not an object: defaults apply' => ['["GB"]', [], ['XX' => $us]],
    'policy not JSON: defaults apply' => ['{default:GB}', [], ['XX' => $us]],
    'empty default string' => ['{"default":"","failover":["GB"]}', [], ['XX' => $gb]],
    'empty default string with region/ key' => ['{"default":"","failover":["GB"]}', ['region/' => dw_region('empty-1', ['e'], ['e' => 1])], ['XX' => $gb, '' => $gb]],
    'nothing in the chain routes' => ['{"default":"ZZ","failover":["YY","BAD"]}', [], ['XX' => $open, 'GB' => $gb]],
    'failover repeats and default again' => ['{"default":"ZZ","failover":["ZZ","ZZ","US"]}', [], ['XX' => $us]],
];

$n = 0;
foreach ($cases as $name => [$policy, $extra, $answers]) {
    $kvs = $regions + $extra;
    if ($policy !== null) {
        $kvs['policy/global'] = $policy;
    }
    $path = "$dir/case" . $n++ . '.json';
    dw_publish($path, 100 + $n, $kvs);
    $router = new RegionRouter($path);
    foreach ($answers as $country => $route) {
        dw_check("$name: '$country'", $router->resolve($country), $route);
        dw_check("$name: '$country' sticky", $router->resolve($country, 'visitor-1'), $route);
    }
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   no policy: default US: 'DE'
ok   no policy: default US: 'DE' sticky
ok   no policy: default US: 'XX'
ok   no policy: default US: 'XX' sticky
ok   no policy: default US: ''
ok   no policy: default US: '' sticky
ok   default names a region: 'XX'
ok   default names a region: 'XX' sticky
ok   default names a region: 'DE'
ok   default names a region: 'DE' sticky
ok   default names a region: 'US'
ok   default names a region: 'US' sticky
ok   default without region, failover in order: 'XX'
ok   default without region, failover in order: 'XX' sticky
ok   default without region, failover in order: 'GB'
ok   default without region, failover in order: 'GB' sticky
ok   default invalid region, failover: 'XX'
ok   default invalid region, failover: 'XX' sticky
ok   default invalid region, failover: 'BAD'
ok   default invalid region, failover: 'BAD' sticky
ok   country invalid region goes down the chain: 'BAD'
ok   country invalid region goes down the chain: 'BAD' sticky
ok   failover non-strings ignored: 'XX'
ok   failover non-strings ignored: 'XX' sticky
ok   default non-string means US: 'XX'
ok   default non-string means US: 'XX' sticky
ok   default null means US: 'XX'
ok   default null means US: 'XX' sticky
ok   failover not an array is empty: 'XX'
ok   failover not an array is empty: 'XX' sticky
ok   failover not an array is empty: 'DE'
ok   failover not an array is empty: 'DE' sticky
ok   failover object is empty: 'XX'
ok   failover object is empty: 'XX' sticky
ok   policy not an object: defaults apply: 'XX'
ok   policy not an object: defaults apply: 'XX' sticky
ok   policy not JSON: defaults apply: 'XX'
ok   policy not JSON: defaults apply: 'XX' sticky
ok   empty default string: 'XX'
ok   empty default string: 'XX' sticky
ok   empty default string with region/ key: 'XX'
ok   empty default string with region/ key: 'XX' sticky
ok   empty default string with region/ key: ''
ok   empty default string with region/ key: '' sticky
ok   nothing in the chain routes: 'XX'
ok   nothing in the chain routes: 'XX' sticky
ok   nothing in the chain routes: 'GB'
ok   nothing in the chain routes: 'GB' sticky
ok   failover repeats and default again: 'XX'
ok   failover repeats and default again: 'XX' sticky
