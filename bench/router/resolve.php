<?php

declare(strict_types=1);

/*
 * Per-call cost of every routing variant at one table size, in one process.
 *
 *   php [ini...] bench/router/resolve.php --dir DIR --size N wall [--rounds 5] [--target-ms 250] [--max-iterations 2000000] [--variants a,b]
 *       times every variant, interleaved round by round, and prints JSON:
 *       ns per iteration for each round, the iteration counts, the country mix.
 *   valgrind --tool=callgrind --dump-before=usleep php [ini...] bench/router/resolve.php --dir DIR --size N callgrind '{"variant":iterations,...}'
 *       the same setup and warm-up, then each listed variant's loop in turn, with a
 *       usleep(0) before each and after the last: callgrind dumps its counters on entry to
 *       usleep, so dump part k+1 holds exactly the instructions of the k-th loop (plus the
 *       few hundred of one usleep call). Prints the variants in the order run, as JSON.
 *
 * Needs: -d extension=<dw_router.so> -d dw_router.snapshot_path=DIR/snapshot-N.json
 * -d opcache.enable_cli=1 -d apc.enable_cli=1 (bench/10-router.sh passes them all).
 */

namespace DwBench;

require __DIR__ . '/lib.php';

$args = $argv;
array_shift($args);
$options = ['rounds' => 5, 'target-ms' => 250, 'max-iterations' => 2_000_000, 'variants' => null];
$positional = [];
while ($args !== []) {
    $arg = array_shift($args);
    if (str_starts_with($arg, '--')) {
        $options[substr($arg, 2)] = array_shift($args) ?? fail("$arg needs a value");
    } else {
        $positional[] = $arg;
    }
}
$dir = (string) ($options['dir'] ?? fail('--dir is required'));
$size = (int) ($options['size'] ?? fail('--size is required'));
$snapshot = "$dir/snapshot-$size.json";
$compiled = "$dir/compiled-$size.php";
if (!extension_loaded('dw_router')) {
    fail('the dw_router extension is not loaded');
}
if (ini_get('dw_router.snapshot_path') !== $snapshot) {
    fail("dw_router.snapshot_path must be $snapshot");
}
if (!function_exists('apcu_enabled') || !apcu_enabled()) {
    fail('APCu is not enabled (apc.enable_cli=1)');
}
$opcache = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
if (!is_array($opcache) || !$opcache['opcache_enabled']) {
    fail('opcache is not enabled (opcache.enable_cli=1)');
}

$countries = country_mix(table_geos($compiled));
$fixtures = fixtures($snapshot, $compiled);
$variants = $options['variants'] === null ? array_keys(VARIANTS) : explode(',', (string) $options['variants']);

// Every variant must give the same answers, or the comparison means nothing.
$reset = twin_request_reset();
foreach ($countries as $country) {
    $expected = $fixtures['ext']->resolve($country);
    $reset();
    $answers = [
        'ext_request' => (new \RegionRouter())->resolve($country),
        'twin' => $fixtures['twin']->resolve($country),
        'twin_request' => (new \DwRouter\RegionRouter($snapshot))->resolve($country),
        'compiled' => compiled_resolve(include $compiled, $country),
    ];
    foreach ($answers as $variant => $answer) {
        if ($answer !== $expected) {
            fail(sprintf('%s disagrees with the extension for %s at %d regions: %s vs %s', $variant, $country, $size,
                json_encode($answer), json_encode($expected)));
        }
    }
}
// The twin and the extension both read the same file, and the twin answered from APCu.
if (($fixtures['twin']->revision()) !== (new \RegionRouter())->revision()) {
    fail('the twin and the extension see different revisions');
}
if ((new \DwRouter\RegionRouter($snapshot))->stats()['apcu_hits'] < 1) {
    fail('the per-request twin did not answer from APCu');
}

// Warm-up: every variant a little, so lazy work (the twin's region decoding, the
// extension's route arrays, opcache's copy of the compiled file) is done before timing.
foreach (array_keys(VARIANTS) as $variant) {
    run_loop($variant, $countries, 32, $fixtures[$variant]);
}
if (!opcache_is_script_cached($compiled)) {
    fail("opcache did not cache $compiled (opcache.file_update_protection?)");
}

$mode = $positional[0] ?? 'wall';
if ($mode === 'callgrind') {
    $plan = json_decode($positional[1] ?? '', true);
    if (!is_array($plan) || $plan === []) {
        fail('callgrind \'{"variant": iterations, ...}\'');
    }
    foreach ($plan as $variant => $n) {
        usleep(0);
        run_loop((string) $variant, $countries, (int) $n, $fixtures[$variant]);
    }
    usleep(0);
    echo json_encode(array_keys($plan)), "\n";
    exit(0);
}
if ($mode !== 'wall') {
    fail("unknown mode $mode");
}

/** Seconds one loop of $n iterations takes. */
$time = static function (string $variant, int $n) use ($countries, $fixtures): float {
    $start = hrtime(true);
    run_loop($variant, $countries, $n, $fixtures[$variant]);

    return (hrtime(true) - $start) / 1e9;
};

// Calibrate: enough iterations for about target-ms per measurement, at most max-iterations.
$target = (float) $options['target-ms'] / 1000;
$max = (int) $options['max-iterations'];
$iterations = [];
foreach ($variants as $variant) {
    $n = 64;
    while (($elapsed = $time($variant, $n)) < 0.02 && $n < $max) {
        $n *= 4;
    }
    $iterations[$variant] = (int) max(1000, min($max, ceil($n * $target / max($elapsed, 1e-9))));
}

$samples = array_fill_keys($variants, []);
$rounds = (int) $options['rounds'];
for ($round = 0; $round < $rounds; $round++) {
    // Rotate the order each round so slow drift of a shared machine spreads evenly.
    $order = array_merge(array_slice($variants, $round % count($variants)), array_slice($variants, 0, $round % count($variants)));
    foreach ($order as $variant) {
        $samples[$variant][] = $time($variant, $iterations[$variant]) * 1e9 / $iterations[$variant];
    }
}

echo json_encode([
    'size' => $size,
    'revision' => $fixtures['ext']->revision(),
    'snapshot_bytes' => filesize($snapshot),
    'countries' => $countries,
    'iterations' => $iterations,
    'ns_per_iteration' => $samples,
    'median' => array_map(median(...), $samples),
    'twin_apcu_hits' => (new \DwRouter\RegionRouter($snapshot))->stats()['apcu_hits'],
    'opcache_jit' => ini_get('opcache.jit'),
], JSON_PRETTY_PRINT | JSON_THROW_ON_ERROR) . "\n";
