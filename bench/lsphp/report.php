<?php
// The Markdown section of bench/22-lsphp.sh from its raw results in RAW (throughput.jsonl,
// fresh.jsonl, memory.jsonl, params.json). Usage: php report.php RAW
$read = fn ($f) => is_file($f) ? array_map(fn ($l) => json_decode($l, true), file($f, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES)) : [];
[$tp, $fresh, $mem] = [$read($argv[1] . "/throughput.jsonl"), $read($argv[1] . "/fresh.jsonl"), $read($argv[1] . "/memory.jsonl")];
$params = json_decode((string) @file_get_contents($argv[1] . "/params.json"), true);
if (!is_array($params)) {
    fwrite(STDERR, "report.php: no params.json in {$argv[1]}: run the plug-in first\n");
    exit(1);
}
[$rounds, $seconds, $quick, $lsphp, $children] = [(int) $params["rounds"], (int) $params["seconds"], $params["quick"] === "1", $params["lsphp"], (int) $params["children"]];
[$serverCpu, $pinned, $cpus] = [(string) $params["server_cpu"], $params["pinned"], (int) $params["cpus"]];
$median = function (array $v): float { sort($v); $n = count($v); return $n === 0 ? NAN : ($n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2); };
$pct = function (array $v, float $p): float { sort($v); return $v === [] ? NAN : $v[min(count($v) - 1, (int) ceil($p * count($v)) - 1)]; };
echo "## OpenLiteSpeed + lsphp: throughput, warm children, memory per child\n\n";
if ($quick) echo "> Quick run (DW_BENCH_QUICK=1): numbers not to quote.\n\n";
echo "Measured {$params["measured"]}. How measured: OpenLiteSpeed 1.9 (`../shared/openlitespeed`, one worker) in front of $lsphp\n",
     "(built by `scripts/build-lsphp`, opcache on), which OLS starts detached with\n",
     "`PHP_LSAPI_CHILDREN=$children`; as root, lsphp runs as `nobody`. Three servers side by side: one whose\n",
     "lsphp loads `dw_router.so` and routes (`php/front.php`); one whose lsphp loads it (and preloads the\n",
     "table) but serves the page with routing switched off (`DW_ROUTING=off`); one without the extension\n",
     "serving the page with routing off. `wrk -t1 -c8` for {$seconds} s per run over the geos of a mix (below),\n",
     "the three interleaved in an order that turns each round, $rounds round(s) per size and mix, median req/s.\n",
     "The middle server splits what loading the extension costs a request from what routing costs.\n",
     $serverCpu === "" ? "All $cpus CPU(s) shared by the servers and wrk (no pinning: one CPU).\n\n" :
     "The servers ran on CPU $serverCpu alone (`taskset`; an lsphp child was checked to be\n" .
     "allowed CPUs `$pinned`) and wrk on the other CPU(s), so the server CPU is saturated and req/s is its CPU per\n" .
     "request; that CPU\x27s busy time (`/proc/stat`: user, nice, system, irq, softirq) divided by the requests\n" .
     "served is given beside it. It also carries some of the loopback network work, the same for all three servers.\n\n";
echo "| regions | geos | no extension (req/s) | loaded, routing off (req/s) | routing (req/s) | routing / no extension | loaded / no extension | routing / loaded | errors |\n|---|---|---|---|---|---|---|---|---|\n";
$ratios = [];
foreach ([250, 2500] as $n) foreach (["spread", "countries"] as $mix) {
    $by = []; $errors = 0;
    foreach ($tp as $r) if ($r["size"] === $n && ($r["mix"] ?? "spread") === $mix) { $by[$r["variant"]][] = $r["rps"]; $errors += $r["errors"]; }
    if (!isset($by["ext"], $by["none"], $by["idle"])) continue;
    [$none, $idle, $ext] = [$median($by["none"]), $median($by["idle"]), $median($by["ext"])];
    $ratios["$n $mix"] = [$n, $mix, $ext / $none];
    printf("| %s | %s | %s | %s | %s | %.3f | %.3f | %.3f | %d |\n", number_format($n), $mix, number_format($none), number_format($idle), number_format($ext), $ext / $none, $idle / $none, $ext / $idle, $errors);
}
echo "\ngeos: `spread` is 63 geos spread over the table (at these sizes mostly synthetic five-character ones, which\n",
     "the index finds by hashing) plus ZZ; `countries` is what CF-IPCountry sends, two-letter codes: the table\x27s 32\n",
     "countries plus XX and T1 (no region; the policy\x27s default answers), found by an array index.\n\n";
foreach ($ratios as [$n, $mix, $r]) printf("Target, extension >= 0.97x the page without routing on OLS + lsphp, %s regions, %s geos: **%s** (%.3f).\n", number_format($n), $mix, $r >= 0.97 ? "met" : "not met", $r);
// Pooled: every round of every size and mix, four times the rounds of one cell.
$pool = [];
foreach ($tp as $r) { $pool[$r["variant"]]["rps"][] = $r["rps"]; if (isset($r["cpu_us"])) $pool[$r["variant"]]["cpu"][] = $r["cpu_us"]; }
if (isset($pool["ext"], $pool["none"], $pool["idle"])) {
    [$none, $idle, $ext] = [$median($pool["none"]["rps"]), $median($pool["idle"]["rps"]), $median($pool["ext"]["rps"])];
    printf("\nTarget, all %d runs of each server pooled (routing\x27s cost depends on neither size nor mix beyond the noise of\n" .
        "one cell): **%s** (%.3f): no extension %s req/s, loaded %s (%.3f), routing %s",
        count($pool["ext"]["rps"]), $ext / $none >= 0.97 ? "met" : "not met", $ext / $none, number_format($none),
        number_format($idle), $idle / $none, number_format($ext));
    if (isset($pool["ext"]["cpu"], $pool["none"]["cpu"]) && $serverCpu !== "") {
        [$cNone, $cExt] = [$median($pool["none"]["cpu"]), $median($pool["ext"]["cpu"])];
        printf("; server CPU per request %.2f µs without the extension, %.2f µs routing (%+.2f µs)", $cNone, $cExt, $cExt - $cNone);
    }
    echo ".\n";
}
if ($serverCpu !== "") {
    echo "\nServer CPU per request (µs, median of the rounds; CPU $serverCpu busy time / requests):\n\n",
         "| regions | geos | no extension | loaded, routing off | routing | routing − no extension | no extension / routing |\n|---|---|---|---|---|---|---|\n";
    foreach ([250, 2500] as $n) foreach (["spread", "countries"] as $mix) {
        $by = [];
        foreach ($tp as $r) if ($r["size"] === $n && ($r["mix"] ?? "spread") === $mix && isset($r["cpu_us"])) $by[$r["variant"]][] = $r["cpu_us"];
        if (!isset($by["ext"], $by["none"], $by["idle"])) continue;
        [$none, $idle, $ext] = [$median($by["none"]), $median($by["idle"]), $median($by["ext"])];
        printf("| %s | %s | %.2f | %.2f | %.2f | %+.2f | %.3f |\n", number_format($n), $mix, $none, $idle, $ext, $ext - $none, $none / $ext);
    }
}
echo "\nEvery run (req/s, p99 latency, server CPU per request):\n\n| regions | geos | round | no extension | loaded, routing off | routing |\n|---|---|---|---|---|---|\n";
$cell = [];
foreach ($tp as $r) $cell[$r["size"] . " " . ($r["mix"] ?? "spread")][$r["round"]][$r["variant"]] = sprintf("%s (%s%s)", number_format($r["rps"]), $r["p99"],
    $serverCpu !== "" && isset($r["cpu_us"]) ? sprintf(", %.2f µs CPU", $r["cpu_us"]) : "");
foreach ($cell as $key => $byRound) {
    [$n, $mix] = explode(" ", $key);
    foreach ($byRound as $round => $v) printf("| %s | %s | %d | %s | %s | %s |\n", number_format((int) $n), $mix, $round, $v["none"] ?? "", $v["idle"] ?? "", $v["ext"] ?? "");
}

echo "\n### Warm children: a fresh child\x27s first route\n\n",
     "Each request went to a child forked for it (`LSAPI_MAX_REQS=1`); `X-DW-Route-Ns` (a test hook\n",
     "of `php/front.php`) is the time from before `new RegionRouter()` to after `revision()` in that\n",
     "child\x27s first and only request. With `dw_router.preload = 1` (the default `auto` outside the\n",
     "CLI) the parent parsed the table in MINIT and the child only checks the file (one `stat`),\n",
     "setting its watch up after the request;\n",
     "with `0` the child maps and parses it. Whole request as curl saw it beside it.\n\n",
     "| regions | preload | children | first route p50 (µs) | p90 (µs) | max (µs) | request p50 (ms) | all at the snapshot\x27s revision |\n|---|---|---|---|---|---|---|---|\n";
$firstP50 = [];
foreach ([250, 2500] as $n) foreach ([1, 0] as $p) {
    $rows = array_values(array_filter($fresh, fn ($r) => $r["size"] === $n && $r["preload"] === $p));
    if ($rows === []) continue;
    $us = array_map(fn ($r) => $r["route_ns"] / 1000, $rows);
    $firstP50[$n][$p] = $median($us);
    $revOk = count(array_filter($rows, fn ($r) => $r["revision"] === $n)) === count($rows);
    printf("| %s | %s | %d | %.0f | %.0f | %.0f | %.2f | %s |\n", number_format($n), $p ? "on" : "off", count($rows),
        $median($us), $pct($us, 0.9), max($us), $median(array_column($rows, "total_ms")), $revOk ? "yes" : "no");
}
if (isset($firstP50[2500][1])) printf("\nTarget, a fresh child\x27s first `resolve()` within 100 µs at 2,500 regions: **%s** (p50 %.0f µs with preload; %.0f µs without).\n",
    $firstP50[2500][1] <= 100 ? "met" : "not met", $firstP50[2500][1], $firstP50[2500][0] ?? NAN);

echo "\n### Private memory per child\n\n",
     "$children long-lived children per server after `wrk -c8` for 2 s over the 64 geos (every child routed many\n",
     "of them, filling its route memo). USS = Private_Clean + Private_Dirty from `/proc/PID/smaps_rollup`,\n",
     "mean over the children, KiB. \"routing off\" is the same lsphp with the extension and the preloaded\n",
     "table but `DW_ROUTING=off`: the difference is what routing adds to a child.\n\n",
     "| regions | preload | routing | children | USS (KiB) | RSS (KiB) |\n|---|---|---|---|---|---|\n";
$uss = [];
foreach ([250, 2500] as $n) foreach (["preload=1 routing=off", "preload=1 routing=on", "preload=0 routing=on"] as $label) {
    $rows = array_values(array_filter($mem, fn ($r) => $r["size"] === $n && $r["label"] === $label));
    if ($rows === []) continue;
    $uss[$n][$label] = array_sum(array_column($rows, "uss_kb")) / count($rows);
    [$p, $r] = sscanf($label, "preload=%d routing=%s");
    printf("| %s | %s | %s | %d | %s | %s |\n", number_format($n), $p ? "on" : "off", $r, count($rows),
        number_format($uss[$n][$label]), number_format(array_sum(array_column($rows, "rss_kb")) / count($rows)));
}
echo "\n";
foreach ($uss as $n => $u) {
    if (!isset($u["preload=1 routing=off"], $u["preload=1 routing=on"])) continue;
    $added = $u["preload=1 routing=on"] - $u["preload=1 routing=off"];
    $before = isset($u["preload=0 routing=on"]) ? $u["preload=0 routing=on"] - $u["preload=1 routing=off"] : NAN;
    printf("At %s regions routing adds %s KiB of private memory per child with the table from MINIT (%s KiB when each child parses its own).%s\n",
        number_format($n), number_format($added), number_format($before),
        $n === 2500 ? sprintf(" Target <= 256 KiB at 2,500 regions: **%s**.", $added <= 256 ? "met" : "not met") : "");
}
