--TEST--
Legacy pick: bit for bit the original PHP expression, for many countries and sticky keys
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$path = __DIR__ . '/fixtures/picks.json';
$router = new RegionRouter($path);
$snapshot = json_decode(file_get_contents($path), true);
$regions = [];
foreach ($snapshot['kvs'] as $key => $value) {
    if (str_starts_with($key, '/dw/routing/region/')) {
        $regions[substr($key, strlen('/dw/routing/region/'))] = json_decode($value, true);
    }
}
var_dump(array_keys($regions));

$keys = ['', "\0", "\xff\xfe", 'DE', 'de', str_repeat('k', 1000)];
for ($i = 0; $i < 400; $i++) {
    $keys[] = "visitor-$i";
    $keys[] = hash('crc32b', (string) $i, true);   // arbitrary bytes
}
$mismatches = 0;
$calls = 0;
$hits = [];
foreach ($regions as $geo => $region) {
    foreach ($keys as $key) {
        // As a sticky key.
        $expected = dw_legacy_pick($region['origins'], $region['weight'], $key);
        $got = $router->resolve((string) $geo, $key);
        $calls++;
        if ($got !== ['shard' => $region['shard'], 'origin' => $expected]) {
            $mismatches++;
            if ($mismatches <= 5) {
                echo "mismatch $geo / ", bin2hex($key), ': expected ', $expected, ', got ', json_encode($got), "\n";
            }
        }
        $hits[$geo][$expected] = ($hits[$geo][$expected] ?? 0) + 1;
    }
}
// As a country (no sticky key): the country is the hash key; unknown countries go to the
// default region (EVEN), picking with the country's bytes.
$even = $regions['EVEN'];
foreach ($keys as $country) {
    $expected = isset($regions[$country]) ? null : dw_legacy_pick($even['origins'], $even['weight'], $country);
    if ($expected === null) {
        continue;
    }
    $calls++;
    if ($router->resolve($country) !== ['shard' => 'p-1', 'origin' => $expected]) {
        $mismatches++;
        echo "mismatch country ", bin2hex($country), "\n";
    }
}
echo "calls: $calls, mismatches: $mismatches\n";

// The oracle itself spreads keys over the origins, so the comparison has teeth.
foreach ($hits as $geo => $origins) {
    ksort($origins);
    echo "$geo: ", implode(' ', array_keys($origins)), "\n";
}
?>
--EXPECT--
array(6) {
  [0]=>
  string(4) "EVEN"
  [1]=>
  string(4) "SKEW"
  [2]=>
  string(8) "UNLISTED"
  [3]=>
  string(5) "ORDER"
  [4]=>
  string(3) "ONE"
  [5]=>
  string(3) "UNI"
}
calls: 5642, mismatches: 0
EVEN: a1 a2 a3
SKEW: b1 b2 b4
UNLISTED: c1 c2
ORDER: d1 d2
ONE: e1
UNI: kraków-b zürich-a
