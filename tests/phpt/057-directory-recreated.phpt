--TEST--
The snapshot's directory removed and created again (or replaced by rename): later snapshots are still picked up without reload()
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
$dir = "$base/shm";
mkdir($dir);
$path = "$dir/dw-routing.json";
dw_publish($path, 1, []);
$router = new RegionRouter($path);
var_dump($router->revision());

unlink($path);
rmdir($dir);
usleep(20000);
mkdir($dir);
dw_publish($path, 2, []);
echo 'recreated: ', json_encode(dw_wait_until(fn () => $router->revision() === 2, 1.0)), "\n";

// Replaced by rename: the old directory moves away, a new one takes its name.
mkdir("$base/shm.new");
dw_publish("$base/shm.new/dw-routing.json", 3, []);
rename($dir, "$base/shm.old");
rename("$base/shm.new", $dir);
echo 'replaced: ', json_encode(dw_wait_until(fn () => $router->revision() === 3, 1.0)), "\n";
dw_publish($path, 4, []);
echo 'next publish: ', json_encode(dw_wait_until(fn () => $router->revision() === 4, 1.0)), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(1)
recreated: true
replaced: true
next publish: true
