--TEST--
explain(): a fail-open answer is labelled, with this node's ini route; no file yet
--EXTENSIONS--
dw_router
--INI--
dw_router.fallback_shard=open-1
dw_router.fallback_origin=open-a
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$router = new RegionRouter("$dir/absent.json");
$e = $router->explain('PT-11', 'k');
var_dump($e['fail_open'], $e['shard'], $e['origin'], $e['answered_by'], $e['hash_key'], count($e['steps']));
echo implode(',', array_column($e['steps'], 'outcome')), "\n";
var_dump($router->resolve('PT-11', 'k') === ['shard' => $e['shard'], 'origin' => $e['origin']]);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
bool(true)
string(6) "open-1"
string(6) "open-a"
NULL
NULL
int(4)
no key,no key,no key,no key
bool(true)
