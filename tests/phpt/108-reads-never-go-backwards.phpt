--TEST--
Reads on one router never go backwards: once revision() or stats() has shown a table, resolve() on that object answers from it or a later one, across thousands of reloads
--EXTENSIONS--
dw_router
pcntl
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
$publish = fn (int $rev) => dw_publish($path, $rev, ['region/DE' => dw_region("eu-$rev", ["o-$rev"], ["o-$rev" => 1])]);
$publish(1);
const LAST = 3000;
const READERS = 3;
// The agent's part, in a child: a rename per revision, with a pause of 0.3 ms between
// them: back to back, a loaded machine coalesces the inotify events of hundreds of
// renames into a few reloads, and the run would prove nothing.
$writer = pcntl_fork();
if ($writer === 0) {
    for ($rev = 2; $rev <= LAST; $rev++) {
        $publish($rev);
        usleep(300);
    }
    exit(0);
}
// Readers in processes of their own (more threads than cores: a watcher thread is then
// often preempted in the middle of a reload, which is when a mixed view would show).
$readers = [];
for ($i = 0; $i < READERS; $i++) {
    $pid = pcntl_fork();
    if ($pid === 0) {
        $router = new RegionRouter($path);
        $backwards = [];
        $last = 0;
        $checks = 0;
        $deadline = hrtime(true) + 30_000_000_000;
        while ($last < LAST && hrtime(true) < $deadline) {
            // Shown through revision(), and now and then through stats().
            $shown = ($checks % 64) ? $router->revision() : $router->stats()['revision'];
            $shard = $router->resolve('DE')['shard'];
            $answered = $router->answeredRevision();
            $served = (int) substr($shard, 3);
            if ($served < $shown || $served !== $answered || $answered < $last) {
                $backwards[] = "shown $shown, then answered $answered with $shard after $last";
            }
            $last = max($last, $answered);
            $checks++;
        }
        $loads = $router->stats()['loads'];
        file_put_contents("$dir/reader-$i", serialize([$last, $backwards, $loads]));
        exit(0);
    }
    $readers[] = $pid;
}
foreach ([$writer, ...$readers] as $pid) {
    pcntl_waitpid($pid, $status);
}
for ($i = 0; $i < READERS; $i++) {
    [$last, $backwards, $loads] = unserialize(file_get_contents("$dir/reader-$i"));
    echo "reader $i: last revision answered $last, answers that went backwards: ", count($backwards), "\n";
    foreach (array_slice($backwards, 0, 3) as $line) {
        echo "  $line\n";
    }
    // The run saw many reloads, or it proved nothing.
    echo $loads >= 100 ? "  reloaded at least 100 times\n" : "  only $loads reloads\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
reader 0: last revision answered 3000, answers that went backwards: 0
  reloaded at least 100 times
reader 1: last revision answered 3000, answers that went backwards: 0
  reloaded at least 100 times
reader 2: last revision answered 3000, answers that went backwards: 0
  reloaded at least 100 times
