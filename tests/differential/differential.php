<?php

declare(strict_types=1);

/*
 * Differential test: the dw_router extension's \RegionRouter against the userland twin
 * \DwRouter\RegionRouter (php/RegionRouter.php), on random snapshots.
 *
 *   scripts/devenv exec -- php -d extension=/work/main/target/release/libdw_router.so \
 *       tests/differential/differential.php --cases 100000 --seed 1
 *
 * Options:
 *   --cases N        lookups to compare (default 100000); revision() and policy() are
 *                    compared once per snapshot on top, explain() and cacheTags() on
 *                    every fourth lookup
 *   --seed N         PRNG seed (default: random, printed); same seed, same snapshots
 *   --lookups N      lookups per snapshot (default 200): snapshots = ceil(cases / lookups)
 *   --show N         mismatching snapshots printed (default 5), each with up to 3 lookups
 *   --keep-dir DIR   copy every mismatching snapshot there (/tmp is private in the devenv)
 *   --no-edges       leave out the number and nesting edge cases (-0, 1e400, 2^64, ...)
 *   --dwctl PATH     also compare `dwctl route --snapshot FILE GEO --output json` with the
 *                    extension's explain() for the same snapshot (three geos per snapshot,
 *                    for the first 150 snapshots: a process each)
 *   --twin-vs-twin   compare the twin against itself (one instance with APCu, one
 *                    without) instead of the extension: checks this script's generator
 *                    and plumbing only, never the extension (its summary line says so)
 *
 * Every snapshot gets a path of its own: the extension loads a path once per process.
 * Ends with `differential: N passed, M failed`; exits 1 on any mismatch and 2 when it
 * cannot run (extension not loaded), never passing vacuously.
 */

require_once __DIR__ . '/../../php/RegionRouter.php';
require_once __DIR__ . '/../lib/script-setup.php';
require_once __DIR__ . '/snapshots.php';

use DwRouter\RegionRouter as Twin;

// ---- arguments ---------------------------------------------------------------------

$options = getopt('', ['cases:', 'seed:', 'lookups:', 'show:', 'keep-dir:', 'no-edges', 'twin-vs-twin', 'dwctl:', 'help']);
if (isset($options['help'])) {
    echo "usage: php -d extension=.../libdw_router.so tests/differential/differential.php\n"
        . "       [--cases N] [--seed N] [--lookups N] [--show N] [--keep-dir DIR] [--no-edges] [--twin-vs-twin]\n";
    exit(0);
}

function intOption(array $options, string $name, int $default, int $min): int
{
    if (!isset($options[$name])) {
        return $default;
    }
    $value = filter_var($options[$name], FILTER_VALIDATE_INT);
    if (!is_int($value) || $value < $min) {
        fwrite(STDERR, "differential: --$name must be an integer >= $min\n");
        exit(2);
    }

    return $value;
}

$cases = intOption($options, 'cases', 100_000, 1);
$seed = intOption($options, 'seed', random_int(1, PHP_INT_MAX >> 1), 0);
$lookupsPerSnapshot = intOption($options, 'lookups', 200, 1);
$show = intOption($options, 'show', 5, 0);
$keepDir = isset($options['keep-dir']) ? (string) $options['keep-dir'] : null;
$edges = !isset($options['no-edges']);
$twinVsTwin = isset($options['twin-vs-twin']);
$dwctl = isset($options['dwctl']) ? (string) $options['dwctl'] : null;
if ($dwctl !== null && !is_executable($dwctl)) {
    fwrite(STDERR, "differential: --dwctl $dwctl is not an executable\n");
    exit(2);
}
$dwctlCompared = 0;

if ($twinVsTwin) {
    $label = 'differential (twin vs twin, NOT the extension)';
    if (!(function_exists('apcu_enabled') && apcu_enabled())) {
        echo "note: APCu is not enabled (add -d apc.enable_cli=1): both sides run without it\n";
    }
} else {
    $label = 'differential';
    if (!extension_loaded('dw_router') || !class_exists('RegionRouter', false)
        || !(new ReflectionClass('RegionRouter'))->isInternal()) {
        fwrite(STDERR, "differential: the dw_router extension is not loaded (run with "
            . "-d extension=/work/main/target/release/libdw_router.so); nothing was compared\n");
        exit(2);
    }
}

// Diagnostics from either side are failures of the lookup that raised them.
throw_on_diagnostics();

$tempDir = private_temp_dir('differential');
if ($keepDir !== null && !is_dir($keepDir) && !mkdir($keepDir, 0755, true)) {
    fwrite(STDERR, "differential: cannot create $keepDir\n");
    exit(2);
}

// ---- comparing ---------------------------------------------------------------------

/** Calls $call, turning anything thrown into a comparable description. */
function outcome(callable $call): mixed
{
    try {
        return $call();
    } catch (Throwable $e) {
        return ['THROWN' => $e::class . ': ' . $e->getMessage()];
    }
}

/** A readable, unambiguous rendering of any value: strings as escaped literals. */
function show(mixed $value, int $limit = 120): string
{
    if (is_string($value)) {
        $literal = '"' . addcslashes(strlen($value) > $limit ? substr($value, 0, $limit) : $value, "\0..\37\"\\\177..\377") . '"';

        return strlen($value) > $limit ? sprintf('%s... (%d bytes, md5 %s)', $literal, strlen($value), md5($value)) : $literal;
    }
    if (is_array($value)) {
        $parts = [];
        foreach ($value as $k => $v) {
            $parts[] = (array_is_list($value) ? '' : show($k, $limit) . ' => ') . show($v, $limit);
        }

        return '[' . implode(', ', $parts) . ']';
    }

    return var_export($value, true);
}

/**
 * How the twin reached its answer: the candidate chain with each key's raw value and the
 * twin's verdict, so a mismatch can be triaged without re-running anything.
 *
 * @return array{0: list<string>, 1: ?string} [lines, the geo the twin answered from]
 */
function explain(Twin $twin, string $country): array
{
    $explanation = $twin->explain($country);
    $lines = [];
    foreach ($explanation['steps'] as $step) {
        $lines[] = sprintf('%s %s: %s', $step['stage'], show($step['geo'], 40), $step['outcome']);
    }
    $lines[] = $explanation['fail_open'] ? 'no candidate valid: fail-open' : 'answered by ' . show($explanation['answered_by'], 60);
    $answered = $explanation['fail_open'] ? null
        : substr((string) $explanation['answered_by'], strlen((string) $explanation['answered_by']) - strlen((string) end($explanation['steps'])['geo']));

    return [$lines, $answered];
}

/** Whether $text is valid UTF-8 (without mbstring, which the devenv lacks). */
function is_utf8(string $text): bool
{
    return preg_match('//u', $text) === 1;
}

/**
 * explain()'s array as both sides must give it: the extension alone says why a value is
 * invalid (`reason`), and spells a geo or key that is not UTF-8 with U+FFFD, so those
 * texts are left out for such input.
 *
 * @param array<string, mixed> $explanation
 * @return array<string, mixed>
 */
function comparableExplanation(array $explanation, string $geo, ?string $sticky): array
{
    $utf8 = is_utf8($geo) && ($sticky === null || is_utf8($sticky));
    foreach ($explanation['steps'] as &$step) {
        unset($step['reason']);
        if (!$utf8) {
            unset($step['geo'], $step['key']);
        }
    }
    unset($step);
    if (!$utf8) {
        unset($explanation['geo'], $explanation['sticky_key'], $explanation['hash_key'], $explanation['answered_by']);
    }

    return $explanation;
}

/** A coarse label of a mismatch, for the summary. */
function classify(string $what, mixed $native, mixed $twin, ?string $answeredFrom): string
{
    if (isset($native['THROWN']) || isset($twin['THROWN'])) {
        return 'an exception';
    }
    if (str_starts_with($what, 'cacheTags(')) {
        return $native[0] !== $twin[0] ? 'resolve() before cacheTags() differs' : 'cacheTags() differs';
    }
    if ($what === 'revision() and policy()') {
        return $native[0] !== $twin[0] ? 'revision() differs' : 'policy() differs';
    }
    $label = match (true) {
        $native === FAIL_OPEN => 'extension fails open, twin routes',
        $twin === FAIL_OPEN => 'twin fails open, extension routes',
        $native['shard'] === $twin['shard'] => 'same shard, different origin',
        default => 'different shard',
    };

    return $label . ($answeredFrom === '' ? ' (twin answered from the empty geo)' : '');
}

$gen = new Gen($seed, $edges);
$snapshots = intdiv($cases + $lookupsPerSnapshot - 1, $lookupsPerSnapshot);
echo "$label: seed $seed, $snapshots snapshots, $cases lookups" . ($edges ? '' : ', no edge cases') . "\n";

$passed = 0;
$failed = 0;
$shown = 0;
// How the agreed answers split, so a run that only ever compares fail-open is visible.
const FAIL_OPEN = ['shard' => 'us-1', 'origin' => 'iad-a'];
$answers = ['region' => 0, 'fail-open' => 0];
$kinds = ['rendezvous policy' => 0, 'broken file' => 0, 'edge file' => 0];
$categories = [];
$started = microtime(true);
$lookupsLeft = $cases;

for ($s = 0; $s < $snapshots; $s++) {
    $snapshot = $gen->snapshot();
    $kinds['rendezvous policy'] += (int) str_contains($snapshot['text'], 'rendezvous');
    if (isset($snapshot['notes']['(file)'])) {
        $kinds[$snapshot['notes']['(file)']]++;
    }
    $path = sprintf('%s/snapshot-%06d.json', $tempDir, $s);
    file_put_contents($path, $snapshot['text']);

    if ($twinVsTwin) {
        $native = outcome(static fn () => new Twin($path, ['apcu' => true]));
    } else {
        $native = outcome(static fn () => new \RegionRouter($path));
    }
    $twin = outcome(static fn () => new Twin($path, ['apcu' => false]));

    $mismatches = [];
    $compare = static function (string $what, callable $onNative, callable $onTwin, ?string $country = null) use ($native, $twin, &$mismatches, &$passed, &$failed, &$answers): void {
        $a = is_object($native) ? outcome(static fn () => $onNative($native)) : $native;
        $b = is_object($twin) ? outcome(static fn () => $onTwin($twin)) : $twin;
        if ($a === $b && !isset($a['THROWN'])) {
            $passed++;
            if (is_array($b) && isset($b['shard'])) {
                $answers[$b === FAIL_OPEN ? 'fail-open' : 'region']++;
            }

            return;
        }
        $failed++;
        $mismatches[] = [$what, $a, $b, $country];
    };

    $compare('revision() and policy()', static fn ($r) => [$r->revision(), $r->policy()], static fn ($r) => [$r->revision(), $r->policy()]);
    $lookups = min($lookupsPerSnapshot, $lookupsLeft);
    $lookupsLeft -= $lookups;
    for ($l = 0; $l < $lookups; $l++) {
        $country = $gen->country($snapshot);
        $sticky = $gen->stickyKey($country);
        $call = $sticky === null
            ? static fn ($r) => $r->resolve($country)
            : static fn ($r) => $r->resolve($country, $sticky);
        $compare("resolve(" . show($country, 40) . ($sticky === null ? '' : ', ' . show($sticky, 40)) . ')', $call, $call, $country);
        if ($l % 4 === 0) {
            // explain() on every fourth lookup: the same chain, step by step.
            $explain = static fn ($r) => comparableExplanation($r->explain($country, $sticky), $country, $sticky);
            $compare("explain(" . show($country, 40) . ($sticky === null ? '' : ', ' . show($sticky, 40)) . ')', $explain, $explain, $country);
            // cacheTags() after that resolve(): the tags of the same answer, same bytes.
            $tags = static fn ($r) => [$r->resolve($country, $sticky), $r->cacheTags($country, $sticky)];
            $compare("cacheTags(" . show($country, 40) . ')', $tags, $tags, $country);
        }
    }

    if ($dwctl !== null && !$twinVsTwin && $s < 150 && is_object($native) && !isset($snapshot['notes']['(file)'])) {
        // dwctl route reads the same file with dw-routing: the same explanation, except
        // that a fail-open answer has no route (etcd does not know the ini) and a source.
        for ($g = 0; $g < 3; $g++) {
            $geo = $gen->country($snapshot);
            $sticky = $gen->stickyKey($geo);
            if (!is_utf8($geo . ($sticky ?? '')) || str_contains($geo . ($sticky ?? ''), "\0")
                || str_starts_with($geo, '-') || ($sticky !== null && str_starts_with($sticky, '-'))) {
                continue; // not an argument a shell passes as such
            }
            $argv = [$dwctl, '--output', 'json', 'route', '--snapshot', $path, '--', $geo];
            if ($sticky !== null) {
                array_splice($argv, 4, 0, ['--sticky', $sticky]);
            }
            $proc = proc_open($argv, [1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
            $out = stream_get_contents($pipes[1]);
            $err = stream_get_contents($pipes[2]);
            $status = proc_close($proc);
            $fromDwctl = json_decode((string) $out, true);
            $fromExtension = $native->explain($geo, $sticky);
            if (is_array($fromDwctl)) {
                unset($fromDwctl['source']);
                if ($fromDwctl['fail_open'] === true) {
                    $fromDwctl['shard'] = $fromExtension['shard'];
                    $fromDwctl['origin'] = $fromExtension['origin'];
                }
            }
            $dwctlCompared++;
            if ($status === 0 && $fromDwctl === $fromExtension) {
                $passed++;
            } else {
                $failed++;
                $mismatches[] = ['dwctl route ' . show($geo, 40), $status === 0 ? $fromDwctl : "exit $status: $err", $fromExtension, null];
            }
        }
    }

    if ($mismatches === []) {
        continue;
    }
    foreach ($mismatches as $i => [$what, $a, $b, $country]) {
        $why = $country !== null && $twin instanceof Twin ? explain($twin, $country) : [[], null];
        $mismatches[$i][] = $why[0];
        $category = classify($what, $a, $b, $why[1]);
        $categories[$category] = ($categories[$category] ?? 0) + 1;
    }
    if ($keepDir !== null) {
        copy($path, sprintf('%s/seed-%d-snapshot-%06d.json', $keepDir, $seed, $s));
    }
    if ($shown++ >= $show) {
        continue;
    }
    echo "\nMISMATCH in snapshot $s (seed $seed): " . count($mismatches) . " of " . ($lookups + 1) . " comparisons differ\n";
    foreach (array_slice($mismatches, 0, 3) as [$what, $a, $b, , $why]) {
        echo "  $what\n";
        echo '    ' . ($twinVsTwin ? 'twin+apcu: ' : 'extension: ') . show($a) . "\n";
        echo '    twin:      ' . show($b) . "\n";
        foreach ($why as $line) {
            echo "      $line\n";
        }
    }
    echo "  snapshot notes: " . show($snapshot['notes']) . "\n";
    echo '  snapshot file (' . strlen($snapshot['text']) . " bytes):\n    "
        . (strlen($snapshot['text']) > 8192 ? substr($snapshot['text'], 0, 8192) . '...' : $snapshot['text']) . "\n";
}

$seconds = microtime(true) - $started;
printf("\n(%.1f s; snapshots: %d, %d mentioning rendezvous, %d broken files, %d edge files;"
    . " agreed answers: %d from a region, %d fail-open)\n", $seconds, $snapshots, $kinds['rendezvous policy'],
    $kinds['broken file'], $kinds['edge file'], $answers['region'], $answers['fail-open']);
if ($categories !== []) {
    arsort($categories);
    echo "mismatches by kind:\n";
    foreach ($categories as $category => $count) {
        printf("  %7d  %s\n", $count, $category);
    }
}
if ($dwctl !== null) {
    echo "dwctl route compared with explain() $dwctlCompared times\n";
}
echo "$label: $passed passed, $failed failed\n";
exit($failed === 0 ? 0 : 1);
