--TEST--
dw_router.engine_shortcuts=none: the ordinary paths (ext-php-rs's object handlers and constructor, parsed arguments, route arrays built per call) behave as the shortcuts do
--EXTENSIONS--
dw_router
--INI--
dw_router.snapshot_path={PWD}/fixtures/basic.json
dw_router.engine_shortcuts=none
--FILE--
<?php
ob_start();
phpinfo(INFO_MODULES);
preg_match('/^engine shortcuts => (.*)$/m', ob_get_clean(), $m);
echo $m[1], "\n";

$picks = __DIR__ . '/fixtures/picks.json';
$class = 'RegionRouter';
$forms = [
    'new RegionRouter()' => fn () => new RegionRouter(),
    'new RegionRouter(null)' => fn () => new RegionRouter(null),
    'new RegionRouter($picks)' => fn () => new RegionRouter($picks),
    'new RegionRouter(...[$picks])' => fn () => new RegionRouter(...[$picks]),
    'new $class()' => fn () => new $class(),
    'newInstance($picks)' => fn () => (new ReflectionClass('RegionRouter'))->newInstance($picks),
];
foreach ($forms as $form => $make) {
    echo $form, ': ', $make()->revision(), "\n";
}

$router = new RegionRouter();
// Twice each: a second answer would come from a memo, were it on.
foreach (['FR', 'FR', 'ZZ', 'ZZ'] as $country) {
    echo $country, ': ', json_encode($router->resolve($country)), "\n";
}
echo json_encode($router->resolve('FR', 'visitor-7')), ' ', json_encode($router->resolve(country: 'FR', stickyKey: null)), "\n";
$route = $router->resolve('FR');
$route['shard'] = 'changed';
echo json_encode($router->resolve('FR')), "\n";

foreach ([fn () => new RegionRouter('rel/path.json'), fn () => $router->resolve(), fn () => $router->resolve([]), fn () => new RegionRouter($picks, 'extra')] as $call) {
    try {
        $call();
    } catch (Throwable $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
}
?>
--EXPECTF--
on (PHP API %d) except bare_new, lean_objects, frame_arguments, immutable_routes, route_memo (dw_router.engine_shortcuts)
new RegionRouter(): 1234
new RegionRouter(null): 1234
new RegionRouter($picks): 31
new RegionRouter(...[$picks]): 31
new $class(): 1234
newInstance($picks): 31
FR: {"shard":"eu-2","origin":"par-a"}
FR: {"shard":"eu-2","origin":"par-a"}
ZZ: %s
ZZ: %s
%s %s
{"shard":"eu-2","origin":"par-a"}
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "rel/path.json" given
ArgumentCountError: RegionRouter::resolve() expects at least 1 argument, 0 given
TypeError: RegionRouter::resolve(): Argument #1 ($country) must be of type string, array given
ArgumentCountError: RegionRouter::__construct() expects at most 1 argument, 2 given
