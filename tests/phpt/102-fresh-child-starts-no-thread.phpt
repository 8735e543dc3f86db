--TEST--
dw_router.preload: a child of a preloading parent answers its first resolve() without starting a thread; its watch is set up after the request (or when stats() asks), and changes are seen meanwhile by polling
--EXTENSIONS--
dw_router
pcntl
--SKIPIF--
<?php
if (!function_exists('proc_open')) die('skip proc_open() disabled');
if (!is_dir('/proc/self/task')) die('skip no /proc/self/task');
?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 7, ['region/DE' => dw_region('eu-7', ['o-7'], ['o-7' => 1])]);

// A PHP process of its own, preloading in MINIT; its child plays a fresh lsphp child.
$script = <<<'PHP'
require $argv[1];
$threads = fn (): int => count(glob('/proc/self/task/*'));
$pid = pcntl_fork();
if ($pid === 0) {
    $before = $threads();
    $router = new RegionRouter();
    $first = $router->resolve('DE');
    echo 'first: ', json_encode([$first, $router->answeredRevision()]), "\n";
    echo 'threads started by the first resolve(): ', $threads() - $before, "\n";
    // Until the watch exists the source polls (every poll_interval_ms): a new file is seen.
    dw_publish($argv[2], 8, ['region/DE' => dw_region('eu-8', ['o-8'], ['o-8' => 1])]);
    $seen = dw_wait_until(fn () => $router->resolve('DE')['shard'] === 'eu-8');
    echo 'change seen while polling: ', json_encode($seen), ', still no thread: ', json_encode($threads() === $before), "\n";
    // stats() waits for the watch: the set-up starts now, not at the end of the request.
    echo 'mechanism: ', $router->stats()['reload_mechanism'], "\n";
    dw_publish($argv[2], 9, ['region/DE' => dw_region('eu-9', ['o-9'], ['o-9' => 1])]);
    echo 'change seen by inotify: ', json_encode(dw_wait_until(fn () => $router->revision() === 9)), "\n";
    exit(0);
}
pcntl_waitpid($pid, $status);
echo 'child exit ', pcntl_wexitstatus($status), "\n";
PHP;

$cmd = [PHP_BINARY, '-n', '-d', 'extension=' . dw_extension_path(), '-d', "dw_router.snapshot_path=$path",
    '-d', 'dw_router.preload=1', '-d', 'dw_router.poll_interval_ms=50', '-r', $script,
    __DIR__ . '/fixtures/helpers.inc', $path];
$proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
echo stream_get_contents($pipes[1]), stream_get_contents($pipes[2]);
echo 'exit ', proc_close($proc), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
first: [{"shard":"eu-7","origin":"o-7"},7]
threads started by the first resolve(): 0
change seen while polling: true, still no thread: true
mechanism: inotify
change seen by inotify: true
child exit 0
exit 0
