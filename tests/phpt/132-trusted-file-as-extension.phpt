--TEST--
php/TrustedFile.php says what the extension says of the same files (rules 1-5, symlinked directories), by default, with dw_router.trusted_owner set and set to a name that names no user
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/fixtures/trusted-file.inc';

$d = dw_test_dir(__FILE__);
$json = dw_fixture('basic.json');
$paths = [];
dw_dir("$d/ok");
dw_plant($paths[] = "$d/ok/f", $json, 0);
symlink("$d/ok/f", $paths[] = "$d/ok/link");
posix_mkfifo($paths[] = "$d/ok/fifo", 0644);
dw_plant($paths[] = "$d/ok/w", $json, 0, 0646);
dw_dir("$d/group", 0, 0775);
dw_plant($paths[] = "$d/group/f", $json, 0);
dw_dir("$d/shm", 0, 01777);
dw_plant($paths[] = "$d/shm/f", $json, 0);
dw_plant($paths[] = "$d/shm/g", $json, 1001);
dw_plant($paths[] = "$d/ok/other", $json, 1001);
dw_dir("$d/agent", 1001);
dw_plant($paths[] = "$d/agent/f", $json, 1001);
dw_dir("$d/agent/sub", 1001);
dw_dir("$d/agent/sub/x", 0);
dw_plant($paths[] = "$d/agent/sub/x/f", $json, 0);
dw_dir("$d/nobody", 65534);
dw_plant($paths[] = "$d/nobody/f", $json, 0);
dw_dir("$d/open", 0, 0777);
dw_dir("$d/open/dw");
dw_plant($paths[] = "$d/open/dw/f", $json, 0);
dw_dir("$d/bob", 1001);
dw_dir("$d/bob/dw");
dw_plant($paths[] = "$d/bob/dw/f", $json, 0);
dw_dir("$d/tmp", 0, 01777);
dw_dir("$d/tmp/dw-router", 1001);
dw_plant($paths[] = "$d/tmp/dw-router/f", $json, 1001);
dw_dir("$d/tmp/roots");
dw_plant($paths[] = "$d/tmp/roots/f", $json, 0);
dw_dir("$d/tmp/nobody", 65534);
dw_plant($paths[] = "$d/tmp/nobody/f", $json, 0);
symlink("$d/open/dw", "$d/to-open");
$paths[] = "$d/to-open/f";
dw_dir("$d/shared", 0, 0777);
symlink("$d/ok", "$d/shared/link");
$paths[] = "$d/shared/link/f";
symlink("$d/shared/link", "$d/via");
$paths[] = "$d/via/f";
symlink('ok/../ok', "$d/relative");
$paths[] = "$d/relative/f";
symlink('loop', "$d/loop");
$paths[] = "$d/loop/f";
$paths[] = "$d/ok/f/g";
$paths[] = "$d/none/f";

foreach (['', '1001', 'dw-no-such-user'] as $owner) {
    echo "-- dw_router.trusted_owner = '$owner'\n";
    $php = [PHP_BINARY, '-n', '-d', 'extension=' . dw_extension_path(), '-d', "dw_router.trusted_owner=$owner",
        __DIR__ . '/fixtures/trusted-file-compare.php', $d, ...$paths];
    $process = proc_open($php, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    echo stream_get_contents($pipes[1]), stream_get_contents($pipes[2]);
    fclose($pipes[1]);
    fclose($pipes[2]);
    proc_close($process);
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
-- dw_router.trusted_owner = ''
same D/ok/f: read
same D/ok/link: a symbolic link (not followed)
same D/ok/fifo: not a regular file (a FIFO)
same D/ok/w: writable by group or others (mode 0646)
same D/group/f: its directory is writable by group or others (mode 0775)
same D/shm/f: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)
same D/shm/g: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)
same D/ok/other: owned by uid 1001, not root or the directory's owner 0
same D/agent/f: read
same D/agent/sub/x/f: D/agent on the way to it is owned by uid 1001, not root or the directory's owner 0
same D/nobody/f: read
same D/open/dw/f: D/open on the way to it is writable by group or others (mode 0777)
same D/bob/dw/f: D/bob on the way to it is owned by uid 1001, not root or the directory's owner 0
same D/tmp/dw-router/f: D/tmp is shared (sticky, writable by others, mode 1777) and D/tmp/dw-router in it is owned by uid 1001, not root (no trusted owner is set)
same D/tmp/roots/f: read
same D/tmp/nobody/f: D/tmp is shared (sticky, writable by others, mode 1777) and D/tmp/nobody in it is owned by uid 65534, not root (no trusted owner is set)
same D/to-open/f: D/open on the way to it is writable by group or others (mode 0777)
same D/shared/link/f: D/shared on the way to it is writable by group or others (mode 0777)
same D/via/f: D/shared on the way to it is writable by group or others (mode 0777)
same D/relative/f: read
same D/loop/f: more than 40 symbolic links on the way
same D/ok/f/g: D/ok/f on the way is not a directory
same D/none/f: missing
-- dw_router.trusted_owner = '1001'
same D/ok/f: read
same D/ok/link: a symbolic link (not followed)
same D/ok/fifo: not a regular file (a FIFO)
same D/ok/w: writable by group or others (mode 0646)
same D/group/f: its directory is writable by group or others (mode 0775)
same D/shm/f: read
same D/shm/g: read
same D/ok/other: read
same D/agent/f: read
same D/agent/sub/x/f: read
same D/nobody/f: its directory is owned by uid 65534, not root or the trusted owner 1001
same D/open/dw/f: D/open on the way to it is writable by group or others (mode 0777)
same D/bob/dw/f: read
same D/tmp/dw-router/f: read
same D/tmp/roots/f: read
same D/tmp/nobody/f: its directory is owned by uid 65534, not root or the trusted owner 1001
same D/to-open/f: D/open on the way to it is writable by group or others (mode 0777)
same D/shared/link/f: D/shared on the way to it is writable by group or others (mode 0777)
same D/via/f: D/shared on the way to it is writable by group or others (mode 0777)
same D/relative/f: read
same D/loop/f: more than 40 symbolic links on the way
same D/ok/f/g: D/ok/f on the way is not a directory
same D/none/f: missing
-- dw_router.trusted_owner = 'dw-no-such-user'
same D/ok/f: the trusted owner "dw-no-such-user" names no user
same D/ok/link: a symbolic link (not followed)
same D/ok/fifo: not a regular file (a FIFO)
same D/ok/w: the trusted owner "dw-no-such-user" names no user
same D/group/f: the trusted owner "dw-no-such-user" names no user
same D/shm/f: the trusted owner "dw-no-such-user" names no user
same D/shm/g: the trusted owner "dw-no-such-user" names no user
same D/ok/other: the trusted owner "dw-no-such-user" names no user
same D/agent/f: the trusted owner "dw-no-such-user" names no user
same D/agent/sub/x/f: the trusted owner "dw-no-such-user" names no user
same D/nobody/f: the trusted owner "dw-no-such-user" names no user
same D/open/dw/f: the trusted owner "dw-no-such-user" names no user
same D/bob/dw/f: the trusted owner "dw-no-such-user" names no user
same D/tmp/dw-router/f: the trusted owner "dw-no-such-user" names no user
same D/tmp/roots/f: the trusted owner "dw-no-such-user" names no user
same D/tmp/nobody/f: the trusted owner "dw-no-such-user" names no user
same D/to-open/f: the trusted owner "dw-no-such-user" names no user
same D/shared/link/f: the trusted owner "dw-no-such-user" names no user
same D/via/f: the trusted owner "dw-no-such-user" names no user
same D/relative/f: the trusted owner "dw-no-such-user" names no user
same D/loop/f: more than 40 symbolic links on the way
same D/ok/f/g: D/ok/f on the way is not a directory
same D/none/f: missing
