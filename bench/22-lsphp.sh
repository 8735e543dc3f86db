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
# DW_BENCH_REPORT_ONLY=1: the section again from the last run's raw results, measuring nothing.
if [[ ${DW_BENCH_REPORT_ONLY:-0} == 1 ]]; then
  exec php bench/lsphp/report.php "$RAW"
fi
require_built_extension
mkdir -p "$RAW"
rm -f "$RAW"/*.jsonl "$RAW"/*.txt "$RAW"/params.json

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
printf '{"measured":"%s","rounds":%d,"seconds":%d,"quick":"%s","lsphp":"%s","children":%d,"server_cpu":"%s","pinned":"%s","cpus":%d}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$ROUNDS" "$SECONDS_PER_RUN" "$QUICK" "$(lsphp -v | head -n1 | cut -d' ' -f1-3)" "$STACK_LSPHP_CHILDREN" \
  "$SERVER_CPU" "$PINNED" "$CPUS" >"$RAW/params.json"
VARIANTS=(none idle ext)
# Two request mixes (bench/lib/stack-bench.sh's geos): "spread", mostly synthetic
# five-character geos over the whole table, which the index hashes; "countries", the
# two-letter codes CF-IPCountry sends, found by an array index.
for n in "${SIZES[@]}"; do
  install_snapshot "$n"
  stack_until "revision $n over HTTP" bash -c '[[ $(curl -fsS -o /dev/null -D - "$0/" | tr -d "\r" | awk -F": " "tolower(\$1)==\"x-dw-revision\"{print \$2}") == "$1" ]]' "$URL_EXT" "$n"
  for mix in spread countries; do
    export DW_BENCH_GEOS
    DW_BENCH_GEOS=$(geos "$n" "$mix")
    for url in "$URL_NONE" "$URL_IDLE" "$URL_EXT"; do "${CLIENT[@]}" wrk -t1 -c8 -d1s -s "$STACK_DIR/geos.lua" "$url" >/dev/null; done
    for ((round = 1; round <= ROUNDS; round++)); do
      # The order turns each round, so that no variant always runs first or after the same one.
      for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
        variant=${VARIANTS[$(((round + k) % ${#VARIANTS[@]}))]}
        url=${URL_OF[$variant]}
        log "$n regions, $mix geos, round $round, $variant"
        out=$RAW/wrk-$n-$mix-$variant-$round.txt
        busy0=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
        "${CLIENT[@]}" wrk -t1 -c8 -d"${SECONDS_PER_RUN}s" --latency -s "$STACK_DIR/geos.lua" "$url" >"$out"
        busy1=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
        rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
        requests=$(awk '/ requests in / {print $1}' "$out")
        p99=$(awk '$1 == "99%" {print $2}' "$out")
        errors=$(grep -cE 'Socket errors|Non-2xx' "$out" || true)
        cpu_us=$(awk -v b=$((busy1 - busy0)) -v t="$TICK_US" -v r="$requests" 'BEGIN {printf "%.3f", (r > 0 ? b * t / r : 0)}')
        echo "{\"size\":$n,\"mix\":\"$mix\",\"variant\":\"$variant\",\"round\":$round,\"rps\":$rps,\"p99\":\"$p99\",\"errors\":$errors,\"cpu_us\":$cpu_us}" >>"$RAW/throughput.jsonl"
      done
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

php bench/lsphp/report.php "$RAW"
