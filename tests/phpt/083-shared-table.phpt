--TEST--
Many RegionRouter objects on one path share one table: one load, one reload for all; path spellings that name the same file share too
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 1, ['region/DE' => dw_region('eu-1', ['fra-a'], ['fra-a' => 1])]);

$routers = [];
for ($i = 0; $i < 200; $i++) {
    $routers[] = new RegionRouter($path);
}
$loads = array_unique(array_map(fn ($r) => $r->stats()['loads'], $routers));
var_dump($loads, $routers[199]->revision());

// Routers constructed and dropped per "request" cost no load either.
for ($i = 0; $i < 1000; $i++) {
    $answer = (new RegionRouter($path))->resolve('DE');
}
var_dump($answer, (new RegionRouter($path))->stats()['loads']);

// Another spelling of the same path: "./" segments. (A relative path is refused: 098.)
$dotted = new RegionRouter("$dir/./dw-routing.json");
var_dump($dotted->stats()['path'] === $path, $dotted->stats()['loads']);

// One rename: every object, whatever its spelling, sees it; still one load per file.
dw_publish($path, 2, ['region/DE' => dw_region('eu-2', ['fra-b'], ['fra-b' => 1])]);
var_dump(dw_wait_until(fn () => $routers[0]->revision() === 2));
$revisions = array_unique(array_map(fn ($r) => $r->revision(), [...$routers, $dotted]));
$answers = array_unique(array_map(fn ($r) => $r->resolve('DE')['shard'], [...$routers, $dotted]));
var_dump($revisions, $answers, $routers[5]->stats()['loads'], $dotted->stats()['loads']);

// A different file is a different table.
dw_publish("$dir/other.json", 9, []);
$other = new RegionRouter("$dir/other.json");
var_dump($other->revision(), $other->stats()['loads'], $routers[0]->revision());
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
array(1) {
  [0]=>
  int(1)
}
int(1)
array(2) {
  ["shard"]=>
  string(4) "eu-1"
  ["origin"]=>
  string(5) "fra-a"
}
int(1)
bool(true)
int(1)
bool(true)
array(1) {
  [0]=>
  int(2)
}
array(1) {
  [0]=>
  string(4) "eu-2"
}
int(2)
int(2)
int(9)
int(1)
int(2)
