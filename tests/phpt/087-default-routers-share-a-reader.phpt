--TEST--
Default routers (the ini path) share one reader: a router per request, a long-lived one and an explicit one for the same file all follow renames; so does a forked child's router per request
--EXTENSIONS--
dw_router
pcntl
--INI--
dw_router.snapshot_path={TMP}/dw-phpt-087-default-routers-share-a-reader/live/dw-routing.json
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$live = dw_test_base(__FILE__) . '/live';
dw_rmtree($live);
mkdir($live, 0755, true);
$path = ini_get('dw_router.snapshot_path');
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$perRequest = fn () => (new RegionRouter())->resolve('DE')['origin'];
$publish(1);

$held = new RegionRouter();
$explicit = new RegionRouter($path);
var_dump($perRequest(), $held->resolve('DE')['origin'], $explicit->resolve('DE')['origin'], $held->revision());

// A rename: the next router per request sees it, and so does the one held since before.
$publish(2);
var_dump(dw_wait_until(fn () => $perRequest() === 'o-2'));
var_dump($held->resolve('DE')['origin'], $explicit->resolve('DE')['origin'], $held->revision());
// Many routers alive at once answer alike.
$routers = array_map(fn () => new RegionRouter(), range(1, 100));
var_dump(count(array_unique(array_map(fn ($r) => $r->resolve('DE', 'visitor')['origin'], $routers))));
unset($routers);

$pid = pcntl_fork();
if ($pid === 0) {
    // The child inherits the parent's table, and must set up its own watch to see more.
    $report = ['inherited' => $perRequest()];
    $publish(3);
    $report['seen'] = dw_wait_until(fn () => $perRequest() === 'o-3');
    $report['held'] = $held->resolve('DE')['origin'];
    $report['mechanism'] = (new RegionRouter())->stats()['reload_mechanism'];
    echo json_encode($report), "\n";
    exit(0);
}
pcntl_waitpid($pid, $status);
echo 'child exit: ', pcntl_wexitstatus($status), "\n";
var_dump(dw_wait_until(fn () => $perRequest() === 'o-3'), $held->stats()['failed_loads']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
string(3) "o-1"
string(3) "o-1"
string(3) "o-1"
int(1)
bool(true)
string(3) "o-2"
string(3) "o-2"
int(2)
int(1)
{"inherited":"o-2","seen":true,"held":"o-3","mechanism":"inotify"}
child exit: 0
bool(true)
int(0)
