--TEST--
ini: dw_router.snapshot_path set at startup is the default router's path; an explicit path still wins
--EXTENSIONS--
dw_router
--INI--
dw_router.snapshot_path={PWD}/fixtures/basic.json
--FILE--
<?php
var_dump(ini_get('dw_router.snapshot_path') === __DIR__ . '/fixtures/basic.json');
var_dump(ini_set('dw_router.snapshot_path', '/elsewhere.json'));
$router = new RegionRouter();
var_dump($router->revision(), $router->stats()['path'] === __DIR__ . '/fixtures/basic.json');
var_dump($router->resolve('FR'));
$null = new RegionRouter(null);
var_dump($null->revision(), $null->stats()['loads']);   // the same table: one load
$explicit = new RegionRouter(__DIR__ . '/fixtures/picks.json');
var_dump($explicit->revision());
var_dump((new RegionRouter())->revision());
?>
--EXPECT--
bool(true)
bool(false)
int(1234)
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-2"
  ["origin"]=>
  string(5) "par-a"
}
int(1234)
int(1)
int(31)
int(1234)
