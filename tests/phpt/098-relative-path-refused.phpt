--TEST--
new RegionRouter('rel/path.json'): a relative path is refused with a ValueError naming it (it was resolved against the first working directory, and a later chdir kept answering from the old file)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
mkdir("$dir/a");
mkdir("$dir/b");
dw_publish("$dir/a/dw-routing.json", 1, ['region/DE' => dw_region('eu-a', ['x'], ['x' => 1])]);
dw_publish("$dir/b/dw-routing.json", 2, ['region/DE' => dw_region('eu-b', ['y'], ['y' => 1])]);
chdir("$dir/a");
foreach (['dw-routing.json', 'rel/path.json', './dw-routing.json', '../a/dw-routing.json', '', str_repeat('x', 200)] as $path) {
    try {
        new RegionRouter($path);
        echo "accepted: $path\n";
    } catch (ValueError $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
}
chdir("$dir/b");
try {
    (new RegionRouter('dw-routing.json'))->revision();
} catch (ValueError $e) {
    echo "after chdir: still refused\n";
}
// Absolute paths, and the ini's path (null), work as before.
var_dump((new RegionRouter("$dir/a/dw-routing.json"))->resolve('DE')['shard']);
var_dump((new RegionRouter("$dir/b/./dw-routing.json"))->resolve('DE')['shard']);
var_dump((new RegionRouter(null))->stats()['path'] === ini_get('dw_router.snapshot_path'));
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "dw-routing.json" given
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "rel/path.json" given
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "./dw-routing.json" given
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "../a/dw-routing.json" given
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "" given
ValueError: RegionRouter::__construct(): Argument #1 ($snapshotPath) must be an absolute path, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…" given
after chdir: still refused
string(4) "eu-a"
string(4) "eu-b"
bool(true)
