<?php

declare(strict_types=1);

/*
 * The checkers' reference answer: the userland twin (DwRouter\RegionRouter) on a snapshot
 * built, in docs/snapshot-format.md's format, from a state of the routing prefix. Shared by
 * the chaos checker (tests/chaos/lib/check.php) and the cache chaos checker
 * (tests/cache/lib/check.php).
 */

require_once __DIR__ . '/../../../php/RegionRouter.php';
require_once __DIR__ . '/stages.php';

/**
 * The twin's answer ("shard origin") for each case "geo|sticky" ('~': empty geo, no sticky
 * key) from $kvs (full keys under DW_CHAOS_PREFIX => values) at revision $rev; the snapshot
 * is written to $dir and removed. The second element says whether the twin loaded it (its
 * revision is $rev).
 *
 * @param array<string, string> $kvs
 * @param array<string, mixed> $cases
 * @return array{0: array<string, string>, 1: bool}
 */
function dw_chaos_twin_routes(string $dir, array $kvs, int $rev, array $cases): array
{
    $snapshot = ['format' => 1, 'revision' => $rev, 'prefix' => DW_CHAOS_PREFIX, 'kvs' => (object) $kvs];
    $path = "$dir/rev-$rev.json";
    file_put_contents($path, json_encode($snapshot, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
    $twin = new DwRouter\RegionRouter($path, ['apcu' => false]);
    $loaded = $twin->revision() === $rev;
    $out = [];
    foreach ($cases as $case => $_) {
        [$country, $sticky] = explode('|', (string) $case);
        $route = $twin->resolve($country === '~' ? '' : $country, $sticky === '~' ? null : $sticky);
        $out[$case] = $route['shard'] . ' ' . $route['origin'];
    }
    unlink($path);
    return [$out, $loaded];
}
