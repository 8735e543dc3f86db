--TEST--
Invalid region class 3: origins missing, not an array, empty, non-string, empty name, duplicate
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/invalid-values.json');
dw_check_invalid($router, [
    'o-missing' => 'origins',
    'o-object' => 'origins',
    'o-string' => 'origins',
    'o-empty' => 'origins',
    'o-number' => 'origins',
    'o-null' => 'origins',
    'o-empty-name' => 'origins',
    'o-duplicate' => 'origins',
], dw_route('us-2', 'iad-b'));
dw_check('DE routes', $router->resolve('DE'), dw_route('eu-1', 'fra-a'));
dw_check('US routes', $router->resolve('US'), dw_route('us-2', 'iad-b'));
?>
--EXPECT--
ok   o-missing listed as invalid
ok   o-missing message names `origins`
ok   o-missing is absent for routing
ok   o-missing is absent for routing (sticky)
ok   o-object listed as invalid
ok   o-object message names `origins`
ok   o-object is absent for routing
ok   o-object is absent for routing (sticky)
ok   o-string listed as invalid
ok   o-string message names `origins`
ok   o-string is absent for routing
ok   o-string is absent for routing (sticky)
ok   o-empty listed as invalid
ok   o-empty message names `origins`
ok   o-empty is absent for routing
ok   o-empty is absent for routing (sticky)
ok   o-number listed as invalid
ok   o-number message names `origins`
ok   o-number is absent for routing
ok   o-number is absent for routing (sticky)
ok   o-null listed as invalid
ok   o-null message names `origins`
ok   o-null is absent for routing
ok   o-null is absent for routing (sticky)
ok   o-empty-name listed as invalid
ok   o-empty-name message names `origins`
ok   o-empty-name is absent for routing
ok   o-empty-name is absent for routing (sticky)
ok   o-duplicate listed as invalid
ok   o-duplicate message names `origins`
ok   o-duplicate is absent for routing
ok   o-duplicate is absent for routing (sticky)
ok   DE routes
ok   US routes
