--TEST--
stages(): the stages the agent applied (top-level `stages`), in stats() and phpinfo; none when absent; an unreadable field is taken as none, the file still loads
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$de = json_encode(dw_region('eu-2', ['ams-a'], ['ams-a' => 1]));
$path = "$dir/routing.json";
dw_write_atomic($path, '{"format":1,"revision":7,"kvs":{"/dw/routing/region/DE":' . $de . '}}');
$router = new RegionRouter($path);
var_dump($router->stages(), $router->stats()['stages']);

// The agent applied two stages: both named, with their revisions.
dw_write_atomic($path, '{"format":1,"revision":9,"prefix":"/dw/routing/","stages":[{"id":"eu-map","revision":8},{"id":"b.2","revision":3}],"kvs":{"/dw/routing/region/DE":' . $de . '}}');
$router->reload();
var_dump($router->revision(), $router->stages(), $router->stats()['stages']);
ob_start();
phpinfo(INFO_MODULES);
preg_match('/stages applied => (.*)/', ob_get_clean(), $m);
echo 'phpinfo: ', $m[1] ?? 'missing', "\n";

// Another shape (spaces, fields reordered) reads the same.
dw_write_atomic($path, '{"format":1, "revision":10, "stages":[ {"revision":8, "id":"eu-map"} ], "kvs":{"/dw/routing/region/DE":' . $de . '}}');
$router->reload();
var_dump($router->revision(), $router->stages());

// Unreadable: ignored, the file loads and routes.
foreach (['7', '[{"id":5,"revision":1}]', '[{"id":"x","revision":-1}]', '{"id":"x"}'] as $i => $bad) {
    dw_write_atomic($path, '{"format":1,"revision":' . (11 + $i) . ',"stages":' . $bad . ',"kvs":{"/dw/routing/region/DE":' . $de . '}}');
    $router->reload();
    echo $router->revision(), ' ', json_encode($router->stages()), ' ', $router->resolve('DE')['shard'], ' failed=', $router->stats()['failed_loads'], "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
array(0) {
}
array(0) {
}
int(9)
array(2) {
  [0]=>
  string(6) "eu-map"
  [1]=>
  string(3) "b.2"
}
array(2) {
  [0]=>
  array(2) {
    ["id"]=>
    string(6) "eu-map"
    ["revision"]=>
    int(8)
  }
  [1]=>
  array(2) {
    ["id"]=>
    string(3) "b.2"
    ["revision"]=>
    int(3)
  }
}
phpinfo: eu-map (revision 8), b.2 (revision 3)
int(10)
array(1) {
  [0]=>
  string(6) "eu-map"
}
11 [] eu-2 failed=0
12 [] eu-2 failed=0
13 [] eu-2 failed=0
14 [] eu-2 failed=0
