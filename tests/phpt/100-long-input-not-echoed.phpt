--TEST--
A 100,000-digit revision (or format, origin name) is not echoed whole into last_error or stats()['invalid']: quoted input is cut at 64 bytes and marked with …
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
dw_publish($path, 1, []);
$router = new RegionRouter($path);
$long = fn (string $c) => str_repeat($c, 100000);
$files = [
    'revision' => '{"format":1,"revision":' . $long('9') . ',"kvs":{}}',
    'format' => '{"format":' . $long('7') . ',"revision":2,"kvs":{}}',
    'string revision' => '{"format":1,"revision":"' . $long('8') . '","kvs":{}}',
    'origin' => '{"format":1,"revision":3,"kvs":{"/dw/routing/region/DE":"{\"shard\":\"a\",\"origins\":[\"'
        . $long('o') . '\",\"' . $long('o') . '\"],\"weight\":{}}"}}',
];
foreach ($files as $what => $bytes) {
    dw_write_atomic($path, $bytes);
    $router->reload();
    $stats = $router->stats();
    $message = $what === 'origin' ? (string) ($stats['invalid']['/dw/routing/region/DE'] ?? '') : (string) $stats['last_error'];
    echo $what, ': ', strlen($message) < 200 ? 'short' : strlen($message) . ' bytes', ': ', $message, "\n";
}
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
revision: short: snapshot: revision 9999999999999999999999999999999999999999999999999999999999999999… is not a non-negative integer
format: short: snapshot: unsupported format 7777777777777777777777777777777777777777777777777777777777777777… (this reader knows 1)
string revision: short: snapshot: revision "888888888888888888888888888888888888888888888888888888888888888… is not a non-negative integer
origin: short: region: field `origins`: origin "oooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooooo…" is listed twice
