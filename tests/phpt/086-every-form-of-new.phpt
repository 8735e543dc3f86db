--TEST--
Construction: a bare `new RegionRouter()` skips the constructor call (the default router is opened as the object is made); every other form of `new` still runs the constructor with its arguments
--EXTENSIONS--
dw_router
--INI--
dw_router.snapshot_path={PWD}/fixtures/basic.json
--FILE--
<?php
// basic.json (the ini default) is revision 1234, picks.json 31: the revision tells which
// path a router was opened with.
namespace Edge;

$picks = __DIR__ . '/fixtures/picks.json';
$class = 'RegionRouter';

function from_default(\RegionRouter $router = new \RegionRouter()): int
{
    return $router->revision();
}

function from_picks(\RegionRouter $router = new \RegionRouter(__DIR__ . '/fixtures/picks.json')): int
{
    return $router->revision();
}

function held(): \RegionRouter
{
    static $router = new \RegionRouter(__DIR__ . '/fixtures/picks.json');
    return $router;
}

const PICKS = new \RegionRouter(__DIR__ . '/fixtures/picks.json');

$forms = [
    'new RegionRouter()' => fn () => new \RegionRouter(),
    'new RegionRouter' => fn () => new \RegionRouter,
    '(new RegionRouter())->resolve()' => fn () => (new \RegionRouter())->resolve('FR') === ['shard' => 'eu-2', 'origin' => 'par-a'] ? 1234 : -1,
    'new RegionRouter(null)' => fn () => new \RegionRouter(null),
    'new RegionRouter($picks)' => fn () => new \RegionRouter($picks),
    'new RegionRouter(...[$picks])' => fn () => new \RegionRouter(...[$picks]),
    'new RegionRouter(...[])' => fn () => new \RegionRouter(...[]),
    'new RegionRouter(snapshotPath: $picks)' => fn () => new \RegionRouter(snapshotPath: $picks),
    'new $class()' => fn () => new $class(),
    'new $class($picks)' => fn () => new $class($picks),
    'newInstance()' => fn () => (new \ReflectionClass('RegionRouter'))->newInstance(),
    'newInstance($picks)' => fn () => (new \ReflectionClass('RegionRouter'))->newInstance($picks),
    'newInstanceArgs([$picks])' => fn () => (new \ReflectionClass('RegionRouter'))->newInstanceArgs([$picks]),
    'parameter default, bare' => fn () => from_default(),
    'parameter default, with a path' => fn () => from_picks(),
    'static variable' => fn () => held(),
    'global constant' => fn () => PICKS,
    'in a nested call' => fn () => \array_map(fn ($r) => $r->revision(), [new \RegionRouter(), new \RegionRouter($picks)]),
];
foreach ($forms as $form => $make) {
    $made = $make();
    $revision = $made instanceof \RegionRouter ? $made->revision() : $made;
    echo $form, ': ', \json_encode($revision), "\n";
}

// A bare router is a whole router: every method works on it.
$bare = new \RegionRouter();
\var_dump($bare->resolve('FR', 'visitor-7'), $bare->policy() !== null, $bare->stats()['path'] === __DIR__ . '/fixtures/basic.json', $bare->reload());

// Too many arguments still reach the constructor and fail there.
try {
    new \RegionRouter($picks, 'extra');
} catch (\ArgumentCountError $e) {
    echo \get_class($e), ': ', $e->getMessage(), "\n";
}
try {
    new \RegionRouter(...[$picks, 'extra']);
} catch (\ArgumentCountError $e) {
    echo \get_class($e), ': ', $e->getMessage(), "\n";
}
?>
--EXPECT--
new RegionRouter(): 1234
new RegionRouter: 1234
(new RegionRouter())->resolve(): 1234
new RegionRouter(null): 1234
new RegionRouter($picks): 31
new RegionRouter(...[$picks]): 31
new RegionRouter(...[]): 1234
new RegionRouter(snapshotPath: $picks): 31
new $class(): 1234
new $class($picks): 31
newInstance(): 1234
newInstance($picks): 31
newInstanceArgs([$picks]): 31
parameter default, bare: 1234
parameter default, with a path: 31
static variable: 31
global constant: 31
in a nested call: [1234,31]
array(2) {
  ["shard"]=>
  string(4) "eu-2"
  ["origin"]=>
  string(5) "par-a"
}
bool(true)
bool(true)
bool(false)
ArgumentCountError: RegionRouter::__construct() expects at most 1 argument, 2 given
ArgumentCountError: RegionRouter::__construct() expects at most 1 argument, 2 given
