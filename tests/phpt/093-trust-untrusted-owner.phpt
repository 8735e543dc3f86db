--TEST--
trust: by default a snapshot owned by neither root nor its directory's owner is refused
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

// uid 65534 stands in for any other user: its file in root's directory.
dw_plant($path, dw_fixture('hostile-max-revision.json'), 65534);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);

// The directory's owner is the agent's user (as /run/dw-router is): its files load, root's
// too, another user's do not.
chown($dir, 65534);
dw_plant($path, dw_snapshot(8, ['region/DE' => dw_region('eu-agent', ['a'], ['a' => 1])]), 65534);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
dw_plant($path, dw_snapshot(9, ['region/DE' => dw_region('eu-root', ['a'], ['a' => 1])]), 0);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
dw_plant($path, dw_fixture('hostile-max-revision.json'), 4242);
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
revision=1234 DE=eu-1 loads=1 failed=1 error=refused DIR/routing.json: owned by uid 65534, not root or the directory's owner 0
revision=8 DE=eu-agent loads=2 failed=1 error=
revision=9 DE=eu-root loads=3 failed=1 error=
revision=9 DE=eu-root loads=3 failed=2 error=refused DIR/routing.json: owned by uid 4242, not root or the directory's owner 65534
