<?php

declare(strict_types=1);

/*
 * The userland twin's answers for the e2e test: one line per case,
 *   <country>|<sticky key or ->|<shard>|<origin>|<revision>
 * for every country of a desired-state file (examples/routing.json), a country without a
 * region, the empty country, a few sticky keys, and subdivisions `CC-SUB` (with a key of
 * their own, falling to their country, falling to a bucket; the e2e test sends them as
 * CF-IPCountry + cf-region-code), resolved by DwRouter\RegionRouter (no APCu) on the given
 * snapshot.
 *
 *   php twin.php SNAPSHOT ROUTING.json
 */

require __DIR__ . '/../../../php/RegionRouter.php';

[, $snapshot, $routing] = $argv + [null, null, null];
if (!is_string($snapshot) || !is_string($routing)) {
    fwrite(STDERR, "usage: php twin.php SNAPSHOT ROUTING.json\n");
    exit(2);
}
$desired = json_decode((string) file_get_contents($routing), true, 512, JSON_THROW_ON_ERROR);
$twin = new DwRouter\RegionRouter($snapshot, ['apcu' => false]);

$cases = [];
foreach (array_keys($desired['regions']) as $country) {
    $cases[] = [(string) $country, null];
}
$cases[] = ['ZZ', null];
foreach (['US-CA', 'US-TX', 'DE-BY', 'SI-061', 'PT-11'] as $subdivision) {
    $cases[] = [$subdivision, null];
}
$cases[] = ['US-CA', 'visitor-1'];
$cases[] = ['', null];
foreach (['visitor-1', 'visitor-2', 'visitor-3', 'visitor-4', 'visitor-5'] as $sticky) {
    $cases[] = ['DE', $sticky];
    $cases[] = ['MX', $sticky];
}
foreach ($cases as [$country, $sticky]) {
    $route = $twin->resolve($country, $sticky);
    printf("%s|%s|%s|%s|%d\n", $country, $sticky ?? '-', $route['shard'], $route['origin'], $twin->revision());
}
