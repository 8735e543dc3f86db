--TEST--
inotify instances exhausted (fs.inotify.max_user_instances): a router falls back to polling and still sees renames without reload()
--EXTENSIONS--
dw_router
pcntl
posix
--SKIPIF--
<?php
$limit = @file_get_contents('/proc/sys/fs/inotify/max_user_instances');
if ($limit === false) die('skip no /proc/sys/fs/inotify/max_user_instances');
if ((int) $limit > 512) die('skip max_user_instances is ' . (int) $limit . ' (> 512): too many processes to exhaust it');
?>
--CONFLICTS--
all
--INI--
dw_router.poll_interval_ms=100
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);
$limit = (int) file_get_contents('/proc/sys/fs/inotify/max_user_instances');

// Each child opens a router on its own directory, which takes one inotify instance (one
// per process), reports its mechanism, and holds the instance until killed. Children are
// forked one by one until one reports "poll": the instances are then exhausted.
$children = [];     // pid => parent's end of the socket pair
$reports = [];
$pollReport = null;
$killAll = function () use (&$children) {
    foreach ($children as $pid => $socket) {
        posix_kill($pid, SIGKILL);
    }
    foreach ($children as $pid => $socket) {
        pcntl_waitpid($pid, $status);
        fclose($socket);
    }
    $children = [];
};
register_shutdown_function($killAll);

for ($i = 0; $i < $limit + 16 && $pollReport === null; $i++) {
    $dir = "$base/d$i";
    mkdir($dir);
    dw_publish("$dir/dw-routing.json", 1, ['region/DE' => dw_region("eu-$i", ['a'], ['a' => 1])]);
    [$parentEnd, $childEnd] = stream_socket_pair(STREAM_PF_UNIX, STREAM_SOCK_STREAM, STREAM_IPPROTO_IP);
    $pid = pcntl_fork();
    if ($pid === -1) {
        echo "fork failed after $i children\n";
        break;
    }
    if ($pid === 0) {
        fclose($parentEnd);
        $router = new RegionRouter("$dir/dw-routing.json");
        $stats = $router->stats();
        $report = ['mechanism' => $stats['reload_mechanism'], 'revision' => $router->revision()];
        if ($stats['reload_mechanism'] === 'poll') {
            $report['inotify_unavailable'] = $stats['inotify_unavailable'];
            // The rename must be seen within the poll interval (plus a generous margin),
            // by resolve() alone: no reload().
            dw_publish("$dir/dw-routing.json", 2, ['region/DE' => dw_region('eu-polled', ['b'], ['b' => 1])]);
            $report['seen'] = dw_wait_until(fn () => $router->resolve('DE')['shard'] === 'eu-polled', 0.1 + 2.0);
            $report['revision_after'] = $router->revision();
            $report['loads'] = $router->stats()['loads'];
        }
        fwrite($childEnd, json_encode($report) . "\n");
        // Hold the inotify instance until the parent kills us (or goes away: EOF).
        fread($childEnd, 1);
        exit(0);
    }
    fclose($childEnd);
    $children[$pid] = $parentEnd;
    $line = fgets($parentEnd);
    $report = json_decode((string) $line, true);
    if (!is_array($report)) {
        echo "child $i gave no report\n";
        break;
    }
    $reports[] = $report['mechanism'];
    if ($report['mechanism'] === 'poll') {
        $pollReport = $report;
    }
}

$counts = array_count_values($reports);
echo 'children: ', count($reports) <= $limit + 1 ? 'at most the limit + 1' : count($reports), "\n";
echo 'inotify before the first poll: ', json_encode(($counts['inotify'] ?? 0) === count($reports) - 1), "\n";
echo 'some held inotify first: ', json_encode(($counts['inotify'] ?? 0) > 0), "\n";
if ($pollReport !== null) {
    echo 'poll child: revision=', $pollReport['revision'],
        ' unavailable-reason=', json_encode(is_string($pollReport['inotify_unavailable']) && $pollReport['inotify_unavailable'] !== ''),
        ' seen=', json_encode($pollReport['seen']),
        ' revision_after=', $pollReport['revision_after'],
        ' loads=', $pollReport['loads'], "\n";
} else {
    echo "no child fell back to poll\n";
}
$killAll();
// Every child is gone.
$left = 0;
foreach (glob('/proc/[0-9]*/stat') as $stat) {
    $fields = explode(' ', (string) @file_get_contents($stat));
    if (($fields[3] ?? null) === (string) getmypid()) {
        $left++;
    }
}
echo "children left: $left\n";

// With the instances free again, this process gets inotify.
$router = new RegionRouter("$base/d0/dw-routing.json");
var_dump($router->stats()['reload_mechanism']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
children: at most the limit + 1
inotify before the first poll: true
some held inotify first: true
poll child: revision=1 unavailable-reason=true seen=true revision_after=2 loads=2
children left: 0
string(7) "inotify"
