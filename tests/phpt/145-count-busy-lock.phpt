--TEST--
Answer counting never waits for a lock another process holds (issue 40): with the registry byte (and every slot) read-locked by another process, MINIT completes and resolve() returns; the answers count under their labels (pending in the worker's slot) and are registered once the lock is gone
--EXTENSIONS--
dw_router
--SKIPIF--
<?php
if (!is_executable('/usr/bin/perl') || !is_executable('/usr/bin/timeout')) {
    die('skip needs perl (fcntl record locks) and timeout');
}
?>
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish($path, 5, [
    'region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1]),
    'region/FR' => dw_region('eu-2', ['par-a'], ['par-a' => 1]),
]);
$answers = "$dir/answers";
$fixture = __DIR__ . '/fixtures/traffic/count-busy.php';
$file = trim(dw_traffic_run($answers, $fixture, [$path, 'create']));

/**
 * Another process (any that can open the file read-only) holding a read lock on bytes
 * [$start, $start + $length) of the file ($length 0: to its end), until killed.
 */
function hold_lock(string $file, int $start, int $length)
{
    // struct flock on Linux x86-64/arm64: type, whence, pad, start, len, pid, pad.
    $perl = 'use Fcntl; open(my $f, "<", $ARGV[0]) or die "open: $!"; '
        . 'fcntl($f, F_SETLK, pack("s s x4 q q l x4", F_RDLCK, 0, $ARGV[1], $ARGV[2], 0)) or die "lock: $!"; '
        . '$| = 1; print "held\n"; sleep 600;';
    $proc = proc_open(['/usr/bin/perl', '-e', $perl, $file, (string) $start, (string) $length],
        [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $said = fgets($pipes[1]);
    if ($said !== "held\n") {
        throw new RuntimeException('lock holder: ' . stream_get_contents($pipes[2]));
    }
    return $proc;
}

/** Ends the lock holder (the kernel drops its lock), once. */
function release(&$holder): void
{
    if ($holder !== null) {
        proc_terminate($holder, 9);
        proc_close($holder);
        $holder = null;
    }
}

/** Runs the fixture's $phase under `timeout` (a hang ends it and fails the test). */
function run_counting(string $answers, string $fixture, string $path, string $phase, ?callable $onRelease = null): string
{
    $cmd = ['/usr/bin/timeout', '-s', 'KILL', '30', PHP_BINARY, '-d', 'extension=' . dw_extension_path(),
        '-d', 'dw_router.count_answers=1', '-d', "dw_router.answers_dir=$answers", $fixture, $path, $phase];
    $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = '';
    while (($line = fgets($pipes[1])) !== false) {
        if ($line === "release\n") {
            $onRelease();
            fwrite($pipes[0], "go\n");
            continue;
        }
        $out .= $line;
    }
    $err = stream_get_contents($pipes[2]);
    $status = proc_close($proc);
    return $out . ($status === 0 && $err === '' ? "finished\n" : "exit $status (hung: killed by timeout): $err\n");
}

// 1. The registry byte and every slot byte (bytes 40 to the end) held.
$holder = hold_lock($file, 40, 0);
echo run_counting($answers, $fixture, $path, 'all');
release($holder);

// 2. The registry byte alone held, then released while the worker runs.
$holder = hold_lock($file, 40, 1);
echo run_counting($answers, $fixture, $path, 'registry', function () use (&$holder) {
    release($holder);
});
release($holder);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
registry and slots held: registered 0, overflow 3, no rows
finished
registry held: registered 0, overflow 3, DE country DE fra-a eu-1 sticky => 1; FR country FR par-a eu-2 - => 3
released: registered 2, overflow 3, DE country DE fra-a eu-1 sticky => 2; FR country FR par-a eu-2 - => 5
finished
