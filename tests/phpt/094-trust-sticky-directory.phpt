--TEST--
trust: in a sticky world-writable directory (/dev/shm) without dw_router.trusted_owner every file is refused, root's included
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
chmod($dir, 01777);
// The agent's file (uid 65534 here) and root's: neither is trusted in a shared directory
// unless the ini names whose files to take there.
dw_plant($path, dw_fixture('basic.json'), 65534);
$router = new RegionRouter($path);
echo dw_refusal($router, $dir);
dw_plant($path, dw_fixture('basic.json'), 0);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// Moving the directory out of sharing makes root's file good.
chmod($dir, 0755);
touch($path);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision=0 DE=us-1 loads=0 failed=1 error=refused DIR/routing.json: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)
revision=0 DE=us-1 loads=0 failed=2 error=refused DIR/routing.json: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)
revision=1234 DE=eu-1 loads=1 failed=2 error=
