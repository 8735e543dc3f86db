<?php

declare(strict_types=1);

/*
 * The Markdown section of bench/11-geo.sh from its raw results:
 *   php bench/router/geo-report.php RAW_DIR QUICK
 */

[, $raw, $quick] = $argv + [null, null, '0'];

function totals(string $file): int
{
    $text = @file_get_contents($file);
    if ($text === false || preg_match('/^totals: (\d+)/m', $text, $m) !== 1) {
        fwrite(STDERR, "geo-report: no callgrind totals in $file\n");
        exit(1);
    }

    return (int) $m[1];
}

/** @return array<string, array{ns: float, ir: float, answered_by: ?string}> net of the empty loop */
function measured(string $raw, string $label): ?array
{
    if (!is_file("$raw/wall-$label.json")) {
        return null;
    }
    $wall = json_decode((string) file_get_contents("$raw/wall-$label.json"), true);
    $order = json_decode((string) file_get_contents("$raw/cg-$label.order.json"), true);
    $ir = [];
    foreach ($order['order'] as $k => $spec) {
        $ir[$spec] = totals(sprintf('%s/cg-%s.out.%d', $raw, $label, $k + 2)) / $order['iterations'];
    }
    $out = [];
    foreach ($wall['median_ns'] as $spec => $ns) {
        if ($spec !== 'empty') {
            $out[$spec] = ['ns' => $ns - $wall['median_ns']['empty'], 'ir' => $ir[$spec] - $ir['empty'],
                'answered_by' => $wall['answered_by'][$spec] ?? null];
        }
    }

    return $out;
}

$chain = measured($raw, 'chain');
$plain = measured($raw, 'plain');
$before = measured($raw, 'before');
$staged = measured($raw, 'staged');
$hit = $chain['DE'];
$labels = [
    'DE' => 'country hit: `resolve(\'DE\')`, region/DE',
    'US-CA' => 'subdivision hit: `resolve(\'US-CA\')`, region/US-CA',
    'US-NY' => 'subdivision to its country, a country with subdivision keys: `resolve(\'US-NY\')`, region/US',
    'DE-BY' => 'subdivision to its country, a country without any: `resolve(\'DE-BY\')`, region/DE',
    'SI' => 'country to its bucket: `resolve(\'SI\')`, region/continent/EU',
    'DE:visitor-7' => 'country hit, sticky key (no memo: lookup and pick)',
    'SI:visitor-7' => 'country to its bucket, sticky key',
];
$row = static fn (string $what, array $m, array $base): string => sprintf(
    '| %s | %.1f ns | %.1f | %.2f× | %.2f× |',
    $what, $m['ns'], $m['ir'], $m['ns'] / max($base['ns'], 0.1), $m['ir'] / max($base['ir'], 0.1),
);

$md = [];
$md[] = '## The geography chain: `resolve()` at each step (`bench/11-geo.sh`)';
$md[] = '';
if ($quick === '1') {
    $md[] = '**Quick run (DW_BENCH_QUICK=1): numbers not to quote.**';
    $md[] = '';
}
$md[] = 'One PHP 8.4 process per snapshot (opcache on, JIT off), the router built once as by a worker, '
    . 'each variant its own loop calling `resolve()` with one fixed geo; wall clock: the median of '
    . 'interleaved rounds minus the empty loop; instructions: callgrind, one dump part per loop, minus '
    . 'the empty loop. Snapshots: `examples/generate.php --regions 250` (country keys only, today\'s '
    . 'shape) and the same plus `region/US-CA` and `region/continent/EU` (the chain\'s shape). Each '
    . 'variant\'s answering key is checked with `explain()` before it is timed. The machine is a shared '
    . '2-core box: wall-clock ratios of cheap calls move by tens of percent between runs; instructions '
    . 'are the stable measure.';
$md[] = '';
$md[] = '**Target: the hit unchanged within noise; each fallback within 1.3× of a hit.**';
$md[] = '';
$md[] = '| `resolve()`, snapshot with buckets | wall per call | instructions per call | wall / hit | instructions / hit |';
$md[] = '|---|---:|---:|---:|---:|';
foreach ($labels as $spec => $what) {
    $m = $chain[$spec];
    $md[] = $row($what . ($m['answered_by'] !== null ? " (answered by `{$m['answered_by']}`)" : ''), $m, $hit);
}
$md[] = '';
$md[] = '| today\'s figure: country hit on a snapshot without buckets | wall per call | instructions per call | wall / chain\'s hit | instructions / chain\'s hit |';
$md[] = '|---|---:|---:|---:|---:|';
$md[] = $row('this build, `resolve(\'DE\')`', $plain['DE'], $hit);
$md[] = $row('this build, `resolve(\'DE\', \'visitor-7\')`', $plain['DE:visitor-7'], $hit);
if ($staged !== null) {
    $md[] = $row('this build, a stage open on this node (region/DE staged, `stages` named), `resolve(\'DE\')`', $staged['DE'], $hit);
    $md[] = $row('this build, a stage open on this node, `resolve(\'DE\', \'visitor-7\')`', $staged['DE:visitor-7'], $hit);
}
if ($before !== null) {
    $md[] = $row('the build before the chain (main), `resolve(\'DE\')`', $before['DE'], $hit);
    $md[] = $row('the build before the chain (main), `resolve(\'DE\', \'visitor-7\')`', $before['DE:visitor-7'], $hit);
}
$fallbacks = array_map(fn ($s) => $chain[$s]['ir'] / $hit['ir'], ['US-CA', 'US-NY', 'DE-BY', 'SI']);
$met = max($fallbacks) <= 1.3;
$md[] = '';
$md[] = sprintf('Fallbacks against the hit, instructions: at most %.2f× (target ≤ 1.3×: **%s**).', max($fallbacks), $met ? 'met' : 'not met');
if ($staged !== null) {
    $md[] = sprintf('A stage open against none (staged rollouts, target: unchanged within noise), instructions: %.2f× (%+.1f per call).',
        $staged['DE']['ir'] / $plain['DE']['ir'], $staged['DE']['ir'] - $plain['DE']['ir']);
}
if ($before !== null) {
    $md[] = sprintf('The hit against the build before the chain, instructions: %.2f× (%+.1f per call).',
        $hit['ir'] / $before['DE']['ir'], $hit['ir'] - $before['DE']['ir']);
}
$md[] = '';
$md[] = 'Raw results: `target/bench/11-geo/`, not committed.';
echo implode("\n", $md), "\n";
