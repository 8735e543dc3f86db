--TEST--
Valid edge values: weight 0 and 1000000, -0, unlisted origins, extra fields, duplicate JSON keys (last wins); exact invalid list
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
// One watched directory in this test (routers for several directories: 059).
dw_publish_fixture("$dir/invalid-values.json", 'invalid-values.json');
$router = new RegionRouter("$dir/invalid-values.json");

foreach (['k1', 'k2', 'visitor-3', "\xff", ''] as $key) {
    dw_check("v-max '$key'", $router->resolve('v-max', $key), dw_route('v-max', 'a'));           // b has weight 0
    dw_check("v-minus-zero '$key'", $router->resolve('v-minus-zero', $key), dw_route('v-minus-zero', 'b')); // -0 is 0
    dw_check("v-unlisted '$key'", $router->resolve('v-unlisted', $key), dw_route('v-unlisted', 'a'));
    dw_check("v-extra '$key'", $router->resolve('v-extra', $key), dw_route('v-extra', 'a'));
    dw_check("v-dup-field '$key'", $router->resolve('v-dup-field', $key), dw_route('v-dup-field', 'a'));
}

// The invalid list is exactly the fixture's invalid keys, in key (byte) order.
$fixture = json_decode(file_get_contents(__DIR__ . '/fixtures/invalid-values.json'), true);
$expected = array_values(array_filter(
    array_keys($fixture['kvs']),
    fn ($k) => preg_match('~^/dw/routing/region/([jsowp]-|$)~', $k) === 1
));
sort($expected, SORT_STRING);
dw_check('invalid keys, exactly', array_keys($router->stats()['invalid']), $expected);
dw_check('invalid_keys count', $router->stats()['invalid_keys'], 38);

// Duplicate keys inside a value: first position, last value (as json_decode). In the
// weight object the duplicate moves weight to "a"; the legacy walk must see a=5, b=1.
$value = '{"shard":"dup-1","origins":["a","b"],"weight":{"a":0,"b":1,"a":5}}';
dw_publish("$dir/dup.json", 1, ['region/D' => $value]);
$dup = new RegionRouter("$dir/dup.json");
$decoded = json_decode($value, true);
var_dump($decoded['weight']);
$seen = [];
for ($i = 0; $i < 300; $i++) {
    $origin = $dup->resolve('D', "s$i")['origin'];
    $seen[$origin] = true;
    if ($origin !== dw_legacy_pick($decoded['origins'], $decoded['weight'], "s$i")) {
        echo "FAIL duplicate weight key, s$i\n";
    }
}
ksort($seen);
var_dump(array_keys($seen));

// Duplicate snapshot keys: the last value wins.
dw_write_atomic("$dir/dupkeys.json", '{"format":1,"revision":2,"kvs":{'
    . '"/dw/routing/region/D":' . json_encode(dw_region('first-1', ['f'], ['f' => 1])) . ','
    . '"/dw/routing/region/D":' . json_encode(dw_region('last-1', ['l'], ['l' => 1])) . '}}');
$dupkeys = new RegionRouter("$dir/dupkeys.json");
var_dump($dupkeys->resolve('D'), $dupkeys->stats()['regions']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECTF--
ok   v-max 'k1'
ok   v-minus-zero 'k1'
ok   v-unlisted 'k1'
ok   v-extra 'k1'
ok   v-dup-field 'k1'
ok   v-max 'k2'
ok   v-minus-zero 'k2'
ok   v-unlisted 'k2'
ok   v-extra 'k2'
ok   v-dup-field 'k2'
ok   v-max 'visitor-3'
ok   v-minus-zero 'visitor-3'
ok   v-unlisted 'visitor-3'
ok   v-extra 'visitor-3'
ok   v-dup-field 'visitor-3'
ok   v-max '%s'
ok   v-minus-zero '%s'
ok   v-unlisted '%s'
ok   v-extra '%s'
ok   v-dup-field '%s'
ok   v-max ''
ok   v-minus-zero ''
ok   v-unlisted ''
ok   v-extra ''
ok   v-dup-field ''
ok   invalid keys, exactly
ok   invalid_keys count
array(2) {
  ["a"]=>
  int(5)
  ["b"]=>
  int(1)
}
array(2) {
  [0]=>
  string(1) "a"
  [1]=>
  string(1) "b"
}
array(2) {
  ["shard"]=>
  string(6) "last-1"
  ["origin"]=>
  string(1) "l"
}
int(1)
