--TEST--
Invalid region class 1: not JSON, or not a JSON object (key skipped, others route)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/invalid-values.json');
$stats = $router->stats();
var_dump($stats['revision'], $stats['regions'], $stats['invalid_keys'], count($stats['invalid']));

dw_check_invalid($router, [
    'j-syntax' => 'json',
    'j-array' => 'json',
    'j-string' => 'json',
    'j-number' => 'json',
    'j-null' => 'json',
    'j-empty' => 'json',
    'j-trailing' => 'json',
    'j-too-deep' => 'json',   // PHP's json_decode() stops at depth 512
], dw_route('us-2', 'iad-b'));

// The neighbours still route.
dw_check('DE routes', $router->resolve('DE'), dw_route('eu-1', 'fra-a'));
dw_check('US routes', $router->resolve('US'), dw_route('us-2', 'iad-b'));
?>
--EXPECT--
int(77)
int(7)
int(38)
int(38)
ok   j-syntax listed as invalid
ok   j-syntax message names `json`
ok   j-syntax is absent for routing
ok   j-syntax is absent for routing (sticky)
ok   j-array listed as invalid
ok   j-array message names `json`
ok   j-array is absent for routing
ok   j-array is absent for routing (sticky)
ok   j-string listed as invalid
ok   j-string message names `json`
ok   j-string is absent for routing
ok   j-string is absent for routing (sticky)
ok   j-number listed as invalid
ok   j-number message names `json`
ok   j-number is absent for routing
ok   j-number is absent for routing (sticky)
ok   j-null listed as invalid
ok   j-null message names `json`
ok   j-null is absent for routing
ok   j-null is absent for routing (sticky)
ok   j-empty listed as invalid
ok   j-empty message names `json`
ok   j-empty is absent for routing
ok   j-empty is absent for routing (sticky)
ok   j-trailing listed as invalid
ok   j-trailing message names `json`
ok   j-trailing is absent for routing
ok   j-trailing is absent for routing (sticky)
ok   j-too-deep listed as invalid
ok   j-too-deep message names `json`
ok   j-too-deep is absent for routing
ok   j-too-deep is absent for routing (sticky)
ok   DE routes
ok   US routes
