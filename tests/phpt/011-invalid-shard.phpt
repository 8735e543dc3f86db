--TEST--
Invalid region class 2: shard missing, empty or not a string
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/invalid-values.json');
dw_check_invalid($router, [
    's-missing' => 'shard',
    's-empty' => 'shard',
    's-number' => 'shard',
    's-null' => 'shard',
    's-array' => 'shard',
], dw_route('us-2', 'iad-b'));
dw_check('DE routes', $router->resolve('DE'), dw_route('eu-1', 'fra-a'));
dw_check('US routes', $router->resolve('US'), dw_route('us-2', 'iad-b'));
?>
--EXPECT--
ok   s-missing listed as invalid
ok   s-missing message names `shard`
ok   s-missing is absent for routing
ok   s-missing is absent for routing (sticky)
ok   s-empty listed as invalid
ok   s-empty message names `shard`
ok   s-empty is absent for routing
ok   s-empty is absent for routing (sticky)
ok   s-number listed as invalid
ok   s-number message names `shard`
ok   s-number is absent for routing
ok   s-number is absent for routing (sticky)
ok   s-null listed as invalid
ok   s-null message names `shard`
ok   s-null is absent for routing
ok   s-null is absent for routing (sticky)
ok   s-array listed as invalid
ok   s-array message names `shard`
ok   s-array is absent for routing
ok   s-array is absent for routing (sticky)
ok   DE routes
ok   US routes
