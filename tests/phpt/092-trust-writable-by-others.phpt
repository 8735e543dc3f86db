--TEST--
trust: a snapshot writable by group or others, or in a directory writable by them (not sticky), is refused
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish_fixture($path, 'basic.json');
$router = new RegionRouter($path);
echo dw_refusal($router, $dir);
$hostile = dw_fixture('hostile-max-revision.json');

// Root's own file, but anyone could have rewritten it since.
foreach ([0666, 0664, 0646, 0620] as $mode) {
    dw_plant($path, $hostile, 0, $mode);
    $router->reload();
    echo dw_refusal($router, $dir);
}
// A good mode again loads (root's file in root's directory).
dw_plant($path, dw_snapshot(7, ['region/DE' => dw_region('eu-7', ['a'], ['a' => 1])]), 0, 0640);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);

// The directory: group- or world-writable without the sticky bit lets anyone replace it.
foreach ([0777, 0775, 0757] as $mode) {
    chmod($dir, $mode);
    dw_plant($path, $hostile, 0, 0644);
    $router->reload();
    echo dw_refusal($router, $dir);
}
chmod($dir, 0755);
dw_publish_fixture($path, 'basic.json');
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision=1234 DE=eu-1 loads=1 failed=0 error=
revision=1234 DE=eu-1 loads=1 failed=1 error=refused DIR/routing.json: writable by group or others (mode 0666)
revision=1234 DE=eu-1 loads=1 failed=2 error=refused DIR/routing.json: writable by group or others (mode 0664)
revision=1234 DE=eu-1 loads=1 failed=3 error=refused DIR/routing.json: writable by group or others (mode 0646)
revision=1234 DE=eu-1 loads=1 failed=4 error=refused DIR/routing.json: writable by group or others (mode 0620)
revision=7 DE=eu-7 loads=2 failed=4 error=
revision=7 DE=eu-7 loads=2 failed=5 error=refused DIR/routing.json: its directory is writable by group or others (mode 0777)
revision=7 DE=eu-7 loads=2 failed=6 error=refused DIR/routing.json: its directory is writable by group or others (mode 0775)
revision=7 DE=eu-7 loads=2 failed=7 error=refused DIR/routing.json: its directory is writable by group or others (mode 0757)
revision=1234 DE=eu-1 loads=3 failed=7 error=
