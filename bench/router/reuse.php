<?php
/*
 * What a reload costs in the extension when only origin records changed, with and without
 * the snapshot's routing_digest (docs/snapshot-format.md), at N regions:
 *
 *   php -d extension=target/release/libdw_router.so -d dw_router.poll_interval_ms=600000 \
 *       bench/router/reuse.php DIR [N] [ROUNDS]
 *
 * DIR must not exist yet (the router then polls, so only reload() reloads). Each round
 * renames in a file whose regions are unchanged and whose origin record changed: once
 * with the table's digest (the table is kept: a reused reload) and once with another
 * digest (parsed after the previous table, every region recognised as unchanged: what
 * every such publication cost before). The first read (an empty table before) is timed
 * once. Prints the medians in milliseconds.
 */

$dir = $argv[1] ?? exit("usage: reuse.php DIR [N] [ROUNDS]\n");
$n = (int) ($argv[2] ?? 100000);
$rounds = (int) ($argv[3] ?? 21);
$path = "$dir/routing.json";
$router = new RegionRouter($path);
// stats() waits for the watch set-up, which finds no directory: the router polls.
$router->stats()['reload_mechanism'] === 'poll' || exit("$dir exists already\n");
mkdir($dir, 0755, true);

$regions = [];
for ($i = 0; $i < $n; $i++) {
    $geo = sprintf('X%06d', $i);
    $regions["/dw/routing/region/$geo"] = json_encode(
        ['shard' => 'eu-' . ($i % 7), 'origins' => ['a-' . ($i % 13), 'b-' . ($i % 11)],
            'weight' => ['a-' . ($i % 13) => 50, 'b-' . ($i % 11) => 50]],
        JSON_UNESCAPED_SLASHES
    );
}
$regions['/dw/routing/policy/global'] = '{"default":"X000001"}';

function publish(string $path, int $revision, string $digest, array $regions, int $origin): void
{
    $kvs = ['/dw/routing/origin/fra-a' => json_encode(['addr' => "10.0.0.$origin:443"])] + $regions;
    ksort($kvs, SORT_STRING);
    $bytes = json_encode(['format' => 1, 'revision' => $revision, 'prefix' => '/dw/routing/',
        'routing_digest' => $digest, 'kvs' => (object) $kvs], JSON_UNESCAPED_SLASHES);
    $tmp = "$path.tmp";
    file_put_contents($tmp, $bytes);
    rename($tmp, $path);
}

function timed(RegionRouter $router): float
{
    $start = hrtime(true);
    $before = $router->revision();
    $router->reload() || exit("the reload did not take the file (revision $before): " . json_encode($router->stats()) . "\n");
    return (hrtime(true) - $start) / 1e6;
}

function median(array $values): float
{
    sort($values);
    return $values[intdiv(count($values), 2)];
}

$revision = 1;
$digest = 0;
publish($path, $revision, "bench:$digest", $regions, 0);
$first = timed($router);
$size = filesize($path);
$reused = [];
$parsed = [];
for ($round = 1; $round <= $rounds; $round++) {
    publish($path, ++$revision, "bench:$digest", $regions, $round % 200);
    $reused[] = timed($router);
    publish($path, ++$revision, 'bench:' . ++$digest, $regions, ($round + 100) % 200);
    $parsed[] = timed($router);
}
$stats = $router->stats();
printf("regions %d, file %d bytes, rounds %d, reloads_reused %d, mechanism %s\n", $n, $size, $rounds, $stats["reloads_reused"], $stats["reload_mechanism"]);
printf("first read:                          %8.3f ms\n", $first);
printf("origin changed, another digest:      %8.3f ms (median)\n", median($parsed));
printf("origin changed, same digest (reused): %7.3f ms (median)\n", median($reused));
