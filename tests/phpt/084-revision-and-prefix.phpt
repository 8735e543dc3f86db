--TEST--
revision(): 0 and large revisions load; prefix: custom prefix routes its own keys only, null prefix is the default, origin/ keys ignored
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
// One watched directory in this test (routers for several directories: 059).
dw_publish_fixture("$dir/prefix-custom.json", 'prefix-custom.json');
$custom = new RegionRouter("$dir/prefix-custom.json");

foreach ([0, 1, 9007199254740993, PHP_INT_MAX] as $i => $revision) {
    $path = "$dir/r$i.json";
    dw_write_atomic($path, '{"format":1,"revision":' . $revision . ',"kvs":{}}');
    $router = new RegionRouter($path);
    echo "revision $revision: ", $router->revision() === $revision ? 'exact' : $router->revision(), ' loads=', $router->stats()['loads'], "\n";
}
// Past PHP_INT_MAX (and so past the JSON integers PHP reads): refused as a whole.
$path = "$dir/over.json";
dw_write_atomic($path, '{"format":1,"revision":9223372036854775808,"kvs":{}}');
$over = new RegionRouter($path);
echo 'revision 2^63: revision=', $over->revision(), ' failed_loads=', $over->stats()['failed_loads'], "\n";

// The snapshot of another prefix.
var_dump($custom->revision(), $custom->resolve('DE'), $custom->resolve('FR'), $custom->policy());
$stats = $custom->stats();
var_dump($stats['regions'], $stats['invalid_keys']);

// "prefix": null means the default prefix; a non-string prefix refuses the file.
dw_write_atomic("$dir/null-prefix.json", '{"format":1,"revision":3,"prefix":null,"kvs":{"/dw/routing/region/DE":' . json_encode(dw_region('eu-1', ['fra-a'], ['fra-a' => 1])) . '}}');
$nullPrefix = new RegionRouter("$dir/null-prefix.json");
var_dump($nullPrefix->revision(), $nullPrefix->resolve('DE')['shard']);
dw_write_atomic("$dir/int-prefix.json", '{"format":1,"revision":3,"prefix":5,"kvs":{}}');
$intPrefix = new RegionRouter("$dir/int-prefix.json");
var_dump($intPrefix->revision(), $intPrefix->stats()['failed_loads']);

// No prefix field: default; unknown top-level fields ignored.
dw_write_atomic("$dir/no-prefix.json", '{"format":1,"revision":4,"kvs":{"/dw/routing/region/DE":' . json_encode(dw_region('eu-4', ['x'], ['x' => 1])) . '},"agent":{"v":1},"written":"now"}');
$noPrefix = new RegionRouter("$dir/no-prefix.json");
var_dump($noPrefix->revision(), $noPrefix->resolve('DE')['shard']);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision 0: exact loads=1
revision 1: exact loads=1
revision 9007199254740993: exact loads=1
revision 9223372036854775807: exact loads=1
revision 2^63: revision=0 failed_loads=1
int(12)
array(2) {
  ["shard"]=>
  string(9) "custom-eu"
  ["origin"]=>
  string(5) "c-fra"
}
array(2) {
  ["shard"]=>
  string(9) "custom-eu"
  ["origin"]=>
  string(5) "c-fra"
}
array(1) {
  ["default"]=>
  string(2) "DE"
}
int(1)
int(0)
int(3)
string(4) "eu-1"
int(0)
int(1)
int(4)
string(4) "eu-4"
