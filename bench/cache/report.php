<?php
// The Markdown section of bench/23-cache.sh from its raw results in RAW (params.json,
// throughput.jsonl, hits.json, purge.jsonl, agent-purge-metrics.txt). Usage: php report.php RAW
$raw = $argv[1] ?? '';
$read = fn ($f) => is_file("$raw/$f") ? array_map(fn ($l) => json_decode($l, true), file("$raw/$f", FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES)) : [];
$params = json_decode((string) @file_get_contents("$raw/params.json"), true);
if (!is_array($params)) {
    fwrite(STDERR, "report.php: no params.json in $raw: run the plug-in first\n");
    exit(1);
}
$tp = $read('throughput.jsonl');
$purge = $read('purge.jsonl');
$hits = json_decode((string) @file_get_contents("$raw/hits.json"), true) ?: ['geos' => 0, 'hits' => 0];
$metrics = trim((string) @file_get_contents("$raw/agent-purge-metrics.txt"));
$median = function (array $v): float { sort($v); $n = count($v); return $n === 0 ? NAN : ($n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2); };
$pct = function (array $v, float $p): float { sort($v); return $v === [] ? NAN : $v[min(count($v) - 1, max(0, (int) ceil($p * count($v)) - 1))]; };
$f = fn (float $x, int $d = 1): string => is_nan($x) ? 'n/a' : number_format($x, $d);
[$rounds, $seconds, $serverCpu, $cpus] = [(int) $params['rounds'], (int) $params['seconds'], (string) $params['server_cpu'], (int) $params['cpus']];

echo "## OpenLiteSpeed page cache (LSCache): cached routed pages, commit to purge\n\n";
if ($params['quick'] === '1') echo "> Quick run (DW_BENCH_QUICK=1): numbers not to quote.\n\n";
echo "Measured {$params['measured']}, load average at the start {$params['load']} on $cpus CPU(s) (the machine is shared:\n",
     "the ratios of figures measured side by side are what to read, not absolute times). How measured: etcd, one\n",
     "`dw-agent` and two OpenLiteSpeed 1.9 servers started with `ols-run start --cache --cache-vary-cookie dw_sticky`\n",
     "and the vhost rewrite rule that puts `CF-IPCountry` into the cache key as `?dw_geo=`\n",
     "(`../shared/openlitespeed/README.md` \"Page cache\", as `tests/cache/run`), each in front of {$params['lsphp']}\n",
     "(`PHP_LSAPI_CHILDREN={$params['children']}`) loading `dw_router.so` and serving `php/front.php`: one with\n",
     "`DW_CACHE_TTL={$params['ttl']}` (the page asks LSCache to store it, tagged), one with `DW_CACHE_TTL` unset (the same\n",
     "page, never stored: LSCache is on but every request reaches PHP). The table: `examples/generate.php`'s\n",
     number_format((int) $params['size']), " regions, seeded with `dwctl apply`; the geos: `22-lsphp.sh`'s \"countries\" (the table's two-letter\n",
     "codes plus XX and T1, which the policy's default answers), sent as `CF-IPCountry`.\n\n";

echo "### Throughput: cached page (hits) beside the uncached page\n\n";
echo "`wrk -t1 -c8` for {$seconds} s per run, the two servers interleaved in an order that turns each round, $rounds round(s),\n",
     "after a 1 s warm-up of each (which stores every geo's page). ",
     $serverCpu === '' ? "One CPU: servers and wrk share it.\n" :
     "Both servers on CPU $serverCpu alone (`taskset`; an lsphp child\nwas checked to be allowed CPUs `{$params['pinned']}`), wrk on the other(s); that CPU's busy time per request\n(`/proc/stat`) beside req/s.\n";
$by = [];
foreach ($tp as $r) { $by[$r['variant']]['rps'][] = $r['rps']; $by[$r['variant']]['cpu'][] = $r['cpu_us']; $by[$r['variant']]['own'][] = $r['own_us'] ?? NAN; $by[$r['variant']]['p99'][] = $r['p99']; $by[$r['variant']]['errors'][] = $r['errors']; }
echo "The server's own CPU time per request (user + system time of its OpenLiteSpeed processes, its lsphp parent\n",
     "and children, from `/proc/PID/stat`) does not count other jobs on the machine: it is the figure to compare.\n";
echo "\n| page | median req/s | runs (req/s) | server processes' CPU per request (µs, median) | server CPU's busy time per request (µs, median) | p99 latency (each run) | error runs |\n|---|---|---|---|---|---|---|\n";
foreach (['plain' => 'uncached (`DW_CACHE_TTL` unset)', 'cached' => "cached (`DW_CACHE_TTL={$params['ttl']}`, hits)"] as $v => $label) {
    if (!isset($by[$v])) continue;
    printf("| %s | %s | %s | %s | %s | %s | %d |\n", $label, number_format($median($by[$v]['rps'])), implode(', ', array_map(fn ($x) => number_format($x), $by[$v]['rps'])),
        $f($median($by[$v]['own'])), $serverCpu === '' ? 'n/a' : $f($median($by[$v]['cpu'])), implode(', ', $by[$v]['p99']), array_sum($by[$v]['errors']));
}
if (isset($by['plain'], $by['cached'])) {
    printf("\n**Cached / uncached: %.2fx** the requests per second", $median($by['cached']['rps']) / $median($by['plain']['rps']));
    if ($median($by['cached']['own']) > 0) printf("; **uncached / cached server CPU per request: %.2fx**", $median($by['plain']['own']) / $median($by['cached']['own']));
    if ($serverCpu !== '' && $median($by['cached']['cpu']) > 0) printf(" (by the server CPU's busy time, which counts the other jobs there: %.2fx)", $median($by['plain']['cpu']) / $median($by['cached']['cpu']));
    printf(". After the runs, %d of %d geos' cached pages answered `X-LiteSpeed-Cache: hit`.\n", $hits['hits'], $hits['geos']);
    echo "On a busy machine req/s shows the CPU share the servers and wrk were given more than what a page costs;\n",
         "the server processes' own CPU per request is the figure that compares the two pages.\n\n";
}

echo "### Commit to purge\n\n";
if ($params['purge'] !== 'yes') {
    echo "Not measured: ", $params['purge'], ".\n";
    exit(0);
}
$ok = array_values(array_filter($purge, fn ($r) => !isset($r['error'])));
$failed = count($purge) - count($ok);
$p = array_map(fn ($r) => $r['purge_ms'], array_filter($ok, fn ($r) => $r['purge_ms'] !== null));
$q = array_map(fn ($r) => $r['routing_ms'], array_filter($ok, fn ($r) => $r['routing_ms'] !== null));
$d = array_map(fn ($r) => $r['dwctl_ms'], $ok);
$gap = array_map(fn ($r) => $r['purge_ms'] - $r['routing_ms'], array_filter($ok, fn ($r) => $r['purge_ms'] !== null && $r['routing_ms'] !== null));
$never = count($ok) - count($p);
$oldHits = array_sum(array_map(fn ($r) => $r['old_hits_after_routing'], $ok));
$oldMisses = array_sum(array_map(fn ($r) => $r['old_misses'], $ok));
echo count($purge), " changes of `region/{$params['geo']}` by `dwctl region set`, its first two origins' weights swapped in\n",
     "turn. Before each, the {$params['geo']} page on the cached server is a hit; from dwctl's return (the commit is done;\n",
     "its revision is the one dwctl prints) the page is polled every {$params['poll_ms']} ms (bounded: {$params['bound_ms']} ms) on both servers,\n",
     "one loopback connection per request. Purge landed: the first cached-server answer that is\n",
     "`X-LiteSpeed-Cache: miss` with `X-DW-Revision` at the commit's revision. Routing landed: the first uncached answer\n",
     "at that revision. Agent: `--coalesce-window {$params['coalesce']}` (the default), `--purge-url` the cached server's\n",
     "`purge.php`, `--purge-repeat-after {$params['repeat']}` (the default); each change waits until its repeat purge has passed.\n\n";
echo "| from dwctl's return to | p50 (ms) | p99 (ms) | max (ms) | changes |\n|---|---|---|---|---|\n";
printf("| routing landed (uncached page at the new revision) | %s | %s | %s | %d |\n", $f($pct($q, 0.5)), $f($pct($q, 0.99)), $f($q ? max($q) : NAN), count($q));
printf("| **purge landed** (cached page a miss at the new revision) | **%s** | **%s** | %s | %d |\n", $f($pct($p, 0.5)), $f($pct($p, 0.99)), $f($p ? max($p) : NAN), count($p));
printf("| purge landed after routing landed (per change) | %s | %s | %s | %d |\n", $f($pct($gap, 0.5)), $f($pct($gap, 0.99)), $f($gap ? max($gap) : NAN), count($gap));
printf("\ndwctl itself (process start to return, commit included): p50 %s ms, p99 %s ms. ", $f($pct($d, 0.5)), $f($pct($d, 0.99)));
printf("Purge not seen within the bound: %d; changes not measured (page not a hit before, or dwctl failed): %d.\n", $never, $failed);
printf("Cached-server polls that were still a hit of the old revision after the uncached page had the new one: %d;\n", $oldHits);
printf("misses made at the old revision (purged, but answered from the old table: what the repeat purge is for): %d.\n", $oldMisses);
if ($metrics !== '') echo "\nThe agent's purge counters at the end:\n\n", implode("\n", array_map(fn ($l) => "    $l", explode("\n", $metrics))), "\n";
$count = fn (string $name): int => preg_match('/^' . $name . ' (\d+)/m', $metrics, $m) ? (int) $m[1] : 0;
[$sent, $failedPosts] = [$count('dw_agent_purge_requests_total'), $count('dw_agent_purge_failures_total')];
if ($failedPosts > 0) {
    printf("\n**%d of the agent's %d purge requests counted as failed** (its log in `\$DW_BENCH_RAW/logs/agent.log` says why).\n" .
        "A failed purge is retried with backoff (100 ms doubling, at most 5 s), so where every request fails the\n" .
        "purge lands on a retry, not right after the publication: the figures above then measure the retry schedule.\n", $failedPosts, $sent);
}
