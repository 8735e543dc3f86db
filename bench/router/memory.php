<?php

declare(strict_types=1);

/*
 * Memory one worker process pays for the routing table, one mode per process.
 *
 *   php [ini...] bench/router/memory.php MODE SNAPSHOT COMPILED
 *
 * MODE:
 *   baseline   nothing constructed (run with and without the extension loaded)
 *   ext        new RegionRouter() (ini path), then every region and the country mix
 *              resolved once (every route array a worker can hand out is built)
 *   twin       the userland twin with APCu: first construction (parse, APCu store), every
 *              region resolved; then one "request" (statics reset, table fetched from APCu,
 *              the country mix resolved); "after" is taken inside that request
 *   compiled   the compiled routing file included, every region resolved
 *
 * Prints JSON: /proc/self/status (KiB) and memory_get_usage() before and after, and for
 * the twin APCu's shared-memory use, for the compiled file opcache's.
 */

namespace DwBench;

require __DIR__ . '/lib.php';

[, $mode, $snapshot, $compiled] = $argv + [null, null, null, null];
if ($mode === null || $snapshot === null || $compiled === null) {
    fail('usage: memory.php MODE SNAPSHOT COMPILED');
}
$geos = table_geos($compiled);
$countries = array_merge(array_map(static fn (string $g): string => str_repeat($g, 1), $geos), country_mix($geos));
gc_collect_cycles();

$before = ['status' => proc_status_kib(), 'heap' => memory_get_usage(), 'heap_real' => memory_get_usage(true)];
$extra = [];
$keep = null;
$after = null;
switch ($mode) {
    case 'baseline':
        break;
    case 'ext':
        $keep = new \RegionRouter();
        foreach ($countries as $country) {
            $keep->resolve($country);
        }
        $extra['regions'] = $keep->stats()['regions'];
        $extra['mechanism'] = $keep->stats()['reload_mechanism'];
        usleep(50_000); // let the watcher thread settle
        break;
    case 'twin':
        $keep = new \DwRouter\RegionRouter($snapshot);
        foreach ($countries as $country) {
            $keep->resolve($country);
        }
        $extra['regions'] = $keep->stats()['regions'];
        $afterFirst = ['status' => proc_status_kib(), 'heap' => memory_get_usage()];
        // One request as a worker runs it: fresh statics, the table fetched from APCu.
        $keep = null;
        (twin_request_reset())();
        gc_collect_cycles();
        $requestBefore = memory_get_usage();
        $request = new \DwRouter\RegionRouter($snapshot);
        foreach (country_mix($geos) as $country) {
            $request->resolve($country);
        }
        $extra['request_heap_bytes'] = memory_get_usage() - $requestBefore;
        // Measured now: stats() below compiles every region into the request's router.
        $after = ['status' => proc_status_kib(), 'heap' => memory_get_usage(), 'heap_real' => memory_get_usage(true)];
        $extra['request_apcu_hits'] = $request->stats()['apcu_hits'];
        $sma = apcu_sma_info(true);
        $extra['apcu_shm_used_bytes'] = $sma['num_seg'] * $sma['seg_size'] - $sma['avail_mem'];
        $extra['apcu_cache_mem_size'] = apcu_cache_info(true)['mem_size'];
        $extra['after_first_construction'] = $afterFirst;
        break;
    case 'compiled':
        $table = include $compiled;
        foreach ($countries as $country) {
            compiled_resolve($table, $country);
        }
        $keep = $table;
        $status = opcache_get_status(true);
        $script = $status['scripts'][realpath($compiled)] ?? null;
        $extra['opcache_script_bytes'] = $script['memory_consumption'] ?? null;
        $extra['opcache_cached'] = $script !== null;
        break;
    default:
        fail("unknown mode $mode");
}
gc_collect_cycles();
$after ??= ['status' => proc_status_kib(), 'heap' => memory_get_usage(), 'heap_real' => memory_get_usage(true)];

echo json_encode(['mode' => $mode, 'extension' => extension_loaded('dw_router'), 'before' => $before, 'after' => $after]
    + $extra, JSON_THROW_ON_ERROR) . "\n";
