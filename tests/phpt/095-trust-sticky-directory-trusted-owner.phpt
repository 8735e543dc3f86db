--TEST--
trust: dw_router.trusted_owner admits a sticky shared directory, for files of that user (or root) only
--EXTENSIONS--
dw_router
--INI--
dw_router.trusted_owner=65534
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
chmod($dir, 01777);
// uid 65534 plays the agent's user; uid 1001 another local user of the shared directory.
dw_plant($path, dw_fixture('basic.json'), 65534);
$router = new RegionRouter($path);
echo dw_refusal($router, $dir);
dw_plant($path, dw_fixture('hostile-max-revision.json'), 1001);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
dw_plant($path, dw_snapshot(5, ['region/DE' => dw_region('eu-root', ['a'], ['a' => 1])]), 0);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// Still: not writable by others, even by the trusted user's choice.
dw_plant($path, dw_fixture('hostile-max-revision.json'), 65534, 0666);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// Outside the shared directory the trusted owner's rule holds too: the directory's
// owner (root here) is not enough for a file of another user.
chmod($dir, 0755);
dw_plant($path, dw_fixture('hostile-max-revision.json'), 1001);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
dw_plant($path, dw_fixture('basic.json'), 65534);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// phpinfo names whose files are taken.
ob_start();
phpinfo(INFO_MODULES);
preg_match('/^trusted snapshot owner => .*$/m', ob_get_clean(), $m);
echo $m[0], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision=1234 DE=eu-1 loads=1 failed=0 error=
revision=1234 DE=eu-1 loads=1 failed=1 error=refused DIR/routing.json: owned by uid 1001, not root or the trusted owner 65534
revision=5 DE=eu-root loads=2 failed=1 error=
revision=5 DE=eu-root loads=2 failed=2 error=refused DIR/routing.json: writable by group or others (mode 0666)
revision=5 DE=eu-root loads=2 failed=3 error=refused DIR/routing.json: owned by uid 1001, not root or the trusted owner 65534
revision=1234 DE=eu-1 loads=3 failed=3 error=
trusted snapshot owner => root or uid 65534
