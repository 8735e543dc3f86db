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
// (A pause between constructions lets the watcher drain its events: a router for another
// directory while it is busy is 059's subject, not this test's.)
$a = new RegionRouter("$dir/real/a.json");
usleep(100000);
$b = new RegionRouter("$dir/link/b.json");        // the same directory through a symlink
usleep(100000);
$c = new RegionRouter("$dir/real/sub/../c.json"); // and with a ".." segment
var_dump($a->stats()['reload_mechanism'], $b->stats()['reload_mechanism'], $c->stats()['reload_mechanism']);
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
string(7) "inotify"
string(7) "inotify"
string(7) "inotify"
a: true
b: true
c: true
