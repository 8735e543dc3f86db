--TEST--
RegionRouter objects: final, not cloneable, not serialisable, constructor called again, dumps, dynamic use; nothing crashes
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$basic = __DIR__ . '/fixtures/basic.json';
$router = new RegionRouter($basic);

$attempts = [
    'clone' => fn () => clone $router,
    'serialize' => fn () => serialize($router),
    'unserialize' => fn () => unserialize('O:12:"RegionRouter":0:{}'),
    'newInstanceWithoutConstructor' => fn () => (new ReflectionClass('RegionRouter'))->newInstanceWithoutConstructor(),
    'static call' => fn () => RegionRouter::revision(),
];
foreach ($attempts as $name => $attempt) {
    try {
        $attempt();
        echo "$name: allowed\n";
    } catch (Throwable $e) {
        echo "$name: ", get_class($e), ': ', $e->getMessage(), "\n";
    }
}
var_dump($router->revision(), (new ReflectionClass('RegionRouter'))->isFinal());

// Calling the constructor again re-targets the object; it keeps working.
$router->__construct(__DIR__ . '/fixtures/picks.json');
var_dump($router->revision(), $router->resolve('ONE'));
// The fixtures' watch exists before another directory is watched (a new directory while
// the watcher is busy is 059's subject).
var_dump(dw_wait_until(fn () => $router->stats()['reload_mechanism'] === 'inotify'));
$router->__construct();
var_dump($router->stats()['path']);
$router->__construct($basic);
var_dump($router->resolve('FR')['shard']);

var_dump($router);
echo json_encode($router), "\n";
var_dump((array) $router, get_object_vars($router), $router == new RegionRouter($basic), $router instanceof RegionRouter);

// Many short-lived objects, and objects collected mid-script.
for ($i = 0; $i < 10000; $i++) {
    $tmp = new RegionRouter($i % 2 ? $basic : __DIR__ . '/fixtures/picks.json');
}
unset($tmp, $router);
gc_collect_cycles();
echo "done\n";
?>
--EXPECTF--
clone: Error: Trying to clone an uncloneable object of class RegionRouter
serialize: Exception: Serialization of 'RegionRouter' is not allowed
unserialize: Exception: Unserialization of 'RegionRouter' is not allowed
newInstanceWithoutConstructor: ReflectionException: Class RegionRouter is an internal class marked as final that cannot be instantiated without invoking its constructor
static call: Error: Non-static method RegionRouter::revision() cannot be called statically
int(1234)
bool(true)
int(31)
array(2) {
  ["shard"]=>
  string(3) "p-5"
  ["origin"]=>
  string(2) "e1"
}
bool(true)
string(27) "/run/dw-router/routing.json"
string(4) "eu-2"
object(RegionRouter)#%d (0) {
}
{}
array(0) {
}
array(0) {
}
bool(%s)
bool(true)
done
