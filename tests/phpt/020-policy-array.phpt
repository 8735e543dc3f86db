--TEST--
policy(): the whole object as json_decode(..., true) gives it: unknown fields, nesting, numeric keys, order, types
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/policy-rich.json');
$fixture = json_decode(file_get_contents(__DIR__ . '/fixtures/policy-rich.json'), true);
$raw = $fixture['kvs']['/dw/routing/policy/global'];
$policy = $router->policy();

// Identical to json_decode: same keys in the same order, same types, same values.
var_dump($policy === json_decode($raw, true));
var_dump(array_keys($policy));
var_dump($policy['numeric']);
var_dump($policy['big'] === PHP_INT_MAX, $policy['huge'], $policy['ratio']);
var_dump($policy['limits'], $policy['tags'][2], $policy['empty_object'], $policy['empty_array']);
var_dump($policy['unicode'] === "Zürich \u{2603}", array_key_exists('nothing', $policy), $policy['nothing']);
var_dump($policy['failover']);

// The policy drives routing: default GB; failover keeps only strings.
var_dump($router->resolve('XX') === ['shard' => 'uk-1', 'origin' => 'lon-a']);
var_dump($router->stats()['invalid_keys']);

// policy() hands out a fresh array: changing it changes nothing for the router.
$policy['default'] = 'US';
$policy['limits']['rps'] = 1;
var_dump($router->policy()['default'], $router->policy()['limits']['rps']);
var_dump($router->resolve('XX') === ['shard' => 'uk-1', 'origin' => 'lon-a']);
?>
--EXPECT--
bool(true)
array(15) {
  [0]=>
  string(7) "default"
  [1]=>
  string(8) "failover"
  [2]=>
  string(4) "pick"
  [3]=>
  string(18) "honor_client_hints"
  [4]=>
  string(5) "owner"
  [5]=>
  string(5) "ratio"
  [6]=>
  string(3) "big"
  [7]=>
  string(4) "huge"
  [8]=>
  string(6) "limits"
  [9]=>
  string(4) "tags"
  [10]=>
  string(7) "numeric"
  [11]=>
  string(12) "empty_object"
  [12]=>
  string(11) "empty_array"
  [13]=>
  string(7) "unicode"
  [14]=>
  string(7) "nothing"
}
array(5) {
  [7]=>
  string(5) "seven"
  [-3]=>
  string(11) "minus three"
  ["07"]=>
  string(10) "zero seven"
  ["-0"]=>
  string(10) "minus zero"
  ["1.5"]=>
  string(5) "float"
}
bool(true)
float(1.8446744073709552E+19)
float(0.25)
array(2) {
  ["rps"]=>
  int(1200)
  ["burst"]=>
  array(2) {
    ["max"]=>
    int(5)
    ["window"]=>
    string(2) "1s"
  }
}
array(1) {
  ["c"]=>
  NULL
}
array(0) {
}
array(0) {
}
bool(true)
bool(true)
NULL
array(4) {
  [0]=>
  string(2) "US"
  [1]=>
  int(7)
  [2]=>
  NULL
  [3]=>
  string(2) "DE"
}
bool(true)
int(0)
string(2) "GB"
int(1200)
bool(true)
