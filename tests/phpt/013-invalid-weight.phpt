--TEST--
Invalid region class 4: weight not an object of integers 0..1000000 (50.0, 1e2, "50", -1, true, null, [], ...)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/invalid-values.json');
dw_check_invalid($router, [
    'w-missing' => 'weight',
    'w-empty-array' => 'weight',
    'w-list' => 'weight',
    'w-string' => 'weight',
    'w-float' => 'weight',
    'w-exponent' => 'weight',
    'w-numeric-string' => 'weight',
    'w-negative' => 'weight',
    'w-bool' => 'weight',
    'w-null' => 'weight',
    'w-over-max' => 'weight',
    'w-nested' => 'weight',
    'w-unlisted-bad' => 'weight',
], dw_route('us-2', 'iad-b'));
dw_check('DE routes', $router->resolve('DE'), dw_route('eu-1', 'fra-a'));
dw_check('US routes', $router->resolve('US'), dw_route('us-2', 'iad-b'));
?>
--EXPECT--
ok   w-missing listed as invalid
ok   w-missing message names `weight`
ok   w-missing is absent for routing
ok   w-missing is absent for routing (sticky)
ok   w-empty-array listed as invalid
ok   w-empty-array message names `weight`
ok   w-empty-array is absent for routing
ok   w-empty-array is absent for routing (sticky)
ok   w-list listed as invalid
ok   w-list message names `weight`
ok   w-list is absent for routing
ok   w-list is absent for routing (sticky)
ok   w-string listed as invalid
ok   w-string message names `weight`
ok   w-string is absent for routing
ok   w-string is absent for routing (sticky)
ok   w-float listed as invalid
ok   w-float message names `weight`
ok   w-float is absent for routing
ok   w-float is absent for routing (sticky)
ok   w-exponent listed as invalid
ok   w-exponent message names `weight`
ok   w-exponent is absent for routing
ok   w-exponent is absent for routing (sticky)
ok   w-numeric-string listed as invalid
ok   w-numeric-string message names `weight`
ok   w-numeric-string is absent for routing
ok   w-numeric-string is absent for routing (sticky)
ok   w-negative listed as invalid
ok   w-negative message names `weight`
ok   w-negative is absent for routing
ok   w-negative is absent for routing (sticky)
ok   w-bool listed as invalid
ok   w-bool message names `weight`
ok   w-bool is absent for routing
ok   w-bool is absent for routing (sticky)
ok   w-null listed as invalid
ok   w-null message names `weight`
ok   w-null is absent for routing
ok   w-null is absent for routing (sticky)
ok   w-over-max listed as invalid
ok   w-over-max message names `weight`
ok   w-over-max is absent for routing
ok   w-over-max is absent for routing (sticky)
ok   w-nested listed as invalid
ok   w-nested message names `weight`
ok   w-nested is absent for routing
ok   w-nested is absent for routing (sticky)
ok   w-unlisted-bad listed as invalid
ok   w-unlisted-bad message names `weight`
ok   w-unlisted-bad is absent for routing
ok   w-unlisted-bad is absent for routing (sticky)
ok   DE routes
ok   US routes
