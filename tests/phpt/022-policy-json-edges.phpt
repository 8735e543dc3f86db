--TEST--
policy(): JSON edge values read as json_decode() reads them (keys that look numeric, NUL in keys, -0, 1E400, big integers)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$policy = '{"":1,"\u0000x":2,"123456789012345678901234567890":3,"9223372036854775807":4,'
    . '"-9223372036854775808":5,"9223372036854775808":6,"0":7,"-1":8," 1":9,"1 ":10,"1e3":11,'
    . '"0x1":12,"+1":13,"\u00e9":14,"a":{"":{"0":[]}},"big":-9223372036854775809,'
    . '"zero":-0,"negzero":-0.0,"inf":1E400,"list":[-0,1E400,-1E400]}';
dw_publish("$dir/p.json", 1, ['policy/global' => $policy]);
$router = new RegionRouter("$dir/p.json");
$actual = $router->policy();
$expected = json_decode($policy, true);
foreach ($expected as $key => $value) {
    dw_check(json_encode((string) $key) . ' key and value', [array_key_exists($key, $actual), $actual[$key] ?? null], [true, $value]);
}
dw_check('whole array, order and types', $actual === $expected, true);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   "" key and value
ok   "\u0000x" key and value
ok   "123456789012345678901234567890" key and value
ok   "9223372036854775807" key and value
ok   "-9223372036854775808" key and value
ok   "9223372036854775808" key and value
ok   "0" key and value
ok   "-1" key and value
ok   " 1" key and value
ok   "1 " key and value
ok   "1e3" key and value
ok   "0x1" key and value
ok   "+1" key and value
ok   "\u00e9" key and value
ok   "a" key and value
ok   "big" key and value
ok   "zero" key and value
ok   "negzero" key and value
ok   "inf" key and value
ok   "list" key and value
ok   whole array, order and types
