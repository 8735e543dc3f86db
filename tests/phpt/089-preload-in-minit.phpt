--TEST--
dw_router.preload: MINIT parses the default snapshot once; the parent refreshes it before each fork, so a child forked after a reload starts from the new table without reading the file
--EXTENSIONS--
dw_router
pcntl
--SKIPIF--
<?php if (!function_exists('proc_open')) die('skip proc_open() disabled'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$publish(7);

// A PHP process of its own: preloading happens in MINIT, with the ini's path.
$script = <<<'PHP'
$info = function (): string {
    ob_start();
    phpinfo(INFO_MODULES);
    preg_match('/^revision => (\d+)$/m', ob_get_clean(), $m);
    return $m[1] ?? 'none';
};
// Before any router exists: MINIT already parsed the table (or not).
echo 'minit: ', $info(), "\n";
if ($argv[1] !== 'on') {
    exit(0);
}
// The parent never touches a router (like lsphp's): a new file arrives, then a fork.
require $argv[2];
dw_publish($argv[3], 8, ['region/DE' => dw_region('eu-8', ['o-8'], ['o-8' => 1])]);
$pid = pcntl_fork();
if ($pid === 0) {
    // Refreshed by the parent before the fork: the child inherits revision 8 parsed.
    echo 'child before use: ', $info(), "\n";
    $router = new RegionRouter();
    $stats = $router->stats();
    echo 'child: ', json_encode([$router->resolve('DE'), $router->revision(), $stats['loads'], $stats['reload_mechanism']]), "\n";
    exit(0);
}
pcntl_waitpid($pid, $status);
echo 'parent after fork: ', $info(), ', child exit ', pcntl_wexitstatus($status), "\n";
PHP;

foreach (['on' => '1', 'off' => '0', 'cli-auto' => 'auto'] as $label => $preload) {
    $cmd = [PHP_BINARY, '-n', '-d', 'extension=' . dw_extension_path(), '-d', "dw_router.snapshot_path=$path",
        '-d', "dw_router.preload=$preload", '-r', $script, $label, __DIR__ . '/fixtures/helpers.inc', $path];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]);
    $err = stream_get_contents($pipes[2]);
    echo "== preload=$preload (exit ", proc_close($proc), ")\n", $out, $err;
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
== preload=1 (exit 0)
minit: 7
child before use: 8
child: [{"shard":"eu-8","origin":"o-8"},8,2,"inotify"]
parent after fork: 8, child exit 0
== preload=0 (exit 0)
minit: none
== preload=auto (exit 0)
minit: none
