--TEST--
resolve($geo, null, $bucket): visitor buckets, their precedence, their memo, buckets(), explain()
--EXTENSIONS--
dw_router
--FILE--
<?php
require __DIR__ . '/fixtures/helpers.inc';
$dir = dw_test_dir(__FILE__);

$stored = json_decode(dw_region('eu-2', ['lon-a', 'lon-b'], ['lon-a' => 1, 'lon-b' => 1]), true);
$stored['buckets'] = '1:2,0:2';
$kvs = [
    'policy/global' => '{"default":"US","buckets":4}',
    'region/DE' => dw_region('eu-1', ['fra-a', 'fra-b'], ['fra-a' => 50, 'fra-b' => 50]),
    'region/US' => dw_region('us-1', ['iad-a', 'iad-b', 'iad-c'], ['iad-a' => 1, 'iad-b' => 1, 'iad-c' => 2]),
    'region/GB' => json_encode($stored, JSON_UNESCAPED_SLASHES),
];
dw_publish("$dir/on.json", 7, $kvs);
$router = new RegionRouter("$dir/on.json");
dw_check('buckets()', $router->buckets(), 4);
dw_check('stats buckets', $router->stats()['buckets'], 4);

// The default assignment of DE (blocks): 0, 1 fra-a; 2, 3 fra-b. GB's is stored.
$plainDe = dw_route('eu-1', dw_legacy_pick(['fra-a', 'fra-b'], ['fra-a' => 50, 'fra-b' => 50], 'DE'));
$byBucket = [
    'DE' => ['eu-1', ['fra-a', 'fra-a', 'fra-b', 'fra-b']],
    'FR' => ['us-1', ['iad-a', 'iad-b', 'iad-c', 'iad-c']], // FR: the default's region
    'GB' => ['eu-2', ['lon-b', 'lon-b', 'lon-a', 'lon-a']],
];

// The memo in one process: a country's memoised answer never answers another bucket,
// and a bucket's answer never fills the country's memo. Interleaved, several rounds.
dw_check('DE plain', $router->resolve('DE'), $plainDe);
$wrong = 0;
for ($round = 0; $round < 3; $round++) {
    foreach ($byBucket as $geo => [$shard, $origins]) {
        $plain = $router->resolve($geo);
        foreach ([3, 0, 2, 1] as $bucket) {
            $wrong += (int) ($router->resolve($geo, null, $bucket) !== dw_route($shard, $origins[$bucket]));
            $wrong += (int) ($router->resolve($geo) !== $plain);
        }
    }
}
dw_check('every bucket by its assignment, the plain memo untouched', $wrong, 0);
dw_check('DE plain after buckets', $router->resolve('DE'), $plainDe);
// A bucket asked first, then the country (a fresh memo): still the country's.
$plainAt = $router->resolve('AT', null, 3);
dw_check('AT bucket 3 (default US)', $plainAt, dw_route('us-1', 'iad-c'));
dw_check('AT plain after', $router->resolve('AT'), dw_route('us-1', dw_legacy_pick(['iad-a', 'iad-b', 'iad-c'], ['iad-a' => 1, 'iad-b' => 1, 'iad-c' => 2], 'AT')));
dw_check('a subdivision follows its country', $router->resolve('DE-BY', null, 2), dw_route('eu-1', 'fra-b'));

// Precedence: a sticky key wins, then a bucket, then the country.
foreach (['DE', 'FR', 'GB', 'T1', ''] as $geo) {
    dw_check("$geo sticky wins", $router->resolve($geo, 'visitor-9', 0), $router->resolve($geo, 'visitor-9'));
    foreach ([4, 5, 1024, PHP_INT_MAX] as $bucket) {
        dw_check("$geo bucket $bucket past N", $router->resolve($geo, null, $bucket), $router->resolve($geo));
    }
    dw_check("$geo null bucket", $router->resolve($geo, null, null), $router->resolve($geo));
}

// Arguments: a negative bucket is a ValueError; coercive mode converts as for any ?int.
foreach ([-1, PHP_INT_MIN] as $bucket) {
    try {
        $router->resolve('DE', null, $bucket);
        echo "FAIL no ValueError for $bucket\n";
    } catch (ValueError $e) {
        echo get_class($e), ': ', $e->getMessage(), "\n";
    }
}
try {
    $router->resolve('DE', bucket: -2);
} catch (ValueError $e) {
    echo 'named: ', $e->getMessage(), "\n";
}
dw_check('named bucket', $router->resolve('DE', bucket: 3), dw_route('eu-1', 'fra-b'));
dw_check('"2" coerced', $router->resolve('DE', null, '2'), dw_route('eu-1', 'fra-b'));
dw_check('1.0 coerced', $router->resolve('DE', null, 1.0), dw_route('eu-1', 'fra-a'));
try {
    $router->resolve('DE', null, 'x');
} catch (TypeError $e) {
    echo get_class($e), ': ', $e->getMessage(), "\n";
}
try {
    $router->resolve('DE', null, 1, 2);
} catch (ArgumentCountError $e) {
    echo get_class($e), ': ', $e->getMessage(), "\n";
}

// explain() says what the bucket did, and agrees with resolve().
$explained = $router->explain('GB', null, 1);
dw_check('explain GB 1', [$explained['origin'], $explained['hash_key_from'], $explained['bucket'], $explained['buckets']], ['lon-b', 'bucket', 1, 4]);
echo $explained['bucket_outcome'], "\n";
echo $router->explain('DE', 'k', 1)['bucket_outcome'], "\n";
echo $router->explain('DE', null, 9)['bucket_outcome'], "\n";
dw_check('explain without a bucket keeps its shape', array_key_exists('bucket', $router->explain('DE')), false);
try {
    $router->explain('DE', null, -1);
} catch (ValueError $e) {
    echo $e->getMessage(), "\n";
}

// Buckets off (absent, 0, or a bad value): every bucket answers as without one.
foreach (['{"default":"US"}', '{"default":"US","buckets":0}', '{"default":"US","buckets":1}', '{"default":"US","buckets":"4"}'] as $i => $policy) {
    dw_publish("$dir/off-$i.json", 8, ['policy/global' => $policy] + $kvs);
    $off = new RegionRouter("$dir/off-$i.json");
    $same = $off->buckets() === 0 && $off->stats()['invalid_keys'] === 0;
    foreach (['DE', 'GB', 'FR'] as $geo) {
        foreach ([0, 1, 3] as $bucket) {
            $same = $same && $off->resolve($geo, null, $bucket) === $off->resolve($geo);
        }
    }
    dw_check("off: $policy", $same, true);
}
echo $off->explain('DE', null, 1)['bucket_outcome'], "\n";
?>
--CLEAN--
<?php
require __DIR__ . '/fixtures/helpers.inc';
dw_clean(__FILE__);
?>
--EXPECT--
ok   buckets()
ok   stats buckets
ok   DE plain
ok   every bucket by its assignment, the plain memo untouched
ok   DE plain after buckets
ok   AT bucket 3 (default US)
ok   AT plain after
ok   a subdivision follows its country
ok   DE sticky wins
ok   DE bucket 4 past N
ok   DE bucket 5 past N
ok   DE bucket 1024 past N
ok   DE bucket 9223372036854775807 past N
ok   DE null bucket
ok   FR sticky wins
ok   FR bucket 4 past N
ok   FR bucket 5 past N
ok   FR bucket 1024 past N
ok   FR bucket 9223372036854775807 past N
ok   FR null bucket
ok   GB sticky wins
ok   GB bucket 4 past N
ok   GB bucket 5 past N
ok   GB bucket 1024 past N
ok   GB bucket 9223372036854775807 past N
ok   GB null bucket
ok   T1 sticky wins
ok   T1 bucket 4 past N
ok   T1 bucket 5 past N
ok   T1 bucket 1024 past N
ok   T1 bucket 9223372036854775807 past N
ok   T1 null bucket
ok    sticky wins
ok    bucket 4 past N
ok    bucket 5 past N
ok    bucket 1024 past N
ok    bucket 9223372036854775807 past N
ok    null bucket
ValueError: RegionRouter::resolve(): Argument #3 ($bucket) must be greater than or equal to 0
ValueError: RegionRouter::resolve(): Argument #3 ($bucket) must be greater than or equal to 0
named: RegionRouter::resolve(): Argument #3 ($bucket) must be greater than or equal to 0
ok   named bucket
ok   "2" coerced
ok   1.0 coerced
TypeError: RegionRouter::resolve(): Argument #3 ($bucket) must be of type ?int, string given
ArgumentCountError: RegionRouter::resolve() expects at most 3 arguments, 4 given
ok   explain GB 1
picked by the region's assignment (stored)
ignored: a sticky key wins over a bucket
ignored: not below the policy's buckets (answered as without a bucket)
ok   explain without a bucket keeps its shape
RegionRouter::explain(): Argument #3 ($bucket) must be greater than or equal to 0
ok   off: {"default":"US"}
ok   off: {"default":"US","buckets":0}
ok   off: {"default":"US","buckets":1}
ok   off: {"default":"US","buckets":"4"}
ignored: policy/global has no buckets (answered as without a bucket)
