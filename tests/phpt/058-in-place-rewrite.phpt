--TEST--
A snapshot rewritten in place (as cp or an editor does, against the rules) must not kill the reading process (SIGBUS on a truncated mapping is caught: the load fails, the table stays)
--EXTENSIONS--
dw_router
pcntl
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$kvs = [];
for ($i = 0; $i < 20000; $i++) {
    $kvs["region/G$i"] = dw_region("s$i", ["o$i"], ["o$i" => 1]);
}
$big = dw_snapshot(1, $kvs);
dw_write_atomic($path, $big);

// The good table is loaded before the rewriting starts (the reader inherits it).
$router = new RegionRouter($path);
$router->resolve('G1');
$pid = pcntl_fork();
if ($pid === 0) {
    // The reader: reloads for 1.5 s while the parent rewrites the file in place.
    $deadline = hrtime(true) + 1_500_000_000;
    while (hrtime(true) < $deadline) {
        $router->reload();
        $router->resolve('G1');
    }
    // Every load either read the whole file or failed and kept the table it had.
    exit($router->resolve('G1')['shard'] === 's1' ? 0 : 3);
}
$handle = fopen($path, 'r+');
while (pcntl_waitpid($pid, $status, WNOHANG) === 0) {
    ftruncate($handle, 10);
    ftruncate($handle, strlen($big));
    fseek($handle, 0);
    fwrite($handle, $big);
}
fclose($handle);
echo 'reader killed by a signal: ', json_encode(pcntl_wifsignaled($status)),
    pcntl_wifsignaled($status) ? ' (signal ' . pcntl_wtermsig($status) . ')' : '', "\n";
echo 'reader exit status: ', pcntl_wifexited($status) ? pcntl_wexitstatus($status) : '-', "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
reader killed by a signal: false
reader exit status: 0
