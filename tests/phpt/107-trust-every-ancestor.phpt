--TEST--
trust: every directory above the snapshot is checked (OpenSSH StrictModes): a dw-router/ pre-created in a sticky directory by another user, or a group-writable ancestor, is refused
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
// /dev/shm or /tmp: sticky, writable by all. uid 1001 got there first and owns dw-router/,
// so it "owns the directory" and, before every ancestor was checked, was trusted.
mkdir("$dir/shm");
chmod("$dir/shm", 01777);
mkdir("$dir/shm/dw-router", 0755);
chown("$dir/shm/dw-router", 1001);
$planted = "$dir/shm/dw-router/routing.json";
dw_plant($planted, dw_fixture('hostile-max-revision.json'), 1001);
$router = new RegionRouter($planted);
echo dw_refusal($router, $dir);
// A group-writable (not sticky) directory two levels up.
mkdir("$dir/group/dw", 0755, true);
chmod("$dir/group", 0775);
$path = "$dir/group/dw/routing.json";
dw_plant($path, dw_fixture('basic.json'), 0);
$router = new RegionRouter($path);
echo dw_refusal($router, $dir);
// Fixed: the same file is taken.
chmod("$dir/group", 0755);
touch($path);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// An ancestor owned by another user (it could swap what is below it).
chown("$dir/group", 1001);
dw_plant($path, dw_fixture('basic.json'), 0);
$router->reload();
echo dw_refusal($router, $dir);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision=0 DE=us-1 loads=0 failed=1 error=refused DIR/shm/dw-router/routing.json: DIR/shm is shared (sticky, writable by others, mode 1777) and DIR/shm/dw-router in it is owned by uid 1001, not root (no trusted owner is set)
revision=0 DE=us-1 loads=0 failed=1 error=refused DIR/group/dw/routing.json: DIR/group on the way to it is writable by group or others (mode 0775)
revision=1234 DE=eu-1 loads=1 failed=1 error=
revision=1234 DE=eu-1 loads=1 failed=2 error=refused DIR/group/dw/routing.json: DIR/group on the way to it is owned by uid 1001, not root or the directory's owner 0
