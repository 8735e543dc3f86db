--TEST--
trust: a symlink at the snapshot path is not followed (at start, and replacing a good file); the last good table stays
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
// The attacker's file is a perfectly good snapshot, in a directory of its own.
mkdir("$dir/elsewhere");
dw_publish_fixture("$dir/elsewhere/hostile.json", 'hostile-max-revision.json');

// A symlink there from the start: nothing is loaded.
symlink("$dir/elsewhere/hostile.json", $path);
$router = new RegionRouter($path);
echo dw_refusal($router, $dir);

// A good file replaces it and loads; a symlink renamed over the good file is refused.
dw_publish_fixture($path, 'basic.json');
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
symlink("$dir/elsewhere/hostile.json", "$dir/link.tmp");
rename("$dir/link.tmp", $path);
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// Asked again, the same symlink is not counted again.
$router->reload(); // (the watcher may have been first: the result is not checked)
echo dw_refusal($router, $dir);
// A symlink to a directory's file through a symlinked *directory* is the operator's
// choice, and followed: only the last component must not be a link.
symlink($dir, "$dir/via");
var_dump((new RegionRouter("$dir/via/elsewhere/hostile.json"))->revision());
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision=0 DE=us-1 loads=0 failed=1 error=refused DIR/routing.json: a symbolic link (not followed)
revision=1234 DE=eu-1 loads=1 failed=1 error=
revision=1234 DE=eu-1 loads=1 failed=2 error=refused DIR/routing.json: a symbolic link (not followed)
revision=1234 DE=eu-1 loads=1 failed=2 error=refused DIR/routing.json: a symbolic link (not followed)
int(9223372036854775807)
