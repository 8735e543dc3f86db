--TEST--
trust: a FIFO at the snapshot path neither hangs a worker nor loads; a file renamed over it then loads
--EXTENSIONS--
dw_router
posix
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/routing.json";
var_dump(posix_mkfifo($path, 0644));
// Nothing ever writes to the FIFO: an open without O_NONBLOCK would wait forever.
$started = hrtime(true);
$router = new RegionRouter($path);
$route = $router->resolve('DE');
$router->reload(); // (the watcher may have been first: the result is not checked)
$ms = (hrtime(true) - $started) / 1e6;
echo dw_refusal($router, $dir);
var_dump($route, $ms < 1000);

dw_publish_fixture($path, 'basic.json');
var_dump(dw_wait_until(fn () => $router->revision() === 1234));
echo dw_refusal($router, $dir);
// And a FIFO renamed over a good file is refused in turn, the good table kept.
posix_mkfifo("$dir/fifo.tmp", 0644);
rename("$dir/fifo.tmp", $path);
$started = hrtime(true);
$router->reload();
var_dump((hrtime(true) - $started) / 1e6 < 1000);
echo dw_refusal($router, $dir);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
bool(true)
revision=0 DE=us-1 loads=0 failed=1 error=refused DIR/routing.json: not a regular file (a FIFO)
array(2) {
  ["shard"]=>
  string(4) "us-1"
  ["origin"]=>
  string(5) "iad-a"
}
bool(true)
bool(true)
revision=1234 DE=eu-1 loads=1 failed=1 error=
bool(true)
revision=1234 DE=eu-1 loads=1 failed=2 error=refused DIR/routing.json: not a regular file (a FIFO)
