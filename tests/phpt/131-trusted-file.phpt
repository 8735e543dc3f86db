--TEST--
php/TrustedFile.php: rules 1-5 of docs/snapshot-trust.md in userland (every directory from /, where a symlink sits and where it leads), the size limit, the trusted owner setting
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/fixtures/trusted-file.inc';
use DwRouter\TrustedFile;

$d = dw_test_dir(__FILE__);
// The test's own ancestors: / and /tmp (sticky, root's entries) or another root's path.
dw_dir("$d/ok");
dw_plant("$d/ok/f", "hello\n", 0);

echo "-- the happy path, sizes, missing\n";
dw_trusted('happy', $d, "$d/ok/f");
chdir($d);
dw_trusted('relative path', $d, 'ok/f');
dw_trusted('through ..', $d, "$d/ok/../ok/./f");
dw_plant("$d/ok/big", str_repeat('x', 64), 0);
dw_trusted('64 of 64 bytes', $d, "$d/ok/big");
dw_plant("$d/ok/big", str_repeat('x', 65), 0);
dw_trusted('65 of 64 bytes', $d, "$d/ok/big");
dw_trusted('missing file', $d, "$d/ok/none");
dw_trusted('missing directory', $d, "$d/none/f");
dw_trusted('no file named', $d, "$d/ok/");

echo "-- rule 1: a regular file, not a symlink\n";
symlink("$d/ok/f", "$d/ok/link");
dw_trusted('symlink', $d, "$d/ok/link");
posix_mkfifo("$d/ok/fifo", 0644);
dw_trusted('FIFO', $d, "$d/ok/fifo");
dw_dir("$d/ok/sub");
dw_trusted('directory', $d, "$d/ok/sub");

echo "-- rule 2: the file not writable by group or others\n";
dw_plant("$d/ok/w", "x", 0, 0646);
dw_trusted('0646', $d, "$d/ok/w");
dw_plant("$d/ok/w", "x", 0, 0620);
dw_trusted('0620', $d, "$d/ok/w");

echo "-- rule 3: its directory\n";
dw_dir("$d/group", 0, 0775);
dw_plant("$d/group/f", "x", 0);
dw_trusted('0775', $d, "$d/group/f");
dw_dir("$d/shm", 0, 01777);
dw_plant("$d/shm/f", "x", 0);
dw_trusted('sticky, no trusted owner', $d, "$d/shm/f");
dw_trusted('sticky, trusted owner 0', $d, "$d/shm/f", '0');
dw_plant("$d/shm/g", "x", 1001);
dw_trusted('sticky, file of 1001, trusted owner 65534', $d, "$d/shm/g", '65534');
dw_trusted('sticky, file of 1001, trusted owner 1001', $d, "$d/shm/g", '1001');

echo "-- rule 4: owners\n";
dw_plant("$d/ok/other", "x", 65534);
dw_trusted('file of 65534', $d, "$d/ok/other");
dw_trusted('file of 65534, trusted owner 65534', $d, "$d/ok/other", '65534');
dw_dir("$d/agent", 65534);
dw_plant("$d/agent/f", "x", 65534);
dw_trusted('the directory\'s owner\'s file', $d, "$d/agent/f");
dw_plant("$d/agent/g", "x", 0);
dw_trusted('its directory of 65534, trusted owner 1001', $d, "$d/agent/g", '1001');
dw_trusted('a name that names no user', $d, "$d/ok/f", 'dw-no-such-user');

echo "-- rule 5: every directory on the way from /\n";
dw_dir("$d/open", 0, 0777);
dw_dir("$d/open/dw");
dw_plant("$d/open/dw/f", "x", 0);
dw_trusted('a parent writable by others', $d, "$d/open/dw/f");
chmod("$d/open", 0775);
dw_trusted('a parent writable by group', $d, "$d/open/dw/f");
dw_dir("$d/bob", 1001);
dw_dir("$d/bob/dw");
dw_plant("$d/bob/dw/f", "x", 0);
dw_trusted('a parent of another uid', $d, "$d/bob/dw/f");
dw_trusted('a parent of another uid, it the trusted owner', $d, "$d/bob/dw/f", '1001');
dw_dir("$d/tmp", 0, 01777);
dw_dir("$d/tmp/dw-router", 1001);
dw_plant("$d/tmp/dw-router/f", "x", 1001);
dw_trusted('sticky parent, entry of 1001, no trusted owner', $d, "$d/tmp/dw-router/f");
dw_trusted('sticky parent, entry of 1001, trusted owner 1001', $d, "$d/tmp/dw-router/f", '1001');
dw_dir("$d/tmp/roots");
dw_plant("$d/tmp/roots/f", "x", 0);
dw_trusted('sticky parent, root\'s entry, no trusted owner', $d, "$d/tmp/roots/f");

echo "-- rule 5 and symlinked directories\n";
chmod("$d/open", 0777);
symlink("$d/open/dw", "$d/to-open");
dw_trusted('a link whose target\'s parent is writable by others', $d, "$d/to-open/f");
chmod("$d/open", 0755);
dw_trusted('the same, fixed', $d, "$d/to-open/f");
dw_dir("$d/shared", 0, 0777);
symlink("$d/ok", "$d/shared/link");
dw_trusted('a link sitting in a directory writable by others', $d, "$d/shared/link/f");
// A link to a link in that directory: neither the path given nor realpath() passes
// through it, the walk does.
symlink("$d/shared/link", "$d/via");
dw_trusted('a link to a link sitting there', $d, "$d/via/f");
symlink('ok/../ok', "$d/relative");
dw_trusted('a relative link with ..', $d, "$d/relative/f");
symlink('loop', "$d/loop");
dw_trusted('a link to itself', $d, "$d/loop/f");
dw_trusted('a file on the way', $d, "$d/ok/f/g");

echo "-- the trusted owner setting\n";
var_dump(TrustedFile::owner([]));
var_dump(TrustedFile::owner(['DW_TRUSTED_OWNER' => ' 65534 ']));
var_dump(TrustedFile::owner(['DW_TRUSTED_OWNER' => '']));
// The extension's ini entry wins over the server variable; without the extension it is
// no setting (an unregistered ini entry).
$child = function (bool $ext): string {
    $code = 'require ' . var_export(dirname(__DIR__, 2) . '/php/TrustedFile.php', true) . ';'
        . ' echo var_export(DwRouter\TrustedFile::owner(["DW_TRUSTED_OWNER" => "5"]), true);';
    $php = escapeshellarg(PHP_BINARY) . ' -n' . ($ext ? ' -d extension=' . escapeshellarg(dw_extension_path()) : '');
    return (string) shell_exec("$php -d dw_router.trusted_owner=998 -r " . escapeshellarg($code));
};
echo 'ini 998, server 5, extension: ', $child(true), "\n";
echo 'ini 998, server 5, no extension: ', $child(false), "\n";

echo "-- open_basedir hides the way: refused, and said so\n";
$code = 'require ' . var_export(dirname(__DIR__, 2) . '/php/TrustedFile.php', true) . ';'
    . ' echo DwRouter\TrustedFile::read("test file", $argv[1], 64, null)["bytes"] ?? DwRouter\TrustedFile::read("test file", $argv[1], 64, null);';
echo shell_exec(escapeshellarg(PHP_BINARY) . ' -n -d open_basedir=' . escapeshellarg($d . ':' . dirname(__DIR__, 2) . '/php')
    . ' -r ' . escapeshellarg($code) . ' ' . escapeshellarg("$d/ok/f")), "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
-- the happy path, sizes, missing
happy: read "hello\n"
relative path: read "hello\n"
through ..: read "hello\n"
64 of 64 bytes: read "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
65 of 64 bytes: test file refused: over 64 bytes
missing file: no test file
missing directory: no test file
no file named: test file refused: the path names no file
-- rule 1: a regular file, not a symlink
symlink: test file refused: a symbolic link (not followed)
FIFO: test file refused: not a regular file (a FIFO)
directory: test file refused: not a regular file (a directory)
-- rule 2: the file not writable by group or others
0646: test file refused: writable by group or others (mode 0646)
0620: test file refused: writable by group or others (mode 0620)
-- rule 3: its directory
0775: test file refused: its directory is writable by group or others (mode 0775)
sticky, no trusted owner: test file refused: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, DW_TRUSTED_OWNER)
sticky, trusted owner 0: read "x"
sticky, file of 1001, trusted owner 65534: test file refused: owned by uid 1001, not root or the trusted owner 65534
sticky, file of 1001, trusted owner 1001: read "x"
-- rule 4: owners
file of 65534: test file refused: owned by uid 65534, not root or the directory's owner 0
file of 65534, trusted owner 65534: read "x"
the directory's owner's file: read "x"
its directory of 65534, trusted owner 1001: test file refused: its directory is owned by uid 65534, not root or the trusted owner 1001
a name that names no user: test file refused: the trusted owner "dw-no-such-user" names no user
-- rule 5: every directory on the way from /
a parent writable by others: test file refused: DIR/open on the way to it is writable by group or others (mode 0777)
a parent writable by group: test file refused: DIR/open on the way to it is writable by group or others (mode 0775)
a parent of another uid: test file refused: DIR/bob on the way to it is owned by uid 1001, not root or the directory's owner 0
a parent of another uid, it the trusted owner: read "x"
sticky parent, entry of 1001, no trusted owner: test file refused: DIR/tmp is shared (sticky, writable by others, mode 1777) and DIR/tmp/dw-router in it is owned by uid 1001, not root (no trusted owner is set)
sticky parent, entry of 1001, trusted owner 1001: read "x"
sticky parent, root's entry, no trusted owner: read "x"
-- rule 5 and symlinked directories
a link whose target's parent is writable by others: test file refused: DIR/open on the way to it is writable by group or others (mode 0777)
the same, fixed: read "x"
a link sitting in a directory writable by others: test file refused: DIR/shared on the way to it is writable by group or others (mode 0777)
a link to a link sitting there: test file refused: DIR/shared on the way to it is writable by group or others (mode 0777)
a relative link with ..: read "hello\n"
a link to itself: test file refused: more than 40 symbolic links on the way
a file on the way: test file refused: DIR/ok/f on the way is not a directory
-- the trusted owner setting
NULL
string(5) "65534"
NULL
ini 998, server 5, extension: '998'
ini 998, server 5, no extension: '5'
-- open_basedir hides the way: refused, and said so
test file refused: cannot look at / (open_basedir: every directory from / must be visible)
