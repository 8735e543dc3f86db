<?php
/*
 * The extension's own object handlers (create_object, get_constructor, free_obj) and the
 * resolve() fast paths, under valgrind's memcheck with the Zend allocator off
 * (USE_ZEND_ALLOC=0), so every object block is a malloc block memcheck can bound:
 *
 *   USE_ZEND_ALLOC=0 valgrind --error-exitcode=9 php -n -d extension=dw_router.so \
 *       tests/memcheck/object-lifecycle.php
 *
 * Every form of `new`, routers freed young and old, a constructor that throws, reloads
 * (a new table, its memo and route arrays) while routers are alive. Prints "ok" last;
 * scripts/run-tests counts it passed only with that line and no memcheck error.
 */

declare(strict_types=1);

function check(bool $condition, string $what): void
{
    if (!$condition) {
        fwrite(STDERR, "object-lifecycle: $what\n");
        exit(1);
    }
}

function publish(string $path, int $revision, string $origin): void
{
    $region = json_encode(['shard' => 'eu-1', 'origins' => [$origin, 'spare'], 'weight' => [$origin => 9, 'spare' => 1]]);
    $snapshot = json_encode(['format' => 1, 'revision' => $revision, 'kvs' => [
        '/dw/routing/region/DE' => $region,
        '/dw/routing/region/X0010' => $region,
        '/dw/routing/policy/global' => '{"default":"DE","buckets":8}',
    ]]);
    file_put_contents("$path.tmp", $snapshot);
    rename("$path.tmp", $path);
}

$dir = sys_get_temp_dir() . '/dw-memcheck-' . getmypid();
@mkdir($dir, 0755, true);
$path = "$dir/dw-routing.json";
publish($path, 1, 'fra-a');

$class = 'RegionRouter';
$held = [];
for ($i = 0; $i < 300; $i++) {
    $routers = [
        new RegionRouter($path),
        new RegionRouter(...[$path]),
        new RegionRouter(snapshotPath: $path),
        new $class($path),
        (new ReflectionClass('RegionRouter'))->newInstance($path),
    ];
    foreach ($routers as $router) {
        $route = $router->resolve('DE');
        check($route['shard'] === 'eu-1', 'a route from the table');
        $router->resolve('X0010');
        $router->resolve('ZZ', "visitor-$i");
        $router->resolve(str_repeat("\xff", $i % 40));
        // Visitor buckets: from the frame (an int, null), past N, sticky first; a negative
        // one is parsed and refused (a ValueError).
        $router->resolve('DE', null, $i % 8);
        $router->resolve('DE', null, null);
        $router->resolve('X0010', bucket: 3);
        $router->resolve('ZZ', null, 8 + $i);
        $router->resolve('DE', "visitor-$i", $i % 8);
        try {
            $router->resolve('DE', null, -1 - $i);
            check(false, 'a negative bucket is refused');
        } catch (ValueError) {
        }
    }
    // Default routers (the ini path is unset here, so they fail open): bare and not.
    $bare = new RegionRouter();
    $bare->resolve('DE');
    (new RegionRouter)->resolve('FR', 'v');
    (new RegionRouter(null))->revision();
    $bare->stats();
    $bare->policy();
    try {
        new RegionRouter($path, 'extra');
    } catch (ArgumentCountError) {
    }
    try {
        new RegionRouter([]);
    } catch (TypeError) {
    }
    if ($i % 7 === 0) {
        $held[] = $routers[$i % 5];   // some live on across reloads
    }
    if ($i % 50 === 49) {
        publish($path, intdiv($i, 50) + 2, "fra-$i");
        $routers[0]->reload();
    }
}
foreach ($held as $router) {
    check(str_starts_with($router->resolve('DE')['origin'], 'fra-') || $router->resolve('DE')['origin'] === 'spare', 'a held router still routes');
}
unset($held, $routers, $bare);
gc_collect_cycles();
unlink($path);
rmdir($dir);
echo "ok\n";
