--TEST--
Two snapshot paths in one directory spelled two ways (symlink, "..") both keep reloading
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
mkdir("$dir/real");
mkdir("$dir/real/sub");
symlink("$dir/real", "$dir/link");
foreach (['a', 'b', 'c'] as $name) {
    dw_publish("$dir/real/$name.json", 1, []);
}
// Each router's watch exists before the next router is made (a router for another
// directory while the watcher is busy is 059's subject, not this test's).
$watched = fn (RegionRouter $router) => dw_wait_until(fn () => $router->stats()['reload_mechanism'] === 'inotify');
$a = new RegionRouter("$dir/real/a.json");
var_dump($watched($a));
$b = new RegionRouter("$dir/link/b.json");        // the same directory through a symlink
var_dump($watched($b));
$c = new RegionRouter("$dir/real/sub/../c.json"); // and with a ".." segment
var_dump($watched($c));
foreach (['a', 'b', 'c'] as $name) {
    dw_publish("$dir/real/$name.json", 2, []);
}
foreach (['a' => $a, 'b' => $b, 'c' => $c] as $name => $router) {
    echo "$name: ", json_encode(dw_wait_until(fn () => $router->revision() === 2, 1.0)), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
bool(true)
bool(true)
bool(true)
a: true
b: true
c: true
