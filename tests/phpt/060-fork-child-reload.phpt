--TEST--
pcntl_fork(): a forked child sets up its own watcher and sees renames without reload(); so does a grandchild; the parent keeps its own
--EXTENSIONS--
dw_router
pcntl
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$publish(1);

$router = new RegionRouter($path);   // the parent's watcher thread starts here
var_dump($router->revision(), $router->stats()['reload_mechanism']);

$child = function (int $next, ?callable $then = null) use ($router, $publish): never {
    // Inherited: the parent's table, without any I/O.
    $report = ['inherited' => $router->revision()];
    $publish($next);
    $report['seen'] = dw_wait_until(fn () => $router->revision() === $next);
    $report['route'] = $router->resolve('DE');
    $report['mechanism'] = $router->stats()['reload_mechanism'];
    $report['inotify_unavailable'] = $router->stats()['inotify_unavailable'];
    // A second rename in the child, read by resolve() alone.
    $publish($next + 1);
    $report['seen-again'] = dw_wait_until(fn () => $router->resolve('DE')['shard'] === 'eu-' . ($next + 1));
    echo json_encode($report), "\n";
    if ($then) {
        $then();
    }
    exit(0);
};

$pid = pcntl_fork();
if ($pid === 0) {
    $child(2, function () use ($child) {
        // The grandchild: forked from a child whose watcher is running.
        $pid = pcntl_fork();
        if ($pid === 0) {
            $child(4);
        }
        pcntl_waitpid($pid, $status);
        echo 'grandchild exit: ', pcntl_wexitstatus($status), "\n";
    });
}
pcntl_waitpid($pid, $status);
echo 'child exit: ', pcntl_wexitstatus($status), "\n";

// The parent's own watcher is still alive: it saw everything the children published.
var_dump(dw_wait_until(fn () => $router->revision() === 5), $router->resolve('DE'));
$stats = $router->stats();
var_dump($stats['reload_mechanism'], $stats['failed_loads'], $stats['loads'] >= 2);

// Forking again after all that, and a new path in the child.
$pid = pcntl_fork();
if ($pid === 0) {
    $other = "$dir/other.json";
    $fresh = new RegionRouter($other);
    dw_publish($other, 99, []);
    echo 'child, new path: ', json_encode(dw_wait_until(fn () => $fresh->revision() === 99)), ' ', $fresh->stats()['reload_mechanism'], "\n";
    exit(0);
}
pcntl_waitpid($pid, $status);
echo 'child exit: ', pcntl_wexitstatus($status), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(1)
string(7) "inotify"
{"inherited":1,"seen":true,"route":{"shard":"eu-2","origin":"o-2"},"mechanism":"inotify","inotify_unavailable":null,"seen-again":true}
{"inherited":3,"seen":true,"route":{"shard":"eu-4","origin":"o-4"},"mechanism":"inotify","inotify_unavailable":null,"seen-again":true}
grandchild exit: 0
child exit: 0
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-5"
  ["origin"]=>
  string(3) "o-5"
}
string(7) "inotify"
int(0)
bool(true)
child, new path: true inotify
child exit: 0
