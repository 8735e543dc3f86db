--TEST--
Answer counting across workers: 300 forked workers that exited (slots reused past the 256), eight at once of which four are killed by SIGTERM, one killed mid-run, and a second process tree on the same file: every answer counted, exactly
--EXTENSIONS--
dw_router
pcntl
posix
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
dw_publish($path, 5, [
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 1, 'fra-b' => 1]),
    'region/FR' => dw_region('eu-2', ['par-a'], ['par-a' => 1]),
]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-workers.php', [$path]);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
after 300 workers that exited: DE counted 3005 of 3005, overflow 0
mid-run worker killed by SIGTERM: true
answered 45782, counted 45782, overflow 0
DE country DE fra-a eu-1 sticky => 5450
DE country DE fra-b eu-1 - => 33030
DE country DE fra-b eu-1 sticky => 5302
FR country FR par-a eu-2 - => 2000
