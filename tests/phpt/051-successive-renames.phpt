--TEST--
Many successive renames: each is seen in turn, a burst settles on the last one; loads counts them
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, [
    'region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1]),
]);
$publish(1);
$router = new RegionRouter($path);
$others = [new RegionRouter($path), new RegionRouter($path)];

// One at a time: every revision is observed, by every router object.
$seen = [];
for ($rev = 2; $rev <= 15; $rev++) {
    $publish($rev);
    $ok = dw_wait_until(fn () => $router->revision() === $rev);
    $route = $router->resolve('DE');
    $seen[] = $ok && $route === ['shard' => "eu-$rev", 'origin' => "o-$rev"]
        && $others[0]->resolve('DE') === $route && $others[1]->revision() === $rev;
}
var_dump(count(array_filter($seen)), $router->stats()['loads']);

// A burst: 20 renames back to back. The router may coalesce them, but must end on the last.
for ($rev = 16; $rev <= 35; $rev++) {
    $publish($rev);
}
var_dump(dw_wait_until(fn () => $router->revision() === 35));
var_dump($router->resolve('DE'));
$loads = $router->stats()['loads'];
var_dump($loads >= 16 && $loads <= 35, $router->stats()['failed_loads']);
// Revisions may also go backwards (a new etcd cluster): the file is the truth.
$publish(3);
var_dump(dw_wait_until(fn () => $router->revision() === 3), $router->resolve('DE')['origin']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(14)
int(15)
bool(true)
array(2) {
  ["shard"]=>
  string(5) "eu-35"
  ["origin"]=>
  string(4) "o-35"
}
bool(true)
int(0)
bool(true)
string(3) "o-3"
