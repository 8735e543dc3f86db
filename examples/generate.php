<?php

declare(strict_types=1);

/*
 * Deterministic generator of example routing config. The example's policy and real
 * countries are examples/routing.json, the desired state `dwctl apply` takes; its origins
 * are ORIGINS below.
 *
 *   php examples/generate.php
 *       rewrites examples/snapshot.json (a format-1 snapshot, docs/snapshot-format.md)
 *       from examples/routing.json.
 *
 *   php examples/generate.php --regions N --out FILE [--pick legacy|rendezvous] [--pretty]
 *       writes a synthetic snapshot with N regions (1..2500) for benchmarks: the real
 *       countries of the example first, then synthetic geos X0001, X0002, ...
 *
 * The output depends only on the arguments: same arguments, same bytes.
 */

const PREFIX = '/dw/routing/';
const REVISION = 1234;
const MAX_REGIONS = 2500;
// Every `updated` time is derived from this instant so the output never changes.
const BASE_TIME = '2026-11-30T08:00:00Z';

const ORIGINS = [
    'fra-a' => ['addr' => '10.20.1.11:443', 'pop' => 'FRA'],
    'fra-b' => ['addr' => '10.20.1.12:443', 'pop' => 'FRA'],
    'ams-a' => ['addr' => '10.20.2.11:443', 'pop' => 'AMS'],
    'lon-a' => ['addr' => '10.20.3.11:443', 'pop' => 'LON'],
    'gru-a' => ['addr' => '10.30.1.11:443', 'pop' => 'GRU'],
    'iad-a' => ['addr' => '10.10.1.11:443', 'pop' => 'IAD'],
    'sjc-a' => ['addr' => '10.10.2.11:443', 'pop' => 'SJC'],
    'sin-a' => ['addr' => '10.40.1.11:443', 'pop' => 'SIN'],
];

const SHARDS = ['eu-1', 'eu-2', 'latam-1', 'us-1', 'us-2', 'apac-1'];

function fail(string $message): never
{
    fwrite(STDERR, "generate.php: $message\n");
    exit(2);
}

/** RFC 3339 UTC time, $minutes before BASE_TIME. */
function updatedAt(int $minutes): string
{
    return gmdate('Y-m-d\TH:i:s\Z', (int) strtotime(BASE_TIME) - 60 * $minutes);
}

/**
 * The example's desired state: its policy and its real countries' regions, in order.
 *
 * @return array{policy: array<string, mixed>, regions: array<string, array{shard: string, origins: list<string>, weight: array<string, int>}>}
 */
function example(): array
{
    static $example = null;
    if ($example === null) {
        $json = file_get_contents(__DIR__ . '/routing.json');
        $example = $json === false ? null : json_decode($json, true);
        if (!is_array($example) || !is_array($example['policy'] ?? null) || !is_array($example['regions'] ?? null)) {
            fail('cannot read the example from ' . __DIR__ . '/routing.json');
        }
    }

    return $example;
}

function compactJson(mixed $value): string
{
    return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR);
}

/**
 * The desired regions: the real countries, then synthetic ones up to $count.
 *
 * @return array<string, array{shard: string, origins: list<string>, weight: array<string, int>}>
 */
function regions(int $count): array
{
    // Country keys only: the benchmarks' country mix and compiled-file variant look geos
    // up by name, and a continent bucket is never one (docs/routing.md, "The chain").
    $countries = array_filter(example()['regions'], fn (string $geo): bool => !str_starts_with($geo, 'continent/'), ARRAY_FILTER_USE_KEY);
    $regions = array_slice($countries, 0, $count, true);
    $random = new Random\Randomizer(new Random\Engine\Xoshiro256StarStar(20261130));
    $originIds = array_keys(ORIGINS);
    for ($i = 1; count($regions) < $count; $i++) {
        $picked = $random->pickArrayKeys($originIds, $random->getInt(1, 4));
        $origins = array_map(fn (int $k): string => $originIds[$k], $random->shuffleArray($picked));
        $weight = [];
        foreach ($origins as $origin) {
            $weight[$origin] = $random->getInt(1, 100);
        }
        $regions[sprintf('X%04d', $i)] = [
            'shard' => SHARDS[$random->getInt(0, count(SHARDS) - 1)],
            'origins' => $origins,
            'weight' => $weight,
        ];
    }

    return $regions;
}

/**
 * @param array<string, array{shard: string, origins: list<string>, weight: array<string, int>}> $regions
 * @param array<string, mixed> $policy
 * @return array<string, mixed>
 */
function snapshot(array $regions, array $policy, int $revision): array
{
    $kvs = [PREFIX . 'policy/global' => compactJson($policy)];
    $minutes = 0;
    foreach (ORIGINS as $id => $meta) {
        $kvs[PREFIX . 'origin/' . $id] = compactJson($meta + ['registered' => updatedAt(5 + $minutes++)]);
    }
    $minutes = 0;
    foreach ($regions as $geo => $region) {
        $kvs[PREFIX . 'region/' . $geo] = compactJson($region + ['updated' => updatedAt(17 * $minutes++ % 1440)]);
    }
    ksort($kvs, SORT_STRING);

    return ['format' => 1, 'revision' => $revision, 'prefix' => PREFIX, 'kvs' => $kvs];
}

function write(string $path, mixed $document, bool $pretty): void
{
    $flags = JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE | JSON_THROW_ON_ERROR | ($pretty ? JSON_PRETTY_PRINT : 0);
    if (file_put_contents($path, json_encode($document, $flags) . "\n") === false) {
        fail("cannot write $path");
    }
}

$options = getopt('', ['regions:', 'out:', 'pick:', 'pretty', 'help']);
if (isset($options['help'])) {
    echo "usage: php examples/generate.php [--regions N --out FILE [--pick legacy|rendezvous] [--pretty]]\n";
    exit(0);
}

if (!isset($options['regions']) && !isset($options['out'])) {
    write(__DIR__ . '/snapshot.json', snapshot(example()['regions'], example()['policy'], REVISION), true);
    echo 'wrote ' . __DIR__ . "/snapshot.json\n";
    exit(0);
}

$count = filter_var($options['regions'] ?? null, FILTER_VALIDATE_INT);
if (!is_int($count) || $count < 1 || $count > MAX_REGIONS) {
    fail('--regions must be an integer from 1 to ' . MAX_REGIONS);
}
$out = $options['out'] ?? null;
if (!is_string($out) || $out === '') {
    fail('--out FILE is required with --regions');
}
$pick = $options['pick'] ?? 'legacy';
if (!in_array($pick, ['legacy', 'rendezvous'], true)) {
    fail('--pick must be legacy or rendezvous');
}
write($out, snapshot(regions($count), array_replace(example()['policy'], ['pick' => $pick]), REVISION + $count), isset($options['pretty']));
echo "wrote $out ($count regions)\n";
