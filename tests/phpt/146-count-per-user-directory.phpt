--TEST--
Answer counting in a per-user directory root made (issue 40): a PHP user's worker creates its file there, 0640, of the directory's group (the agent's); another user cannot create it first; a per-user directory another user made leaves counting off, saying why
--EXTENSIONS--
dw_router
posix
--SKIPIF--
<?php
if (posix_geteuid() !== 0) {
    die('skip needs root (runs PHP as nobody and makes files of other users)');
}
if (!is_executable('/usr/bin/setpriv')) {
    die('skip needs setpriv');
}
?>
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
chmod($dir, 0755);
$path = "$dir/routing.json";
dw_publish($path, 5, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
chmod($path, 0644);
$answers = "$dir/answers";
mkdir($answers, 0755);
$nobody = 65534;
$agentGroup = 4242;
$own = "$answers/$nobody";

/** Runs $argv as uid/gid $uid (no supplementary groups); returns stdout and stderr. */
function as_user(int $uid, array $argv): string
{
    $cmd = ['/usr/bin/setpriv', "--reuid=$uid", "--regid=$uid", '--clear-groups', ...$argv];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    proc_close($proc);
    return $out;
}

// PHP runs as nobody below: it loads copies of the extension and of the fixtures it needs
// from the test's own directory, since the checkout may sit under a directory only root
// can search (the PHP 8.5 devenv's /work is 0700).
$so = "$dir/dw_router.so";
copy(dw_extension_path(), $so);
chmod($so, 0755);
mkdir("$dir/fixtures/traffic", 0755, true);
chmod("$dir/fixtures", 0755);
foreach (['helpers.inc', 'traffic.inc', 'traffic/count-as-user.php'] as $fixture) {
    copy(__DIR__ . "/fixtures/$fixture", "$dir/fixtures/$fixture");
    chmod("$dir/fixtures/$fixture", 0644);
}
$php = [PHP_BINARY, '-n', '-d', "extension=$so", '-d', 'dw_router.count_answers=1',
    '-d', "dw_router.answers_dir=$answers", "$dir/fixtures/traffic/count-as-user.php", $path];

// 1. The per-user directory as dw-agent --prepare-dirs makes it: nobody's, 2750, the agent's group.
mkdir($own, 0700);
chown($own, $nobody);
chgrp($own, $agentGroup);
chmod($own, 02750);
echo str_replace($dir, 'DIR', as_user($nobody, $php));
clearstatcache();
$file = "$own/answers-$nobody.bin";
$stat = stat($file);
printf("file: owner %d, group %d, mode %o\n", $stat['uid'], $stat['gid'], $stat['mode'] & 07777);

// 2. Another user cannot create (or replace) a file in it.
echo 'another user creating a file there: ',
    trim(as_user(1001, ['/bin/sh', '-c', "touch $own/answers-x.bin 2>/dev/null && echo created || echo refused"])), "\n";
echo 'another user in the parent: ',
    trim(as_user(1001, ['/bin/sh', '-c', "mkdir $answers/1001 2>/dev/null && echo created || echo refused"])), "\n";

// 3. A per-user directory another user made: the extension does not use it.
dw_rmtree($own);
mkdir($own, 0755);
chown($own, 1001);
echo str_replace($dir, 'DIR', as_user($nobody, $php));
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
state: on, DIR/answers/65534/answers-65534.bin
lines: DE country DE fra-a eu-1 - => 3
file: owner 65534, group 4242, mode 640
another user creating a file there: refused
another user in the parent: refused
state: off: counter file: DIR/answers/65534: owned by uid 1001, not by uid 65534 or root
lines: none
