--TEST--
An unreadable snapshot after a good one keeps the last good table, counts failed_loads, sets last_error; a good one then loads
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 1, [
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 1, 'fra-b' => 1]),
    'policy/global' => '{"default":"DE","owner":"good"}',
]);
$router = new RegionRouter($path);
$good = [];
foreach (['DE', 'XX', '', 'k1', 'k2'] as $country) {
    $good[$country] = $router->resolve($country);
}
var_dump($router->revision(), $router->stats()['loads']);

// fixture => a word the error message must contain
$bad = [
    'bad-syntax.json' => 'JSON',
    'bad-truncated.json' => 'JSON',
    'bad-empty.json' => 'empty',
    'bad-binary.json' => 'UTF-8',
    'bad-null.json' => 'object',
    'bad-top-array.json' => 'object',
    'bad-format-2.json' => 'format',
    'bad-format-string.json' => 'format',
    'bad-no-format.json' => 'format',
    'bad-no-revision.json' => 'revision',
    'bad-revision-negative.json' => 'revision',
    'bad-revision-float.json' => 'revision',
    'bad-revision-string.json' => 'revision',
    'bad-no-kvs.json' => 'kvs',
    'bad-kvs-array.json' => 'kvs',
    'bad-kvs-nonstring.json' => 'kvs',
    'bad-top-array-fields.json' => 'object',   // last: if it were taken, the table would change
];
$attempts = fn () => $router->stats()['loads'] + $router->stats()['failed_loads'];
foreach ($bad as $fixture => $word) {
    // Wait for the file to be looked at (loaded or refused), then check it was refused.
    $failedBefore = $router->stats()['failed_loads'];
    $before = $attempts();
    dw_publish_fixture($path, $fixture);
    dw_wait_until(fn () => $attempts() > $before);
    $stats = $router->stats();
    $counted = $stats['failed_loads'] === $failedBefore + 1;
    $same = true;
    foreach ($good as $country => $route) {
        $same = $same && $router->resolve($country) === $route;
    }
    $error = $stats['last_error'];
    printf("%-28s counted=%s revision=%d same-answers=%s loads=%d error-mentions-%s=%s\n",
        $fixture, json_encode($counted), $router->revision(), json_encode($same), $stats['loads'], $word,
        json_encode(is_string($error) && stripos($error, $word) !== false));
}
var_dump($router->policy()['owner']);
// A fresh router object for the path still answers from the last good table.
var_dump((new RegionRouter($path))->revision());

dw_publish($path, 3, ['region/DE' => dw_region('eu-3', ['ber-a'], ['ber-a' => 1])]);
var_dump(dw_wait_until(fn () => $router->revision() === 3));
$stats = $router->stats();
var_dump($router->resolve('DE'), $stats['loads'], $stats['failed_loads'], $stats['last_error'], $router->policy());
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
int(1)
int(1)
bad-syntax.json              counted=true revision=1 same-answers=true loads=1 error-mentions-JSON=true
bad-truncated.json           counted=true revision=1 same-answers=true loads=1 error-mentions-JSON=true
bad-empty.json               counted=true revision=1 same-answers=true loads=1 error-mentions-empty=true
bad-binary.json              counted=true revision=1 same-answers=true loads=1 error-mentions-UTF-8=true
bad-null.json                counted=true revision=1 same-answers=true loads=1 error-mentions-object=true
bad-top-array.json           counted=true revision=1 same-answers=true loads=1 error-mentions-object=true
bad-format-2.json            counted=true revision=1 same-answers=true loads=1 error-mentions-format=true
bad-format-string.json       counted=true revision=1 same-answers=true loads=1 error-mentions-format=true
bad-no-format.json           counted=true revision=1 same-answers=true loads=1 error-mentions-format=true
bad-no-revision.json         counted=true revision=1 same-answers=true loads=1 error-mentions-revision=true
bad-revision-negative.json   counted=true revision=1 same-answers=true loads=1 error-mentions-revision=true
bad-revision-float.json      counted=true revision=1 same-answers=true loads=1 error-mentions-revision=true
bad-revision-string.json     counted=true revision=1 same-answers=true loads=1 error-mentions-revision=true
bad-no-kvs.json              counted=true revision=1 same-answers=true loads=1 error-mentions-kvs=true
bad-kvs-array.json           counted=true revision=1 same-answers=true loads=1 error-mentions-kvs=true
bad-kvs-nonstring.json       counted=true revision=1 same-answers=true loads=1 error-mentions-kvs=true
bad-top-array-fields.json    counted=true revision=1 same-answers=true loads=1 error-mentions-object=true
string(4) "good"
int(1)
bool(true)
array(2) {
  ["shard"]=>
  string(4) "eu-3"
  ["origin"]=>
  string(5) "ber-a"
}
int(2)
int(17)
NULL
array(0) {
}
