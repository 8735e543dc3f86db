--TEST--
Rendezvous drain: removing one origin (or setting its weight to 0) moves only the visitors that were on it (2000 sticky keys)
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);
$path = "$dir/dw-routing.json";
$policy = '{"pick":"rendezvous","default":"DE"}';
$weights = ['fra-a' => 40, 'fra-b' => 30, 'fra-c' => 20, 'fra-d' => 10];
dw_publish($path, 1, ['policy/global' => $policy, 'region/DE' => dw_region('eu-1', array_keys($weights), $weights)]);
$router = new RegionRouter($path);

$keys = [];
for ($i = 0; $i < 2000; $i++) {
    $keys[] = "visitor-$i-" . md5((string) $i);
}
$answers = function () use ($router, $keys) {
    $out = [];
    foreach ($keys as $key) {
        $route = $router->resolve('DE', $key);
        $out[$key] = $route['shard'] === 'eu-1' ? $route['origin'] : 'WRONG SHARD';
    }
    return $out;
};
$before = $answers();
$share = array_count_values($before);
ksort($share);
echo 'origins in use: ', implode(' ', array_keys($share)), "\n";

$check = function (string $label, array $before, array $after, string $drained) {
    $moved = $stayed = $wrong = 0;
    foreach ($before as $key => $origin) {
        if ($origin === $drained) {
            $after[$key] === $drained ? $wrong++ : $moved++;
        } elseif ($after[$key] !== $origin) {
            $wrong++;
        } else {
            $stayed++;
        }
    }
    $expectedMoved = count(array_keys($before, $drained, true));
    echo "$label: moved=", $moved === $expectedMoved ? 'all on drained' : "$moved of $expectedMoved",
        ' wrong=', $wrong, ' stayed+moved=', $stayed + $moved, "\n";
    $newShare = array_count_values($after);
    ksort($newShare);
    echo "$label: origins in use after: ", implode(' ', array_keys($newShare)), "\n";
};

// 1. Remove fra-b from the list.
$drained = $weights;
unset($drained['fra-b']);
dw_publish($path, 2, ['policy/global' => $policy, 'region/DE' => dw_region('eu-1', array_keys($drained), $drained)]);
var_dump(dw_wait_until(fn () => $router->revision() === 2), $router->revision());
$afterRemove = $answers();
$check('remove fra-b', $before, $afterRemove, 'fra-b');

// 2. Back to all four: everyone is where they started.
dw_publish($path, 3, ['policy/global' => $policy, 'region/DE' => dw_region('eu-1', array_keys($weights), $weights)]);
var_dump(dw_wait_until(fn () => $router->revision() === 3), $answers() === $before);

// 3. Drain fra-c by weight 0 while keeping it listed.
$zero = ['fra-c' => 0] + $weights;
dw_publish($path, 4, ['policy/global' => $policy, 'region/DE' => dw_region('eu-1', array_keys($weights), $zero)]);
var_dump(dw_wait_until(fn () => $router->revision() === 4));
$check('weight 0 for fra-c', $before, $answers(), 'fra-c');

// Contrast: the legacy pick does not have this property (many visitors move).
$legacy = [];
foreach ($keys as $key) {
    $a = dw_legacy_pick(array_keys($weights), $weights, $key);
    $b = dw_legacy_pick(array_keys($drained), $drained, $key);
    if ($a !== 'fra-b' && $a !== $b) {
        $legacy[] = $key;
    }
}
var_dump(count($legacy) > 200);
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
origins in use: fra-a fra-b fra-c fra-d
bool(true)
int(2)
remove fra-b: moved=all on drained wrong=0 stayed+moved=2000
remove fra-b: origins in use after: fra-a fra-c fra-d
bool(true)
bool(true)
bool(true)
weight 0 for fra-c: moved=all on drained wrong=0 stayed+moved=2000
weight 0 for fra-c: origins in use after: fra-a fra-b fra-d
bool(true)
