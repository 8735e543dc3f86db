--TEST--
answeredRevision(): the revision of the table the object's last resolve() answered from, which a reload landing after it does not change; revision() before any resolve()
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$publish(1);

$router = new RegionRouter($path);
$other = new RegionRouter($path);
echo 'before any resolve: ', $router->answeredRevision(), ' ', $router->revision(), "\n";
echo 'resolve: ', $router->resolve('DE')['shard'], ' at ', $router->answeredRevision(), "\n";

// A reload lands between the route and the report: the answer's revision stays its own.
$publish(2);
var_dump(dw_wait_until(fn () => $router->revision() === 2));
echo 'after the reload: answered ', $router->answeredRevision(), ', current ', $router->revision(), "\n";
// Per object: another router has answered nothing yet.
echo 'other object: ', $other->answeredRevision(), "\n";
echo 'resolve again: ', $router->resolve('DE')['shard'], ' at ', $router->answeredRevision(), "\n";
// A country without a region (fail-open) still reports the table it looked in.
echo 'fail-open: ', $router->resolve('ZZ')['shard'], ' at ', $router->answeredRevision(), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
before any resolve: 1 1
resolve: eu-1 at 1
bool(true)
after the reload: answered 1, current 2
other object: 2
resolve again: eu-2 at 2
fail-open: us-1 at 2
