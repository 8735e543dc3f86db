--TEST--
Rendezvous pick (policy.pick = "rendezvous"): equal to the documented PHP formula; weight shares
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$path = __DIR__ . '/fixtures/rendezvous.json';
$router = new RegionRouter($path);
var_dump($router->policy()['pick']);
$snapshot = json_decode(file_get_contents($path), true);
$regions = [];
foreach ($snapshot['kvs'] as $key => $value) {
    if (str_starts_with($key, '/dw/routing/region/')) {
        $regions[substr($key, strlen('/dw/routing/region/'))] = json_decode($value, true);
    }
}

$keys = ['', "\0", "\xff", str_repeat('r', 300), str_repeat("\0", 255), str_repeat('s', 256)];
for ($i = 0; $i < 500; $i++) {
    $keys[] = "session-$i";
}
$mismatches = 0;
$legacyDiffers = 0;
$counts = [];
foreach ($regions as $geo => $region) {
    foreach ($keys as $key) {
        $expected = dw_rendezvous_pick($region['origins'], $region['weight'], $key);
        $got = $router->resolve((string) $geo, $key);
        if ($got !== ['shard' => $region['shard'], 'origin' => $expected]) {
            if (++$mismatches <= 5) {
                echo "mismatch $geo / ", bin2hex($key), ": expected $expected, got ", json_encode($got), "\n";
            }
        }
        if ($expected !== dw_legacy_pick($region['origins'], $region['weight'], $key)) {
            $legacyDiffers++;
        }
        $counts[$geo][$expected] = ($counts[$geo][$expected] ?? 0) + 1;
    }
}
echo "mismatches: $mismatches\n";
// The two picks are different functions: a router stuck in legacy mode fails here.
var_dump($legacyDiffers > 500);
// Weight 0 never picked; shares follow weights (SKEW 1000:7:0:300 over 506 keys).
ksort($counts['SKEW']);
var_dump(array_keys($counts['SKEW']), isset($counts['SKEW']['b3']));
var_dump($counts['SKEW']['b1'] > $counts['SKEW']['b4'], $counts['SKEW']['b4'] > $counts['SKEW']['b2']);
ksort($counts['EVEN']);
var_dump(array_keys($counts['EVEN']), min($counts['EVEN']) > 100);
// The unlisted "gone" weight never makes a pick in rendezvous.
ksort($counts['UNLISTED']);
var_dump(array_keys($counts['UNLISTED']));
?>
--EXPECT--
string(10) "rendezvous"
mismatches: 0
bool(true)
array(3) {
  [0]=>
  string(2) "b1"
  [1]=>
  string(2) "b2"
  [2]=>
  string(2) "b4"
}
bool(false)
bool(true)
bool(true)
array(3) {
  [0]=>
  string(2) "a1"
  [1]=>
  string(2) "a2"
  [2]=>
  string(2) "a3"
}
bool(true)
array(2) {
  [0]=>
  string(2) "c1"
  [1]=>
  string(2) "c2"
}
