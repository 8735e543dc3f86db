<?php

declare(strict_types=1);

/*
 * Differential test of visitor buckets (docs/routing.md, "Buckets"): the extension's
 * \RegionRouter, the userland twin \DwRouter\RegionRouter and, optionally, `dwctl route
 * --bucket`, on random (region, N, bucket, change) cases.
 *
 *   scripts/devenv exec -- php -d extension=target/release/libdw_router.so \
 *       tests/differential/buckets.php --cases 100000 --seed 1 [--dwctl target/release/dwctl]
 *
 * Each snapshot has a random N (2 to 1024, the edges often; sometimes off or a bad value,
 * which is off) and a few regions of 1 to 6 origins with random weights. A region's stored
 * `buckets` is the result of a *change*: an assignment (the default of earlier weights, or
 * none) `reassign`ed by the twin's Buckets to random new weights, the value carrying the
 * new weights; or, as a hand or an older dwctl would leave it, a stale one (weights changed
 * without it), one written for another N, a non-canonical or non-string one, or none. Each
 * case resolves a random geo (a region's, a subdivision, one the default answers, an opaque
 * one) with a random bucket (below N mostly, at or past N, 0 and N - 1), now and then with
 * a sticky key, on both routers, and compares the answers; explain() (what the bucket did)
 * on every eighth; and the counting kind through traffic() at the end of each snapshot's
 * process-local twin (the extension counts only with dw_router.count_answers). With
 * --dwctl, `dwctl route --snapshot FILE GEO --bucket B --output json` is compared with the
 * extension's explain() for two cases of each of the first 60 snapshots (a process each).
 *
 * Ends with `buckets differential: N passed, M failed`; exits 1 on any mismatch, 2 when it
 * cannot run (the extension not loaded), never passing vacuously.
 */

require_once __DIR__ . '/../../php/RegionRouter.php';
require_once __DIR__ . '/../../php/Buckets.php';
require_once __DIR__ . '/../lib/script-setup.php';

use DwRouter\Buckets;
use DwRouter\RegionRouter as Twin;

$options = getopt('', ['cases:', 'seed:', 'lookups:', 'dwctl:', 'help']);
if (isset($options['help'])) {
    echo "usage: php -d extension=.../libdw_router.so tests/differential/buckets.php [--cases N] [--seed N] [--lookups N] [--dwctl PATH]\n";
    exit(0);
}
$cases = max(1, (int) ($options['cases'] ?? 100_000));
$seed = (int) ($options['seed'] ?? random_int(1, PHP_INT_MAX >> 1));
$lookups = max(1, (int) ($options['lookups'] ?? 250));
$dwctl = isset($options['dwctl']) ? (string) $options['dwctl'] : null;
if ($dwctl !== null && !is_executable($dwctl)) {
    fwrite(STDERR, "buckets differential: --dwctl $dwctl is not an executable\n");
    exit(2);
}
if (!class_exists(\RegionRouter::class, false)) {
    fwrite(STDERR, "buckets differential: the dw_router extension is not loaded\n");
    exit(2);
}
throw_on_diagnostics();
$dir = private_temp_dir('buckets differential');
mt_srand($seed);
echo "buckets differential: seed $seed, $cases cases\n";

/** A random N: the edges often, sometimes off or a value the readers treat as off. */
function random_policy(): array
{
    $n = match (mt_rand(0, 9)) {
        0 => 2,
        1 => 1024,
        2 => 3,
        3 => null,                    // absent: off
        4 => [0, 1, 1025, '16', 16.0][mt_rand(0, 4)], // off
        default => mt_rand(2, 300),
    };
    $policy = ['default' => 'US'];
    if ($n !== null) {
        $policy['buckets'] = $n;
    }
    return [$policy, is_int($n) && $n >= 2 && $n <= 1024 ? $n : null];
}

/** @return list<int> random weights, at least one positive */
function random_weights(int $count): array
{
    do {
        $weights = [];
        for ($i = 0; $i < $count; $i++) {
            $weights[] = mt_rand(0, 3) === 0 ? 0 : mt_rand(1, 100);
        }
    } while (array_sum($weights) === 0);
    return $weights;
}

/** A region value after a random change, with its stored `buckets` (or a broken one). */
function random_region(string $name, ?int $n): string
{
    $count = mt_rand(1, 6);
    $origins = [];
    for ($i = 0; $i < $count; $i++) {
        $origins[] = "$name-$i";
    }
    $before = random_weights($count);
    $after = mt_rand(0, 2) === 0 ? $before : random_weights($count);
    $storedN = $n ?? mt_rand(2, 64);
    $value = ['shard' => "s-$name", 'origins' => $origins, 'weight' => (object) array_combine($origins, $after)];
    $start = Buckets::defaultAssignment($before, $storedN);
    switch (mt_rand(0, 9)) {
        case 0: // none: the default
            break;
        case 1: // stale: the weights changed without the assignment
            $value['buckets'] = Buckets::encode($start);
            break;
        case 2: // written for another N
            $value['buckets'] = Buckets::encode(Buckets::defaultAssignment($after, $storedN === 1024 ? 512 : $storedN + 1));
            break;
        case 3: // not canonical, or not a string
            $value['buckets'] = [Buckets::encode($start) . ',', '0:' . str_repeat('9', 6), '', 7, null, ['0:1'], false][mt_rand(0, 6)];
            break;
        default: // a change: the stored assignment reassigned to the new weights, twice
            $middle = Buckets::reassign($start, random_weights($count));
            $value['buckets'] = Buckets::encode(Buckets::reassign($middle, $after));
    }
    return json_encode($value, JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR);
}

$snapshots = (int) ceil($cases / $lookups);
$passed = 0;
$failed = 0;
$shown = 0;
$dwctlCompared = 0;
$compare = static function (string $what, mixed $a, mixed $b) use (&$passed, &$failed, &$shown, $seed): void {
    if ($a === $b) {
        $passed++;
        return;
    }
    $failed++;
    if ($shown++ < 10) {
        echo "MISMATCH (seed $seed) $what\n  extension: ", json_encode($a), "\n  twin:      ", json_encode($b), "\n";
    }
};
$done = 0;
/** How often explain() gave each bucket outcome (its text up to the first parenthesis'
 * content kind): what the cases covered. */
$outcomes = [];
for ($s = 0; $s < $snapshots; $s++) {
    [$policy, $n] = random_policy();
    $kvs = ['policy/global' => json_encode($policy)];
    $geos = ['US', 'DE', 'FR', 'GB', 'JP'];
    foreach ($geos as $geo) {
        if ($geo !== 'FR' && ($geo === 'US' || mt_rand(0, 3) > 0)) {
            $kvs["region/$geo"] = random_region(strtolower($geo), $n);
        }
    }
    if (mt_rand(0, 1) === 0) {
        $kvs['region/continent/AS'] = random_region('as', $n);
    }
    $full = [];
    foreach ($kvs as $key => $value) {
        $full["/dw/routing/$key"] = $value;
    }
    $path = sprintf('%s/buckets-%06d.json', $dir, $s);
    file_put_contents($path, json_encode(['format' => 1, 'revision' => $s + 1, 'prefix' => '/dw/routing/', 'kvs' => (object) $full], JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR));
    $native = new \RegionRouter($path);
    $twin = new Twin($path, ['apcu' => false]);
    $compare("buckets() of snapshot $s", $native->buckets(), $twin->buckets());
    $top = $n ?? 8;
    $count = min($lookups, $cases - $done);
    for ($l = 0; $l < $count; $l++, $done++) {
        $geo = ['US', 'DE', 'FR', 'GB', 'JP', 'DE-BY', 'KR', 'T1', '', 'zz'][mt_rand(0, 9)];
        $bucket = match (mt_rand(0, 9)) {
            0 => $top - 1,
            1 => $top,
            2 => $top + mt_rand(1, 2000),
            3 => 0,
            4 => null,
            default => mt_rand(0, $top - 1),
        };
        $sticky = mt_rand(0, 9) === 0 ? 'visitor-' . mt_rand(1, 99) : null;
        $compare("snapshot $s resolve($geo, " . json_encode($sticky) . ", " . json_encode($bucket) . ')',
            $native->resolve($geo, $sticky, $bucket), $twin->resolve($geo, $sticky, $bucket));
        if ($l % 8 === 0) {
            $a = $native->explain($geo, $sticky, $bucket);
            $b = $twin->explain($geo, $sticky, $bucket);
            $pick = static fn (array $e): array => [$e['origin'], $e['hash_key'], $e['hash_key_from'],
                $e['bucket'] ?? null, $e['buckets'] ?? null, $e['bucket_outcome'] ?? null];
            $compare("snapshot $s explain($geo, " . json_encode($sticky) . ", " . json_encode($bucket) . ')', $pick($a), $pick($b));
            $outcome = preg_replace('/: region: .*/', '', (string) ($a['bucket_outcome'] ?? 'no bucket'));
            $outcomes[$outcome] = ($outcomes[$outcome] ?? 0) + 1;
        }
    }
    if ($dwctl !== null && $s < 60) {
        foreach ([['DE', mt_rand(0, $top - 1)], ['FR', $top]] as [$geo, $bucket]) {
            $argv = [$dwctl, '--output', 'json', 'route', '--snapshot', $path, '--bucket', (string) $bucket, '--', $geo];
            $proc = proc_open($argv, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
            $out = stream_get_contents($pipes[1]);
            $err = stream_get_contents($pipes[2]);
            $status = proc_close($proc);
            $fromDwctl = json_decode((string) $out, true);
            $fromExtension = $native->explain($geo, null, $bucket);
            if (is_array($fromDwctl)) {
                unset($fromDwctl['source']);
                if ($fromDwctl['fail_open'] === true) {
                    [$fromDwctl['shard'], $fromDwctl['origin']] = [$fromExtension['shard'], $fromExtension['origin']];
                }
            }
            $dwctlCompared++;
            $compare("snapshot $s dwctl route $geo --bucket $bucket", $status === 0 ? $fromDwctl : "exit $status: $err", $fromExtension);
        }
    }
    // The twin's counts by kind, against what its own answers say they were.
    $kinds = [];
    foreach ($twin->traffic()['answers'] as $row) {
        $kinds[$row['kind']] = ($kinds[$row['kind']] ?? 0) + $row['answers'];
    }
    ksort($kinds);
    $compare("snapshot $s kinds are plain, sticky or bucket", array_diff(array_keys($kinds), ['bucket', 'plain', 'sticky']), []);
    unlink($path);
}
ksort($outcomes);
foreach ($outcomes as $outcome => $times) {
    echo "  explained $times times: $outcome\n";
}
// Never vacuous: every way a bucket can go was reached.
foreach (['(stored)', '(default)', 'reassigned', 'ignored', 'sticky key wins', 'not below', 'no buckets'] as $needle) {
    if (array_filter(array_keys($outcomes), static fn (string $o): bool => str_contains($o, $needle)) === []) {
        echo "buckets differential: no case explained '$needle'\n";
        $failed++;
    }
}
if ($dwctl !== null && $dwctlCompared === 0) {
    echo "buckets differential: dwctl route compared nothing\n";
    $failed++;
}
echo "buckets differential: $passed passed, $failed failed", $dwctl !== null ? " ($dwctlCompared by dwctl route)" : '', "\n";
exit($failed === 0 && $passed > 0 ? 0 : 1);
