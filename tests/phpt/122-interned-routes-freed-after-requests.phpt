--TEST--
A worker keeps the route arrays its current tables answer, not every name it ever answered: one no table holds is freed at the end of the request (php -S, 200 reloads with new 20 KB shard names)
--EXTENSIONS--
dw_router
--SKIPIF--
<?php
if (PHP_ZTS) {
    die('skip a ZTS build frees no route array (another thread may be in a request)');
}
?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, [
    'region/DE' => dw_region(sprintf('eu-%04d-', $rev) . str_repeat('x', 20000), ["o-$rev"], ["o-$rev" => 1]),
]);
$publish(1);
$docroot = "$dir/docroot";
mkdir($docroot);
copy(__DIR__ . '/fixtures/122-route.php', "$docroot/route.php");

// The built-in server: one process, a request cycle (RINIT, RSHUTDOWN) per request.
$server = null;
$port = 0;
for ($try = 0; $try < 10 && $server === null; $try++) {
    $port = random_int(20000, 59999);
    $command = [PHP_BINARY, '-n', '-d', 'extension=' . dw_extension_path(), '-d', "dw_router.snapshot_path=$path",
        '-S', "127.0.0.1:$port", '-t', $docroot];
    $process = proc_open($command, [0 => ['pipe', 'r'], 1 => ['file', "$dir/server.log", 'a'], 2 => ['file', "$dir/server.log", 'a']], $pipes);
    $up = dw_wait_until(fn () => @file_get_contents("http://127.0.0.1:$port/route.php") !== false, 5.0);
    if ($up) {
        $server = $process;
    } else {
        proc_terminate($process);
        proc_close($process);
    }
}
if ($server === null) {
    echo "the server did not start:\n", file_get_contents("$dir/server.log");
    exit(1);
}
$get = fn () => json_decode((string) @file_get_contents("http://127.0.0.1:$port/route.php"), true);

$first = $get();
$pids = [$first['pid'] => true];
$most = ['routes' => $first['routes'], 'bytes' => $first['bytes']];
$stale = 0;
for ($rev = 2; $rev <= 201; $rev++) {
    $publish($rev);
    $answer = null;
    $served = dw_wait_until(function () use ($get, $rev, &$answer) {
        $answer = $get();
        return ($answer['revision'] ?? 0) >= $rev;
    }, 5.0);
    $stale += (int) !$served;
    $pids[$answer['pid'] ?? 0] = true;
    // What this request saw is what earlier requests left: measured after the first
    // request that answered from the new table.
    $most['routes'] = max($most['routes'], $answer['routes'] ?? 0);
    $most['bytes'] = max($most['bytes'], $answer['bytes'] ?? 0);
}
$last = $get();
proc_terminate($server);
proc_close($server);

echo "revisions not served in time: $stale\n";
echo 'one process served all: ', var_export(count($pids) === 1, true), "\n";
echo 'last answer: ', $last['shard'], ' at revision ', $last['revision'], "\n";
// Without freeing, 200 names of 20 KB stay interned (each pair counts about 40.5 KB: the
// name twice and 512 bytes), up to the 8 MiB bound. Freed, a request sees the pairs of the
// tables in use and those released since the last request ended: a handful.
echo 'the first request interned its pair: ', var_export($first['routes'] >= 1 && $first['bytes'] > 20000, true), "\n";
echo 'at most 4 pairs interned at any request: ', var_export($most['routes'] <= 4, true), " ({$most['routes']})\n";
echo 'under 200 KB interned at any request: ', var_export($most['bytes'] < 200 * 1024, true), " ({$most['bytes']})\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECTF--
revisions not served in time: 0
one process served all: true
last answer: eu-0201-xxxx at revision 201
the first request interned its pair: true
at most 4 pairs interned at any request: true (%d)
under 200 KB interned at any request: true (%d)
