--TEST--
resolve(): argument count errors, named arguments, dynamic calls, by-reference arguments
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$router = new RegionRouter(__DIR__ . '/fixtures/basic.json');
$de = $router->resolve('DE');
$deSticky = $router->resolve('DE', 'visitor-9');

foreach ([
    'no argument' => fn () => $router->resolve(),
    'four arguments' => fn () => $router->resolve('DE', null, 1, 'extra'),
    'named stickyKey only' => fn () => $router->resolve(stickyKey: 'x'),
    'unknown named argument' => fn () => $router->resolve('DE', region: 'x'),
    'country twice' => fn () => $router->resolve('DE', country: 'FR'),
] as $name => $call) {
    try {
        $call();
        echo "$name: no error\n";
    } catch (Throwable $e) {
        echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n";
    }
}

var_dump($router->resolve(country: 'DE') === $de);
var_dump($router->resolve(stickyKey: 'visitor-9', country: 'DE') === $deSticky);
var_dump($router->resolve('DE', stickyKey: null) === $de);
var_dump(call_user_func([$router, 'resolve'], 'DE', 'visitor-9') === $deSticky);
var_dump(call_user_func_array([$router, 'resolve'], ['stickyKey' => 'visitor-9', 'country' => 'DE']) === $deSticky);
var_dump(array_map([$router, 'resolve'], ['DE', 'FR']) === [$de, $router->resolve('FR')]);
$method = 'resolve';
var_dump($router->$method('DE') === $de);
$closure = $router->resolve(...);
var_dump($closure('DE', 'visitor-9') === $deSticky);
var_dump((new ReflectionMethod('RegionRouter', 'resolve'))->invoke($router, 'DE') === $de);
// Arguments that are references are read through.
$country = 'DE';
$key = 'visitor-9';
$args = [&$country, &$key];
var_dump($router->resolve(...$args) === $deSticky);
$refs = ['c' => 'DE'];
$ref = &$refs['c'];
var_dump($router->resolve($ref) === $de);
?>
--EXPECT--
no argument: ArgumentCountError: RegionRouter::resolve() expects at least 1 argument, 0 given
four arguments: ArgumentCountError: RegionRouter::resolve() expects at most 3 arguments, 4 given
named stickyKey only: ArgumentCountError: RegionRouter::resolve(): Argument #1 ($country) not passed
unknown named argument: Error: Unknown named parameter $region
country twice: Error: Named parameter $country overwrites previous argument
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
bool(true)
