--TEST--
Answer counting: fail-open answers are counted (no snapshot; a geo the chain cannot answer); a snapshot removed under a running router keeps the last good table, not fail-open
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/traffic.inc';
$dir = dw_test_dir(__FILE__);
dw_publish("$dir/gap.json", 3, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);
echo dw_traffic_run("$dir/answers", __DIR__ . '/fixtures/traffic/count-fail-open.php', ["$dir/none.json", "$dir/gap.json"],
    ['dw_router.fallback_shard' => 'fb-1', 'dw_router.fallback_origin' => 'fb-a']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
no snapshot:
DE fail_open - fb-a fb-1 - => 2
no default:
DE country DE fra-a eu-1 - => 1
DE fail_open - fb-a fb-1 - => 2
other fail_open - fb-a fb-1 - => 1
file removed:
DE country DE fra-a eu-1 - => 2
DE fail_open - fb-a fb-1 - => 2
other fail_open - fb-a fb-1 - => 1
