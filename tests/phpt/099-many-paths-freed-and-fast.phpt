--TEST--
2,000 snapshot paths in one process: a reload is seen promptly, and a path's table (and its watch) is freed when its last router goes
--EXTENSIONS--
dw_router
--CONFLICTS--
all
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
// The process's inotify watches, from /proc/self/fdinfo.
function dw_watches(): int
{
    $count = 0;
    foreach (glob('/proc/self/fdinfo/*') as $info) {
        $count += substr_count((string) @file_get_contents($info), 'inotify wd:');
    }
    return $count;
}
$paths = [];
for ($d = 0; $d < 40; $d++) {
    mkdir("$base/d$d");
    for ($f = 0; $f < 50; $f++) {
        $paths[] = "$base/d$d/s$f.json";
    }
}
// Routers first, files after: the watcher then has the events of 2,000 publications
// (about 10,000) to go through, each matched against the paths in use. A scan of every
// path per event made that 2,000 x 10,000 comparisons: a rename right after was seen
// 20 s late.
$routers = [];
foreach ($paths as $path) {
    $routers[] = new RegionRouter($path);
}
foreach ($paths as $i => $path) {
    dw_publish($path, 1, ['region/DE' => dw_region('eu-' . intdiv($i, 50) . '-' . ($i % 50), ['a'], ['a' => 1])]);
}

echo 'all inotify: ', json_encode(count(array_unique(array_map(fn ($r) => $r->stats()['reload_mechanism'], $routers))) === 1 && $routers[0]->stats()['reload_mechanism'] === 'inotify'), "\n";

// A rename of one of them is seen within a second, by resolve() alone.
$started = microtime(true);
dw_publish($paths[1234], 2, ['region/DE' => dw_region('eu-new', ['b'], ['b' => 1])]);
$seen = dw_wait_until(fn () => $routers[1234]->resolve('DE')['shard'] === 'eu-new', 30.0);
$latency = microtime(true) - $started;
echo 'seen: ', json_encode($seen), ', within 1 s: ', json_encode($latency < 1.0), "\n";
if ($latency >= 1.0) {
    echo "latency: $latency s\n";
}
echo 'others unchanged: ', json_encode(dw_wait_until(fn () => $routers[1233]->revision() === 1 && $routers[1235]->revision() === 1)), "\n";
// Each router answers from its path's table once it has been used since that table was
// loaded (the watcher may still be loading some: wait for every one).
echo 'every path loaded: ', json_encode(dw_wait_until(function () use ($routers) {
    foreach ($routers as $router) {
        if ($router->revision() === 0) {
            return false;
        }
    }
    return true;
}, 30.0)), "\n";
foreach ($routers as $router) {
    $router->resolve('DE');
}
unset($router);
echo 'tables with 2000 routers: ', $routers[0]->stats()['tables_in_process'], "\n";
echo 'watches: ', dw_watches(), "\n";

// Every router gone: their tables are freed, whatever spelling or thread-local cache
// remembered them.
$last = $routers[1999];
$routers = [];
gc_collect_cycles();
echo 'tables with one router left: ', $last->stats()['tables_in_process'], "\n";
$last = null;
$again = new RegionRouter($paths[7]);
echo 'tables after all went and one came back: ', $again->stats()['tables_in_process'], "\n";
echo 'it reads its file afresh: ', $again->resolve('DE')['shard'], ' loads=', $again->stats()['loads'], "\n";
// The unused directories' watches went when the next path was set up.
echo 'watches: ', dw_watches(), "\n";
$again = null;

// And a path used again after its table was freed sees renames: its watch is set up anew.
$router = new RegionRouter($paths[1234]);
echo 'revision ', $router->revision(), "\n";
dw_publish($paths[1234], 3, ['region/DE' => dw_region('eu-3', ['c'], ['c' => 1])]);
echo 'rename seen again: ', json_encode(dw_wait_until(fn () => $router->revision() === 3)), "\n";
$router->resolve('DE');
echo 'tables: ', $router->stats()['tables_in_process'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
all inotify: true
seen: true, within 1 s: true
others unchanged: true
every path loaded: true
tables with 2000 routers: 2000
watches: 40
tables with one router left: 1
tables after all went and one came back: 1
it reads its file afresh: eu-0-7 loads=1
watches: 1
revision 2
rename seen again: true
tables: 1
