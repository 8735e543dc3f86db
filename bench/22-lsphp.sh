#!/usr/bin/env bash
# OpenLiteSpeed + lsphp 8.4 (production's stack), at 250 and 2,500 regions:
#   1. HTTP throughput of php/front.php with routing against the same page without it
#   2. warm children: a fresh child's first route (new RegionRouter + resolve + revision)
#      with the table preloaded in MINIT and without, and the private memory (USS) a child
#      adds by routing while the table is the one MINIT loaded
# A bench/ plug-in (see bench/README.md): Markdown on stdout, log on stderr, raw results in
# $DW_BENCH_RAW. Where no LiteSpeed is found it says so in its section.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
if ! why=$(stack_litespeed_available 2>&1); then
  printf '## OpenLiteSpeed + lsphp\n\nNot measured: %s\n' "$why"
  exit 0
fi
require_built_extension
mkdir -p "$RAW"
rm -f "$RAW"/*.jsonl "$RAW"/*.txt

ROUNDS=5 SECONDS_PER_RUN=4 FRESH=60
if [[ $QUICK == 1 ]]; then ROUNDS=1 SECONDS_PER_RUN=2 FRESH=15; fi
SIZES=(250 2500)
STACK_SERVER=litespeed
STACK_LSPHP_CHILDREN=8

stack_init "$(mktemp -d /tmp/dw-bench-lsphp.XXXXXX)"
trap 'stack_stop; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT

make_snapshots "${SIZES[@]}"
write_geos_lua
revision_at() { curl -fsS -o /dev/null -D - "$1/" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-dw-revision" {print $2}'; }
# USS (Private_Clean + Private_Dirty, KiB) of each child of the lsphp parent in ROOT.
children_uss() { # server-root label size
  local parent pid
  parent=$(head -n1 "$1/run/lsphp/pids")
  for pid in $(pgrep -P "$parent"); do
    awk -v l="$2" -v n="$3" -v pid="$pid" '/^Private_Clean:/ {pc = $2} /^Private_Dirty:/ {pd = $2} /^Rss:/ {rss = $2}
      END {printf "{\"label\":\"%s\",\"size\":%d,\"pid\":%d,\"uss_kb\":%d,\"rss_kb\":%d}\n", l, n, pid, pc + pd, rss}' \
      "/proc/$pid/smaps_rollup"
  done
}

# ---- 1. throughput: routed page vs the same page without routing, side by side -------------
# On two or more CPUs the servers get the last one and wrk the others, so that the load
# generator never takes the server's CPU: req/s is then the server's CPU per request, and
# that CPU's busy time per request (/proc/stat) is measured beside it.
CPUS=$(nproc)
SERVER_CPU= CLIENT=()
if ((CPUS >= 2)); then
  SERVER_CPU=$((CPUS - 1))
  CLIENT=(taskset -c "0-$((CPUS - 2))")
fi
STACK_SERVER_CPUS=$SERVER_CPU
cpu_busy() { # jiffies CPU $1 spent not idle (user nice system irq softirq steal)
  awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))
install_snapshot 250
log "starting OLS + lsphp three times: routing; the extension loaded, routing off; no extension"
STACK_HTTP_PORT= STACK_LSPHP_ENV=()
stack_start_litespeed ext yes
URL_EXT=$STACK_URL
STACK_HTTP_PORT= STACK_LSPHP_ENV=(DW_ROUTING=off)
stack_start_litespeed idle yes
URL_IDLE=$STACK_URL
STACK_HTTP_PORT= STACK_LSPHP_ENV=(DW_ROUTING=off)
stack_start_litespeed none no
URL_NONE=$STACK_URL
declare -A URL_OF=([none]=$URL_NONE [idle]=$URL_IDLE [ext]=$URL_EXT)
PINNED=none
if [[ -n $SERVER_CPU ]]; then
  # Checked, not assumed: the CPUs an lsphp child (of the server started last) may run on.
  curl -fsS -o /dev/null "$STACK_URL/"
  child=$(stack_lsphp_children | head -n1)
  PINNED=$(awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$child/status" 2>/dev/null || echo unknown)
  log "server CPU $SERVER_CPU; an lsphp child may run on CPUs $PINNED; wrk on ${CLIENT[*]}"
fi
VARIANTS=(none idle ext)
for n in "${SIZES[@]}"; do
  install_snapshot "$n"
  stack_until "revision $n over HTTP" bash -c '[[ $(curl -fsS -o /dev/null -D - "$0/" | tr -d "\r" | awk -F": " "tolower(\$1)==\"x-dw-revision\"{print \$2}") == "$1" ]]' "$URL_EXT" "$n"
  export DW_BENCH_GEOS
  DW_BENCH_GEOS=$(geos "$n")
  for url in "$URL_NONE" "$URL_IDLE" "$URL_EXT"; do wrk -t1 -c8 -d1s -s "$STACK_DIR/geos.lua" "$url" >/dev/null; done
  for ((round = 1; round <= ROUNDS; round++)); do
    # The order turns each round, so that no variant always runs first or after the same one.
    for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
      variant=${VARIANTS[$(((round + k) % ${#VARIANTS[@]}))]}
      url=${URL_OF[$variant]}
      log "$n regions, round $round, $variant"
      out=$RAW/wrk-$n-$variant-$round.txt
      busy0=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
      "${CLIENT[@]}" wrk -t1 -c8 -d"${SECONDS_PER_RUN}s" --latency -s "$STACK_DIR/geos.lua" "$url" >"$out"
      busy1=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
      rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
      requests=$(awk '/ requests in / {print $1}' "$out")
      p99=$(awk '$1 == "99%" {print $2}' "$out")
      errors=$(grep -cE 'Socket errors|Non-2xx' "$out" || true)
      cpu_us=$(awk -v b=$((busy1 - busy0)) -v t="$TICK_US" -v r="$requests" 'BEGIN {printf "%.3f", r > 0 ? b * t / r : 0}')
      echo "{\"size\":$n,\"variant\":\"$variant\",\"round\":$round,\"rps\":$rps,\"p99\":\"$p99\",\"errors\":$errors,\"cpu_us\":$cpu_us}" >>"$RAW/throughput.jsonl"
    done
  done
done
stack_stop_litespeed
STACK_SERVER_CPUS=

# ---- 2. warm children ------------------------------------------------------------------------
STACK_TEST_HOOKS=1
for n in "${SIZES[@]}"; do
  install_snapshot "$n"
  export DW_BENCH_GEOS
  DW_BENCH_GEOS=$(geos "$n")
  for preload in 1 0; do
    # A fresh child per request (LSAPI_MAX_REQS=1): the first route of each.
    log "$n regions, preload=$preload: $FRESH fresh children"
    STACK_HTTP_PORT= STACK_LSPHP_MAX_REQS=1 STACK_LSPHP_ENV=() STACK_LSPHP_INI="dw_router.preload = $preload"
    stack_start_litespeed "fresh-$n-$preload" yes
    for ((i = 0; i < FRESH; i++)); do
      curl -fsS -o /dev/null -D - -H 'CF-IPCountry: DE' -w 'total %{time_total}\n' "$STACK_URL/" | tr -d '\r' |
        awk -F': ' -v n="$n" -v p="$preload" 'tolower($1) == "x-dw-route-ns" {ns = $2} tolower($1) == "x-dw-revision" {r = $2}
          /^total / {split($0, t, " "); printf "{\"size\":%d,\"preload\":%d,\"route_ns\":%d,\"revision\":%d,\"total_ms\":%.3f}\n", n, p, ns, r, t[2] * 1000}'
    done >>"$RAW/fresh.jsonl"
    stack_stop_litespeed "$STACK_OLS_ROOT"
    # Long-lived children: private memory after routing every geo of the rotation.
    log "$n regions, preload=$preload: memory of 8 children"
    for routing in on off; do
      [[ $preload == 0 && $routing == off ]] && continue
      STACK_HTTP_PORT= STACK_LSPHP_MAX_REQS= STACK_LSPHP_ENV=() STACK_LSPHP_INI="dw_router.preload = $preload"
      [[ $routing == off ]] && STACK_LSPHP_ENV=(DW_ROUTING=off)
      stack_start_litespeed "mem-$n-$preload-$routing" yes
      wrk -t1 -c8 -d2s -s "$STACK_DIR/geos.lua" "$STACK_URL" >/dev/null
      children_uss "$STACK_OLS_ROOT" "preload=$preload routing=$routing" "$n" >>"$RAW/memory.jsonl"
      stack_stop_litespeed "$STACK_OLS_ROOT"
    done
  done
done

php -r '
$read = fn ($f) => is_file($f) ? array_map(fn ($l) => json_decode($l, true), file($f, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES)) : [];
[$tp, $fresh, $mem] = [$read($argv[1] . "/throughput.jsonl"), $read($argv[1] . "/fresh.jsonl"), $read($argv[1] . "/memory.jsonl")];
[$rounds, $seconds, $quick, $lsphp, $children] = [(int) $argv[2], (int) $argv[3], $argv[4] === "1", $argv[5], (int) $argv[6]];
[$serverCpu, $pinned, $cpus] = [$argv[7], $argv[8], (int) $argv[9]];
$median = function (array $v): float { sort($v); $n = count($v); return $n === 0 ? NAN : ($n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2); };
$pct = function (array $v, float $p): float { sort($v); return $v === [] ? NAN : $v[min(count($v) - 1, (int) ceil($p * count($v)) - 1)]; };
echo "## OpenLiteSpeed + lsphp: throughput, warm children, memory per child\n\n";
if ($quick) echo "> Quick run (DW_BENCH_QUICK=1): numbers not to quote.\n\n";
echo "How measured: OpenLiteSpeed 1.9 (`../shared/openlitespeed`, one worker) in front of $lsphp\n",
     "(built by `scripts/build-lsphp`, opcache on), which OLS starts detached with\n",
     "`PHP_LSAPI_CHILDREN=$children`; as root, lsphp runs as `nobody`. Three servers side by side: one whose\n",
     "lsphp loads `dw_router.so` and routes (`php/front.php`); one whose lsphp loads it (and preloads the\n",
     "table) but serves the page with routing switched off (`DW_ROUTING=off`); one without the extension\n",
     "serving the page with routing off. `wrk -t1 -c8` for {$seconds} s per run over 64 geos of the\n",
     "snapshot, the three interleaved in an order that turns each round, $rounds round(s), median req/s.\n",
     "The middle server splits what loading the extension costs a request from what routing costs.\n",
     $serverCpu === "" ? "All $cpus CPU(s) shared by the servers and wrk (no pinning: one CPU).\n\n" :
     "The servers ran on CPU $serverCpu alone (`taskset`; an lsphp child was checked to be\n" .
     "allowed CPUs `$pinned`) and wrk on the other CPU(s), so the server CPU is saturated and req/s is its CPU per\n" .
     "request; that CPU\x27s busy time (`/proc/stat`: user, nice, system, irq, softirq) divided by the requests\n" .
     "served is given beside it. It also carries some of the loopback network work, the same for all three servers.\n\n";
echo "| regions | no extension (req/s) | loaded, routing off (req/s) | routing (req/s) | routing / no extension | loaded / no extension | routing / loaded | errors |\n|---|---|---|---|---|---|---|---|\n";
$ratios = [];
foreach ([250, 2500] as $n) {
    $by = []; $errors = 0;
    foreach ($tp as $r) if ($r["size"] === $n) { $by[$r["variant"]][] = $r["rps"]; $errors += $r["errors"]; }
    if (!isset($by["ext"], $by["none"], $by["idle"])) continue;
    [$none, $idle, $ext] = [$median($by["none"]), $median($by["idle"]), $median($by["ext"])];
    $ratios[$n] = $ext / $none;
    printf("| %s | %s | %s | %s | %.3f | %.3f | %.3f | %d |\n", number_format($n), number_format($none), number_format($idle), number_format($ext), $ratios[$n], $idle / $none, $ext / $idle, $errors);
}
echo "\n";
foreach ($ratios as $n => $r) printf("Target, extension >= 0.97x the page without routing on OLS + lsphp, %s regions: **%s** (%.3f).\n", number_format($n), $r >= 0.97 ? "met" : "not met", $r);
if ($serverCpu !== "") {
    echo "\nServer CPU per request (µs, median of the rounds; CPU $serverCpu busy time / requests):\n\n",
         "| regions | no extension | loaded, routing off | routing | routing − no extension | no extension / routing |\n|---|---|---|---|---|---|\n";
    foreach ([250, 2500] as $n) {
        $by = [];
        foreach ($tp as $r) if ($r["size"] === $n && isset($r["cpu_us"])) $by[$r["variant"]][] = $r["cpu_us"];
        if (!isset($by["ext"], $by["none"], $by["idle"])) continue;
        [$none, $idle, $ext] = [$median($by["none"]), $median($by["idle"]), $median($by["ext"])];
        printf("| %s | %.2f | %.2f | %.2f | %+.2f | %.3f |\n", number_format($n), $none, $idle, $ext, $ext - $none, $none / $ext);
    }
}
echo "\nEvery run (req/s, p99 latency, server CPU per request):\n\n| regions | round | no extension | loaded, routing off | routing |\n|---|---|---|---|---|\n";
$cell = [];
foreach ($tp as $r) $cell[$r["size"]][$r["round"]][$r["variant"]] = sprintf("%s (%s%s)", number_format($r["rps"]), $r["p99"],
    $serverCpu !== "" && isset($r["cpu_us"]) ? sprintf(", %.2f µs CPU", $r["cpu_us"]) : "");
foreach ($cell as $n => $byRound) foreach ($byRound as $round => $v) printf("| %s | %d | %s | %s | %s |\n", number_format($n), $round, $v["none"] ?? "", $v["idle"] ?? "", $v["ext"] ?? "");

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
' "$RAW" "$ROUNDS" "$SECONDS_PER_RUN" "$QUICK" "$(lsphp -v | head -n1 | cut -d' ' -f1-3)" "$STACK_LSPHP_CHILDREN" \
  "${SERVER_CPU:-}" "$PINNED" "$CPUS"
