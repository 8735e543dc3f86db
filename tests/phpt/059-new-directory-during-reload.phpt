--TEST--
Constructing a router for a new directory while the watcher is reloading another source does not deadlock
--EXTENSIONS--
dw_router
pcntl
posix
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$base = dw_test_dir(__FILE__);

// In a child, so that a hang can be detected and ended.
$pid = pcntl_fork();
if ($pid === 0) {
    $routers = [];
    for ($k = 0; $k < 30; $k++) {
        mkdir("$base/one$k");
        mkdir("$base/two$k");
        dw_publish("$base/one$k/a.json", 1, []);
        $routers[] = new RegionRouter("$base/one$k/a.json");
        // An event for a watched source is on its way to the watcher thread...
        dw_publish("$base/one$k/a.json", 2, []);
        // ...while this router asks the same watcher to watch another directory.
        $routers[] = new RegionRouter("$base/two$k/b.json");
    }
    exit(0);
}
$deadline = hrtime(true) + 4_000_000_000;
while (($done = pcntl_waitpid($pid, $status, WNOHANG)) === 0 && hrtime(true) < $deadline) {
    usleep(5000);
}
if ($done === 0) {
    posix_kill($pid, SIGKILL);
    pcntl_waitpid($pid, $status);
    echo "hung: killed after 4 s\n";
} else {
    echo 'completed, exit status ', pcntl_wifexited($status) ? pcntl_wexitstatus($status) : 'signal ' . pcntl_wtermsig($status), "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
completed, exit status 0
