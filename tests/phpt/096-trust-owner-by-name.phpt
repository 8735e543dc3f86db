--TEST--
trust: dw_router.trusted_owner takes a user name; a name that names no user refuses every file
--EXTENSIONS--
dw_router
--SKIPIF--
<?php if (!function_exists('proc_open') || !function_exists('posix_getpwnam') || (posix_getpwnam('nobody')['uid'] ?? null) !== 65534) die('skip needs proc_open and user nobody = 65534'); ?>
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
chmod($dir, 01777);
dw_plant($path, dw_fixture('basic.json'), 65534);
$so = dw_extension_path();
$code = '$r = new RegionRouter($argv[1]); echo $r->revision(), " ", $r->stats()["last_error"] ?? "-", "\n";';
foreach (['nobody', 'dw-no-such-user', '65534', ''] as $owner) {
    $cmd = [PHP_BINARY, '-n', '-d', "extension=$so", '-d', "dw_router.trusted_owner=$owner", '-r', $code, $path];
    $proc = proc_open($cmd, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
    $out = stream_get_contents($pipes[1]) . stream_get_contents($pipes[2]);
    proc_close($proc);
    echo json_encode($owner), ': ', str_replace($dir, 'DIR', $out);
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
"nobody": 1234 -
"dw-no-such-user": 0 refused DIR/routing.json: the trusted owner "dw-no-such-user" names no user
"65534": 1234 -
"": 0 refused DIR/routing.json: its directory is shared (sticky, writable by others, mode 1777) and no trusted owner is set (dw_router.trusted_owner, dw-agent --trusted-owner)
