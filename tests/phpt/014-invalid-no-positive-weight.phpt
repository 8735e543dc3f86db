--TEST--
Invalid region class 5: no listed origin has a positive weight; a region key naming no geo
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/invalid-values.json');
dw_check_invalid($router, [
    'p-all-zero' => 'weight',
    'p-unlisted-only' => 'weight',
    'p-empty-object' => 'weight',
    '' => 'geo',
], dw_route('us-2', 'iad-b'));
dw_check('DE routes', $router->resolve('DE'), dw_route('eu-1', 'fra-a'));
dw_check('US routes', $router->resolve('US'), dw_route('us-2', 'iad-b'));
?>
--EXPECT--
ok   p-all-zero listed as invalid
ok   p-all-zero message names `weight`
ok   p-all-zero is absent for routing
ok   p-all-zero is absent for routing (sticky)
ok   p-unlisted-only listed as invalid
ok   p-unlisted-only message names `weight`
ok   p-unlisted-only is absent for routing
ok   p-unlisted-only is absent for routing (sticky)
ok   p-empty-object listed as invalid
ok   p-empty-object message names `weight`
ok   p-empty-object is absent for routing
ok   p-empty-object is absent for routing (sticky)
ok    listed as invalid
ok    message names `geo`
ok    is absent for routing
ok    is absent for routing (sticky)
ok   DE routes
ok   US routes
