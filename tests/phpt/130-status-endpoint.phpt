--TEST--
php/status.php: 503 without a table or a trusted (php/TrustedFile.php), fresh, current heartbeat; 200 otherwise (extension and twin)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
require __DIR__ . '/fixtures/status.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
$beat = "$path.heartbeat";

dw_status_both('no snapshot', $path);
dw_publish_fixture($path, 'basic.json');
dw_status_both('no heartbeat', $path);
dw_write_atomic($beat, dw_heartbeat());
dw_status_both('current', $path);
dw_write_atomic($beat, dw_heartbeat('stale', 0, 1234, ['reason' => 'connecting to http://e1']));
dw_status_both('agent stale', $path);

// Age: by default three of the heartbeat's interval (5 s); DW_STATUS_MAX_AGE overrides,
// 1 to 3600 (out of range: the default).
dw_write_atomic($beat, dw_heartbeat('current', 1000));
dw_status_both('old', $path);
dw_status_both('old, max age 3600', $path, ['DW_STATUS_MAX_AGE' => '3600']);
dw_status_both('old, max age 900', $path, ['DW_STATUS_MAX_AGE' => '900']);
dw_status_both('old, max age 3601 (ignored)', $path, ['DW_STATUS_MAX_AGE' => '3601']);

// Trust: php/TrustedFile.php (tests/phpt/131), rules 1-5 of docs/snapshot-trust.md.
dw_write_atomic("$dir/elsewhere", dw_heartbeat());
unlink($beat);
symlink("$dir/elsewhere", $beat);
dw_status_both('symlink', $path);
unlink($beat);
dw_plant($beat, dw_heartbeat(), 65534);
dw_status_both('another owner', $path);
dw_status_both('another owner, DW_TRUSTED_OWNER=65534', $path, ['DW_TRUSTED_OWNER' => '65534']);
dw_plant($beat, dw_heartbeat(), 0, 0664);
dw_status_both('group-writable', $path);
dw_plant($beat, dw_heartbeat(), 0, 0646);
dw_status_both('others-writable', $path);
dw_write_atomic($beat, '{"time":"now","state":"current","revision":1}');
dw_status_both('not the agent\'s JSON', $path);
// 4096 bytes are read; a longer file is refused.
$json = rtrim(dw_heartbeat());
dw_write_atomic($beat, str_pad($json, 4096));
dw_status_both('4096 bytes', $path);
dw_write_atomic($beat, str_pad($json, 4097));
dw_status_both('4097 bytes', $path);
// Rule 5: the test's base directory, above the heartbeat's, writable by others. The
// extension refuses the snapshot there too (no table); the twin reads it, and refuses the
// heartbeat.
dw_write_atomic($beat, dw_heartbeat());
chmod(dirname($dir), 0777);
echo str_replace(dirname($dir), 'BASE', (function () use ($path) {
    ob_start();
    dw_status_both('a parent writable by others', $path);
    return ob_get_clean();
})());
chmod(dirname($dir), 0755);
dw_status_both('fixed', $path);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
no snapshot: 503 no routing table
no heartbeat: 503 no heartbeat file
current: 200 ok
agent stale: 503 agent: stale: connecting to http://e1
old: 503 heartbeat is 1000+ s old (at most 15)
old, max age 3600: 200 ok
old, max age 900: 503 heartbeat is 1000+ s old (at most 900)
old, max age 3601 (ignored): 503 heartbeat is 1000+ s old (at most 15)
symlink: 503 heartbeat file refused: a symbolic link (not followed)
another owner: 503 heartbeat file refused: owned by uid 65534, not root or the directory's owner 0
another owner, DW_TRUSTED_OWNER=65534: 200 ok
group-writable: 503 heartbeat file refused: writable by group or others (mode 0664)
others-writable: 503 heartbeat file refused: writable by group or others (mode 0646)
not the agent's JSON: 503 heartbeat file is not the agent's JSON
4096 bytes: 200 ok
4097 bytes: 503 heartbeat file refused: over 4096 bytes
a parent writable by others: 503 no routing table | twin: 503 heartbeat file refused: BASE on the way to it is writable by group or others (mode 0777)
fixed: 200 ok
