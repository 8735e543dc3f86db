<?php

declare(strict_types=1);

/*
 * Turns the raw results of bench/10-router.sh into its BENCHMARKS.md section.
 *
 *   php bench/router/report.php RAW_DIR [QUICK]
 */

namespace DwBench;

require __DIR__ . '/lib.php';

[, $raw, $quick] = $argv + [null, null, '0'];
if ($raw === null) {
    fail('usage: report.php RAW_DIR [QUICK]');
}
const SIZES = [10, 250, 2500];

function read_json(string $path): array
{
    $text = @file_get_contents($path);
    if ($text === false) {
        fail("missing $path");
    }

    return json_decode($text, true, 512, JSON_THROW_ON_ERROR);
}

function ns(float $v): string
{
    return match (true) {
        is_nan($v) => 'n/a',
        $v >= 100_000 => number_format($v / 1000, 0) . ' µs',
        $v >= 10_000 => number_format($v / 1000, 1) . ' µs',
        $v >= 100 => number_format($v, 0) . ' ns',
        default => number_format($v, 1) . ' ns',
    };
}

function ratio(float $a, float $b): string
{
    if ($b <= 0 || is_nan($a) || is_nan($b)) {
        return 'n/a';
    }
    $r = $a / $b;

    return ($r >= 100 ? number_format($r, 0) : ($r >= 10 ? number_format($r, 1) : number_format($r, 2))) . '×';
}

function verdict(bool $met): string
{
    return $met ? '**met**' : '**not met**';
}

function instr(float $v): string
{
    return $v >= 10_000 ? number_format($v, 0) : number_format($v, 1);
}

// ---- load ------------------------------------------------------------------------------

$wall = [];
$cg = [];
foreach (SIZES as $n) {
    $wall[$n] = read_json("$raw/wall-$n.json");
    $plan = read_json("$raw/cg-$n.plan.json");
    $order = read_json("$raw/cg-$n.order.json");
    // Part 1 is the setup; part k+1 the k-th loop (see resolve.php).
    $cg[$n] = [];
    foreach ($order as $k => $variant) {
        $file = sprintf('%s/cg-%d.out.%d', $raw, $n, $k + 2);
        $text = @file_get_contents($file);
        if ($text === false || preg_match('/^totals: (\d+)/m', $text, $m) !== 1) {
            fail("no callgrind totals in $file");
        }
        $cg[$n][$variant] = ['iterations' => $plan[$variant], 'instructions' => (int) $m[1],
            'per_iteration' => (int) $m[1] / $plan[$variant]];
    }
}
$jit = is_file("$raw/wall-jit-250.json") ? read_json("$raw/wall-jit-250.json") : null;

/** The `totals:` of one callgrind dump file. */
function callgrind_total(string $file): int
{
    $text = @file_get_contents($file);
    if ($text === false || preg_match('/^totals: (\d+)/m', $text, $m) !== 1) {
        fail("no callgrind totals in $file");
    }

    return (int) $m[1];
}

// Inside the handlers: part 2 is the resolve loop, part 3 the per-request loop.
$handlerPlan = read_json("$raw/cg-handlers.plan.json");
$handlerOrder = read_json("$raw/cg-handlers.order.json");
if ($handlerOrder !== ['ext', 'ext_request']) {
    fail('unexpected cg-handlers order');
}
$inResolve = callgrind_total("$raw/cg-handlers.out.2") / $handlerPlan['ext'];
$inConstruct = callgrind_total("$raw/cg-handlers.out.3") / $handlerPlan['ext_request'] - $inResolve;

$loads = [];
foreach (file("$raw/load.jsonl", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
    $row = json_decode($line, true, 512, JSON_THROW_ON_ERROR);
    $loads[$row['size']]['ext'][] = $row['ext_ns'];
    $loads[$row['size']]['twin'][] = $row['twin_ns'];
}
foreach (SIZES as $n) {
    if (!isset($loads[$n])) {
        fail("no cold loads for $n regions");
    }
    $loads[$n]['core'] = read_json("$raw/parse-$n.json");
    foreach (['cold_start', 'reload'] as $part) {
        $loads[$n]["{$part}_ir"] = callgrind_total("$raw/cg-parse-$part-$n.out");
    }
}

$med = static fn (int $n, string $v): float => (float) $wall[$n]['median'][$v];
$net = static fn (int $n, string $v): float => $med($n, $v) - $med($n, 'empty');
$ir = static fn (int $n, string $v): float => $cg[$n][$v]['per_iteration'];
$irNet = static fn (int $n, string $v): float => $ir($n, $v) - $ir($n, 'empty');

$out = [];
$p = static function (string ...$lines) use (&$out): void {
    foreach ($lines as $line) {
        $out[] = $line;
    }
};

$rounds = count($wall[250]['ns_per_iteration']['ext']);
$p('## RegionRouter extension vs userland (`bench/10-router.sh`)', '');
if ($quick === '1') {
    $p('> **Quick run** (`DW_BENCH_QUICK=1`): fewer rounds and reloads; not the numbers to quote.', '');
}
$p(
    'Every PHP process runs with `opcache.enable_cli=1 opcache.jit=off` (Debian\'s default: JIT off), '
    . '`opcache.validate_timestamps=1 opcache.revalidate_freq=0` (config must reload, so the compiled file is '
    . 're-checked on every include), `opcache.file_update_protection=0` (the fixture files are fresh) and '
    . '`apc.enable_cli=1`. Snapshots are `examples/generate.php --regions N` on tmpfs; the legacy pick. '
    . 'Before timing, the runner checks that the extension, the twin (both shapes) and the compiled file give '
    . 'identical routes for the country mix, that the per-request twin really answered from APCu and that '
    . 'opcache holds the compiled file.',
    '',
    'Country mix (16, cycled as `$countries[$i & 15]`): 12 present in the table, spread over it, and 4 absent '
    . '(`XX`, `T1`, `ZZ`, `EU`), which go down the `default`/`failover` chain; at 10 regions `US` and `GB` are '
    . 'absent too, so those end in the fail-open route. At 250 regions: `' . implode(' ', $wall[250]['countries']) . '`.',
    '',
);

// ---- section 1 -------------------------------------------------------------------------

$p('### 1. `resolve()` per call', '');
$p(
    '**How measured.** One PHP process per table size runs every variant in the same process, each as its own '
    . 'function with its own `for` loop; iterations are calibrated to about ' . ($quick === '1' ? 50 : 250)
    . ' ms per measurement (capped at 2,000,000), the variants are interleaved in ' . $rounds . ' rounds (order '
    . 'rotated each round) and the median per variant is reported. *Per call* is the loop time minus the '
    . '`empty` loop (the same loop reading the country, with no call). The machine is a shared 2-core box where '
    . 'other builds run, so wall-clock ratios of cheap calls move by tens of percent between runs; the stable '
    . 'measure is the instruction count: the same runner under `valgrind --tool=callgrind --dump-before=usleep`, '
    . 'with `usleep(0)` between loops so that each loop is its own dump part: instructions per iteration = '
    . 'part total / iterations (the same as (total with N iterations − total with 0) / N, without a second run), and '
    . '*per call* subtracts the `empty` loop\'s count. Callgrind counts user-space instructions only: the '
    . '`stat()` that the compiled-file include (opcache revalidation) and the twin\'s constructor make per '
    . 'request costs wall-clock time, not instructions.',
    '',
);

$rows = [
    'floor' => 'floor: `floor_route($c)`, a userland function returning a 2-element literal',
    'floor_method' => 'userland method: `$floorRouter->resolve($c)`, a final class\'s method returning the same literal, object built once',
    'ext' => 'extension: `$router->resolve($c)`, router built once',
    'compiled' => 'compiled file: `$t = include FILE; compiled_resolve($t, $c)` per request',
    'twin' => 'twin + APCu, built once: `$twin->resolve($c)`',
    'twin_construct' => 'twin constructed per iteration, per-process cache warm (no APCu fetch)',
    'twin_request' => 'twin per request: statics reset (as at request end), `new` + `resolve` (APCu fetch)',
];
$p('Wall clock, median per call (net of the empty loop):', '');
$p('| variant | 10 regions | 250 regions | 2,500 regions |', '|---|---:|---:|---:|');
$p('| empty loop (subtracted below) | ' . implode(' | ', array_map(fn ($n) => ns($med($n, 'empty')), SIZES)) . ' |');
foreach ($rows as $v => $label) {
    $p("| $label | " . implode(' | ', array_map(fn ($n) => ns($net($n, $v)), SIZES)) . ' |');
}
$p('');
$p('Instructions per call (callgrind; per iteration minus the empty loop\'s ' . implode(' / ', array_map(fn ($n) => instr($ir($n, 'empty')), SIZES)) . '):', '');
$p('| variant | 10 regions | 250 regions | 2,500 regions |', '|---|---:|---:|---:|');
foreach ($rows as $v => $label) {
    $p("| $label | " . implode(' | ', array_map(fn ($n) => instr($irNet($n, $v)), SIZES)) . ' |');
}
$p('');

$p('**Target: extension at most 1.0× the floor at every size.**', '');
$p('| ratio extension / floor | 10 regions | 250 regions | 2,500 regions | target ≤ 1.0× |', '|---|---:|---:|---:|---|');
$lines = [
    'instructions per call' => [fn ($n) => $irNet($n, 'ext'), fn ($n) => $irNet($n, 'floor')],
    'instructions per iteration (loop included)' => [fn ($n) => $ir($n, 'ext'), fn ($n) => $ir($n, 'floor')],
    'wall clock per call' => [fn ($n) => $net($n, 'ext'), fn ($n) => $net($n, 'floor')],
    'wall clock per iteration (loop included)' => [fn ($n) => $med($n, 'ext'), fn ($n) => $med($n, 'floor')],
];
foreach ($lines as $label => [$a, $b]) {
    $met = true;
    foreach (SIZES as $n) {
        $met = $met && $a($n) <= $b($n);
    }
    $p("| $label | " . implode(' | ', array_map(fn ($n) => ratio($a($n), $b($n)), SIZES)) . ' | ' . verdict($met) . ' |');
}
$p('');

$p(sprintf(
    'Where the extension\'s %s instructions per call go (250 regions; a callgrind run that counts only inside '
    . 'the extension\'s handlers): %s inside the `resolve()` handler (argument and object checks, the freshness '
    . 'check, then the table\'s memo of the answer for a country code, or the lookup and the legacy pick with '
    . 'its CRC-32), the other %s in the engine\'s method call (`INIT_METHOD_CALL`, reading `$c[...]` as a '
    . 'possible by-reference argument since a method is not known at compile time, `SEND`, `DO_FCALL`, '
    . 'releasing the frame). The floor function\'s whole call is %s: a function known at compile time reads '
    . 'its argument plainly and returns an immutable literal. Any method pays more: the userland method '
    . 'returning the same literal costs %s, %s the floor.',
    instr($irNet(250, 'ext')),
    instr($inResolve),
    instr($irNet(250, 'ext') - $inResolve),
    instr($irNet(250, 'floor')),
    instr($irNet(250, 'floor_method')),
    ratio($irNet(250, 'floor_method'), $irNet(250, 'floor')),
), '');

$p('For reference (no target): the extension against the userland method floor, the cheapest a method call gets.', '');
$p('| ratio extension / userland method | 10 regions | 250 regions | 2,500 regions |', '|---|---:|---:|---:|');
$p('| instructions per call | ' . implode(' | ', array_map(fn ($n) => ratio($irNet($n, 'ext'), $irNet($n, 'floor_method')), SIZES)) . ' |');
$p('| wall clock per call | ' . implode(' | ', array_map(fn ($n) => ratio($net($n, 'ext'), $net($n, 'floor_method')), SIZES)) . ' |');
$p('');

$p('**Target: extension at least 100× faster than the twin at 250 regions.**', '');
$p('| comparison at 250 regions | instructions | wall clock | target ≥ 100× |', '|---|---:|---:|---|');
$twinLines = [
    'twin built once / extension router built once' => ['twin', 'ext'],
    'twin per request (APCu) / extension per request' => ['twin_request', 'ext_request'],
    'twin per request (APCu) / extension `resolve()`' => ['twin_request', 'ext'],
    'compiled file per request / extension per request (for reference)' => ['compiled', 'ext_request'],
];
foreach ($twinLines as $label => [$slow, $fast]) {
    $rI = $irNet(250, $slow) / max($irNet(250, $fast), 1e-9);
    $rW = $net(250, $slow) / max($net(250, $fast), 1e-9);
    $target = str_contains($label, 'reference') ? '—' : 'instructions ' . verdict($rI >= 100) . ', wall ' . verdict($rW >= 100);
    $p("| $label | " . ratio($irNet(250, $slow), $irNet(250, $fast)) . ' | ' . ratio($net(250, $slow), $net(250, $fast)) . " | $target |");
}
$p('');

// ---- section 2 -------------------------------------------------------------------------

$p('### 2. `new RegionRouter()` + `resolve()` per request', '');
$p(
    '**How measured.** Same runs as section 1: `(new RegionRouter())->resolve($c)` per iteration (the '
    . 'snapshot path from ini `dw_router.snapshot_path`, as a production node sets it), against the floor '
    . 'function and against a per-request userland floor `(new FloorRouter())->resolve($c)` with a trivial '
    . 'final class whose method returns the literal.',
    '',
);
$p('| per call (net of the empty loop) | 10 regions | 250 regions | 2,500 regions |', '|---|---:|---:|---:|');
foreach (['ext_request' => 'extension `(new RegionRouter())->resolve($c)`', 'floor_request' => 'userland `(new FloorRouter())->resolve($c)`', 'floor' => 'floor function'] as $v => $label) {
    $p("| $label, wall | " . implode(' | ', array_map(fn ($n) => ns($net($n, $v)), SIZES)) . ' |');
    $p("| $label, instructions | " . implode(' | ', array_map(fn ($n) => instr($irNet($n, $v)), SIZES)) . ' |');
}
$p('');
$p('| ratio | 10 regions | 250 regions | 2,500 regions | target ≤ 1.5× the floor |', '|---|---:|---:|---:|---|');
$reqLines = [
    'extension per request / floor, instructions' => [fn ($n) => $irNet($n, 'ext_request'), fn ($n) => $irNet($n, 'floor'), true],
    'extension per request / floor, wall clock' => [fn ($n) => $net($n, 'ext_request'), fn ($n) => $net($n, 'floor'), true],
    'extension per request / per-request floor, instructions' => [fn ($n) => $irNet($n, 'ext_request'), fn ($n) => $irNet($n, 'floor_request'), true],
    'extension per request / per-request floor, wall clock' => [fn ($n) => $net($n, 'ext_request'), fn ($n) => $net($n, 'floor_request'), true],
];
foreach ($reqLines as $label => [$a, $b]) {
    $met = true;
    foreach (SIZES as $n) {
        $met = $met && $a($n) <= 1.5 * $b($n);
    }
    $p("| $label | " . implode(' | ', array_map(fn ($n) => ratio($a($n), $b($n)), SIZES)) . ' | ' . verdict($met) . ' |');
}
$p('');

$p(sprintf(
    'Of the extension\'s %s instructions per request (250 regions), %s are inside the extension\'s object '
    . 'handlers (`create_object`, `get_constructor`, `free_obj`, with the engine functions they call to '
    . 'allocate, initialise and free the object) and %s inside the `resolve()` handler; the other %s are the '
    . 'engine running `new` and the method call. A bare `new RegionRouter()` runs no constructor call: '
    . '`get_constructor` marks the object as a default router and answers that there is none, so `ZEND_NEW` '
    . 'skips the call, as for a class without a constructor. The userland `FloorRouter` request is %s in all.',
    instr($irNet(250, 'ext_request')),
    instr($inConstruct),
    instr($inResolve),
    instr($irNet(250, 'ext_request') - $inConstruct - $inResolve),
    instr($irNet(250, 'floor_request')),
), '');

// What each engine shortcut buys: parts 2-4 are the empty, resolve and per-request loops.
$ablationPlan = read_json("$raw/cg-ablation.plan.json");
$ablation = [];
foreach (['all', 'bare_new', 'lean_objects', 'frame_arguments', 'immutable_routes', 'route_memo', 'none'] as $off) {
    if (read_json("$raw/cg-ablation-$off.order.json") !== ['empty', 'ext', 'ext_request']) {
        fail("unexpected cg-ablation-$off order");
    }
    $empty = callgrind_total("$raw/cg-ablation-$off.out.2") / $ablationPlan['empty'];
    $ablation[$off] = [
        'call' => callgrind_total("$raw/cg-ablation-$off.out.3") / $ablationPlan['ext'] - $empty,
        'request' => callgrind_total("$raw/cg-ablation-$off.out.4") / $ablationPlan['ext_request'] - $empty,
    ];
}
$p(
    'What each engine shortcut buys (`src/engine.rs`; callgrind instructions, 250 regions, net of the empty '
    . 'loop), measured by turning it off alone with `dw_router.engine_shortcuts`:',
    '',
    '| shortcuts | `resolve()` per call | per request | per request, cost of turning it off |',
    '|---|---:|---:|---:|',
);
$names = [
    'all' => 'all on',
    'bare_new' => 'without `bare_new` (the constructor call is skipped by reading the caller\'s opline)',
    'lean_objects' => 'without `lean_objects` (lean `create_object` and `free_obj`)',
    'frame_arguments' => 'without `frame_arguments` (raw handlers read their arguments from the frame)',
    'immutable_routes' => 'without `immutable_routes` (route arrays immutable, as opcache literals)',
    'route_memo' => 'without `route_memo` (the route array memoised per country and region)',
    'none' => 'none (the ordinary paths, as on an untested PHP version)',
];
foreach ($ablation as $off => $row) {
    $cost = $off === 'all' ? '' : '+' . instr($row['request'] - $ablation['all']['request']);
    $p(sprintf('| %s | %s | %s | %s |', $names[$off], instr($row['call']), instr($row['request']), $cost));
}
$p('');

if ($jit !== null) {
    $jm = static fn (string $v): float => (float) $jit['median'][$v] - (float) $jit['median']['empty'];
    $p(
        'For reference, with `opcache.jit=tracing` (250 regions, wall clock, net of the empty loop '
        . ns((float) $jit['median']['empty']) . '): floor ' . ns($jm('floor')) . ', extension `resolve()` '
        . ns($jm('ext')) . ' (' . ratio($jm('ext'), $jm('floor')) . ' the floor), per-request floor '
        . ns($jm('floor_request')) . ', extension per request ' . ns($jm('ext_request')) . ' ('
        . ratio($jm('ext_request'), $jm('floor')) . ' the floor, ' . ratio($jm('ext_request'), $jm('floor_request'))
        . ' the per-request floor). The JIT speeds up the userland floors; the extension\'s call stays an internal call.',
        '',
    );
}

// ---- section 3 -------------------------------------------------------------------------

$p('### 3. Reload latency', '');
$p(
    '**How measured.** A reader PHP process with the extension builds one router and then loops on '
    . '`$router->resolve(\'DE\')` + `$router->revision()` (never `reload()`), recording `hrtime(true)` the first '
    . 'time it sees each revision. A writer process publishes snapshots as dw-agent does (temp file in the same '
    . 'directory, write, `fsync`, `rename` over the name), one every 20 ms on an absolute schedule, each with '
    . 'the next revision, recording `hrtime(true)` just before each `rename`. Both clocks are CLOCK_MONOTONIC, '
    . 'so they compare across processes. Latency of a write = the first time the reader saw that revision or a '
    . 'later one, minus the write time (so a write overtaken by the next one before the reader noticed still '
    . 'counts, with the later pickup). The reader busy-loops, so on this 2-core box it competes for a core '
    . 'with the watcher thread, the writer and other work. Poll mode is forced by building the router while '
    . 'the snapshot\'s directory does not exist yet (inotify cannot watch it, so the extension falls back to a '
    . 'stat every `dw_router.poll_interval_ms`, default 250 ms; the writer then creates the directory).',
    '',
);
$p('| run | regions | mechanism | renames | revisions seen | p50 | p99 | max | load average after | target p99 ≤ 5 ms |', '|---|---:|---|---:|---:|---:|---:|---:|---:|---|');
$reloadRaw = [];
foreach (['inotify-250', 'inotify-2500', 'poll-250'] as $label) {
    $meta = read_json("$raw/reload-$label.meta.json");
    $reader = read_json("$raw/reload-$label.reader.json");
    $writer = read_json("$raw/reload-$label.writer.json");
    $seen = [];
    foreach ($reader['seen'] as $revision => $t) {
        $seen[(int) $revision] = (int) $t;
    }
    ksort($seen);
    $latencies = [];
    $missed = 0;
    foreach ($writer['written'] as $revision => $t) {
        $first = null;
        foreach ($seen as $r => $ts) {
            if ($r >= (int) $revision && ($first === null || $ts < $first)) {
                $first = $ts;
            }
        }
        if ($first === null) {
            $missed++;
            continue;
        }
        $latencies[] = ($first - (int) $t) / 1e6;
    }
    $exact = count(array_intersect_key($seen, $writer['written']));
    $p50 = percentile($latencies, 50);
    $p99 = percentile($latencies, 99);
    $max = $latencies === [] ? NAN : max($latencies);
    $ms = static fn (float $v): string => is_nan($v) ? 'n/a' : number_format($v, 2) . ' ms';
    $target = $meta['requested'] === 'inotify' ? verdict($missed === 0 && $p99 <= 5.0) : '— (poll: bounded by the interval)';
    $mechanism = $reader['mechanism']
        . ($reader['final_mechanism'] !== $reader['mechanism'] ? ' → ' . $reader['final_mechanism'] : '')
        . ($reader['mechanism'] !== $meta['requested'] ? ' (wanted ' . $meta['requested'] . ')' : '');
    $p(sprintf('| %s | %s | %s | %d | %d%s | %s | %s | %s | %s | %s |', $label, number_format($meta['size']), $mechanism,
        count($writer['written']), $exact, $missed ? " ($missed never seen)" : '', $ms($p50), $ms($p99), $ms($max),
        $meta['loadavg'] ?? '?', $target));
    sort($latencies);
    $reloadRaw[$label] = $latencies;
}
$p('');

$p(
    'What a reload costs: the first router of a fresh process reads and parses the snapshot when it is first '
    . 'used (`new` then `revision()`; median of 5 processes; the extension\'s time includes setting up its '
    . 'inotify watch). The watcher thread parses '
    . 'again on every rename, reusing what did not change: the core columns are dw-routing alone '
    . '(`crates/routing/benches/parse.rs`: `Table::parse_after` an empty table, the first read, and after '
    . 'the previous table with one region changed, the reload), wall clock as the median of 51 calls and '
    . 'callgrind instructions of one call; a reload is timed both back to back (warm caches) and after '
    . 'writing 64 MiB of other memory (cold caches, as in a worker, where reloads come between requests). The twin only decodes the outer document here; it decodes a '
    . 'region\'s value when a request first looks it up.',
    '',
);
$p('| regions | snapshot bytes | extension: cold `new RegionRouter()` + `revision()` | core: first read | core: reload, one region changed (warm / cold caches) | twin: cold construction + `revision()` (json_decode, APCu store) |', '|---:|---:|---:|---:|---:|---:|');
foreach (SIZES as $n) {
    $core = $loads[$n]['core'];
    $p(sprintf('| %s | %s | %s | %s ms, %s instructions | %s ms / %s ms, %s instructions | %s |', number_format($n),
        number_format((int) ($wall[$n]['snapshot_bytes'] ?? 0)),
        number_format(median($loads[$n]['ext']) / 1e6, 2) . ' ms',
        number_format($core['cold_ns'] / 1e6, 3), number_format($loads[$n]['cold_start_ir']),
        number_format($core['reload_ns'] / 1e6, 3), number_format($core['reload_cold_cache_ns'] / 1e6, 3),
        number_format($loads[$n]['reload_ir']),
        number_format(median($loads[$n]['twin']) / 1e6, 2) . ' ms'));
}
$p('');

// ---- section 4 -------------------------------------------------------------------------

$mem = [];
foreach (['baseline-noext', 'baseline-ext', 'ext', 'twin', 'compiled'] as $label) {
    $mem[$label] = read_json("$raw/memory-$label.json");
}
$kib = static fn (int $k): string => number_format($k) . ' KiB';
$bytes = static fn (int $b): string => abs($b) >= 1 << 20 ? number_format($b / (1 << 20), 2) . ' MiB'
    : (abs($b) >= 1024 ? number_format($b / 1024, 1) . ' KiB' : $b . ' B');
$d = static fn (array $m, string $k): int => $m['after']['status'][$k] - $m['before']['status'][$k];

$p('### 4. Memory per worker process, 2,500 regions', '');
$p(
    '**How measured.** One PHP process per line (same ini as above). Each reads `/proc/self/status` '
    . '(VmRSS, and RssAnon: the private anonymous part, what a worker really adds) and `memory_get_usage()` '
    . 'before and after its work: the extension builds `new RegionRouter()` and resolves every one of the '
    . '2,500 regions plus the country mix (so every route array a worker can return is built); the twin '
    . 'does its first construction (parse, APCu store) and the same resolves, then one request as a worker '
    . 'runs it (statics reset, table fetched from APCu); the compiled file is included and resolved the same '
    . 'way. The extension keeps its table outside the Zend heap, so `memory_get_usage()` does not see it: '
    . 'RSS does. RSS after a parse includes heap the allocator kept after freeing the parse\'s temporaries; '
    . 'RSS deltas miss memory the process had already touched before (the Zend heap already holds '
    . number_format($mem['twin']['before']['heap_real'] / (1 << 20), 0) . ' MiB of chunks at the start), so '
    . 'for userland code `memory_get_usage()` is the better measure. The twin\'s rows are in one process, in order.',
    '',
);
$p('| process | VmRSS before → after | Δ VmRSS | Δ RssAnon | Δ memory_get_usage() |', '|---|---:|---:|---:|---:|');
$twinFirst = $mem['twin'];
$twinFirst['after'] = $twinFirst['after_first_construction'];
$memRows = [
    'extension: router built, every region resolved' => $mem['ext'],
    'twin + APCu: first construction (parse, APCu store), every region resolved' => $twinFirst,
    'twin + APCu: then one request (statics reset, table from APCu, the mix resolved), measured inside it' => $mem['twin'],
    'compiled file: included, every region resolved' => $mem['compiled'],
];
foreach ($memRows as $title => $m) {
    $p(sprintf('| %s | %s → %s | %s | %s | %s |', $title, $kib($m['before']['status']['VmRSS']), $kib($m['after']['status']['VmRSS']),
        $kib($d($m, 'VmRSS')), $kib($d($m, 'RssAnon')), $bytes($m['after']['heap'] - $m['before']['heap'])));
}
$noext = $mem['baseline-noext']['after']['status'];
$withext = $mem['baseline-ext']['after']['status'];
$p('');
$p(
    sprintf(
        'Loading the extension without building a router: VmRSS %s vs %s without it (%s; RssAnon %s), '
        . 'separate processes, so this includes the mapped `.so` pages.',
        $kib($withext['VmRSS']),
        $kib($noext['VmRSS']),
        ($withext['VmRSS'] - $noext['VmRSS'] >= 0 ? '+' : '') . $kib($withext['VmRSS'] - $noext['VmRSS']),
        ($withext['RssAnon'] - $noext['RssAnon'] >= 0 ? '+' : '') . $kib($withext['RssAnon'] - $noext['RssAnon']),
    ),
    '',
);
$tw = $mem['twin'];
$p(sprintf(
    'The twin, for comparison: APCu shared memory in use %s (`apcu_cache_info()` mem_size %s: the table stored '
    . 'once per pool, plus the last-good copy); per request, fetching it from APCu and resolving the mix puts '
    . '%s on the request heap (APCu hits in that request: %d), paid again by every request of every worker. '
    . 'The compiled file takes %s of opcache shared memory and %s of request heap to include.',
    $bytes($tw['apcu_shm_used_bytes']),
    $bytes($tw['apcu_cache_mem_size']),
    $bytes($tw['request_heap_bytes']),
    $tw['request_apcu_hits'],
    $bytes((int) $mem['compiled']['opcache_script_bytes']),
    $bytes($mem['compiled']['after']['heap'] - $mem['compiled']['before']['heap']),
), '');
$p(sprintf('The extension\'s router reported %d regions, reload mechanism `%s`.', $mem['ext']['regions'], $mem['ext']['mechanism']), '');

// ---- raw -------------------------------------------------------------------------------

$p('### Raw numbers', '');
$p('Wall clock, ns per iteration (loop included) for each round, and iterations per round:', '');
$p('| size | variant | iterations | rounds (ns/iteration) | median |', '|---:|---|---:|---|---:|');
foreach (SIZES as $n) {
    foreach ($wall[$n]['ns_per_iteration'] as $v => $samples) {
        $p(sprintf('| %d | %s | %s | %s | %s |', $n, $v, number_format($wall[$n]['iterations'][$v]),
            implode(', ', array_map(fn ($s) => number_format($s, 1), $samples)), number_format($wall[$n]['median'][$v], 1)));
    }
}
if ($jit !== null) {
    foreach ($jit['ns_per_iteration'] as $v => $samples) {
        $p(sprintf('| 250, JIT tracing | %s | %s | %s | %s |', $v, number_format($jit['iterations'][$v]),
            implode(', ', array_map(fn ($s) => number_format($s, 1), $samples)), number_format($jit['median'][$v], 1)));
    }
}
$p('');
$p('Callgrind: instructions of each loop (its dump part) and iterations:', '');
$p('| size | variant | iterations | instructions | per iteration |', '|---:|---|---:|---:|---:|');
foreach (SIZES as $n) {
    foreach ($cg[$n] as $v => $c) {
        $p(sprintf('| %d | %s | %s | %s | %s |', $n, $v, number_format($c['iterations']), number_format($c['instructions']), instr($c['per_iteration'])));
    }
}
$p('');
$p('Reload latencies, ms, sorted (every 10th, then the largest 3):', '');
foreach ($reloadRaw as $label => $latencies) {
    $picked = [];
    foreach ($latencies as $k => $v) {
        if ($k % 10 === 0) {
            $picked[] = number_format($v, 2);
        }
    }
    $p("- $label: " . implode(' ', $picked) . ' … ' . implode(' ', array_map(fn ($v) => number_format($v, 2), array_slice($latencies, -3))));
}
$p('');
$p('Memory, /proc/self/status before → after (KiB):', '');
foreach ($mem as $label => $m) {
    $pairs = [];
    foreach ($m['after']['status'] as $k => $v) {
        $pairs[] = "$k " . number_format($m['before']['status'][$k]) . ' → ' . number_format($v);
    }
    $p("- $label: " . implode(', ', $pairs) . '; memory_get_usage ' . number_format($m['before']['heap']) . ' → ' . number_format($m['after']['heap']));
}
$p('', 'Cold loads, ms (extension; twin): ' . implode('; ', array_map(
    fn ($n) => number_format($n) . ' regions: ' . implode(' ', array_map(fn ($v) => number_format($v / 1e6, 2), $loads[$n]['ext']))
        . ' ; ' . implode(' ', array_map(fn ($v) => number_format($v / 1e6, 2), $loads[$n]['twin'])),
    SIZES,
)) . '.');
$p('', 'Raw results of this run (JSON, callgrind dumps): `' . str_replace(getcwd() . '/', '', (string) realpath($raw)) . '/`, not committed.');

echo implode("\n", $out), "\n";
