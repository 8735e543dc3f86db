--TEST--
stats()['tables_in_process']: after a reload the watcher frees the table the default routers answered from, with no request needed; a held router keeps its old table only until its next call
--EXTENSIONS--
dw_router
--INI--
dw_router.snapshot_path={TMP}/dw-phpt-088-replaced-tables-are-freed/live/dw-routing.json
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$live = dw_test_base(__FILE__) . '/live';
dw_rmtree($live);
mkdir($live, 0755, true);
$path = ini_get('dw_router.snapshot_path');
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$tables = fn () => (new RegionRouter())->stats()['tables_in_process'];
$publish(1);

// One path in use: one table, however many routers answered from it (FR has no region and
// the policy's default US neither, so it fails open).
var_dump((new RegionRouter())->resolve('DE')['origin'], (new RegionRouter())->resolve('FR')['origin'], $tables());

// A reload while no router runs: the watcher swaps the table in and frees the one the
// default routers last answered from, so an idle worker does not hold two.
$publish(2);
var_dump(dw_wait_until(fn () => (new RegionRouter())->revision() === 2));
var_dump(dw_wait_until(fn () => $tables() === 1), $tables());
var_dump((new RegionRouter())->resolve('DE')['origin'], $tables());

// A router with an explicit path keeps the table it answered from until its next call
// (revision() is one: it moves the router to the table it shows, so that the next answer
// comes from that table).
$held = new RegionRouter($path);
var_dump($held->resolve('DE')['origin']);
$publish(3);
var_dump(dw_wait_until(fn () => $held->revision() === 3));
usleep(50000);
var_dump($tables());
var_dump($held->resolve('DE')['origin'], $tables());
unset($held);
var_dump($tables());
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
string(3) "o-1"
string(5) "iad-a"
int(1)
bool(true)
bool(true)
int(1)
string(3) "o-2"
int(1)
string(3) "o-2"
bool(true)
int(1)
string(3) "o-3"
int(1)
int(1)
