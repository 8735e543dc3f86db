#!/usr/bin/env bash
# What counting resolve()'s answers costs under load (issue 29, docs/traffic.md), with
# dw_router.count_answers=1 beside =0, side by side in one run (12-count.sh has the
# instruction counts):
#   1. two PHP CLI processes counting at once, one per CPU, into one counter file, beside
#      one alone: CPU time and wall clock per resolve()
#   2. eight lsphp children (OpenLiteSpeed, both CPUs) answering one geo at once, beside one
#      child alone: CPU time per resolve() (getrusage; perf's cycles where the machine has
#      hardware counters: the section says which)
#   3. lsphp behind OpenLiteSpeed, php/front.php under wrk: the server processes' CPU time
#      per request, with the round-to-round spread
#   4. private memory (USS) per lsphp child at 2,500 regions: routing off, counting off,
#      counting on, and counting on with visitor buckets (N = 1024, every multi-origin
#      region a stored assignment of realistic runs, each request a random bucket)
# DW_BENCH_COUNT_LOAD_MEMORY_ONLY=1 runs no round of parts 1-3 (their servers still start;
# the report shows them as not measured): for measuring part 4 alone.
# A bench/ plug-in (see bench/README.md): Markdown on stdout, log on stderr, raw results in
# $DW_BENCH_RAW; DW_BENCH_REPORT_ONLY=1 renders the section again from them. Where no
# LiteSpeed is found, parts 2-4 say so.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
if [[ ${DW_BENCH_REPORT_ONLY:-0} == 1 ]]; then
  exec php bench/count/report.php "$RAW"
fi
require_built_extension
mkdir -p "$RAW"
rm -f "$RAW"/*.jsonl "$RAW"/params.json "$RAW"/bucket-snapshot.txt

ROUNDS=5 N_CLI=20000000 N_CHILD=20000000 SECONDS_PER_RUN=4
if [[ $QUICK == 1 ]]; then ROUNDS=2 N_CLI=5000000 N_CHILD=5000000 SECONDS_PER_RUN=2; fi
GEO=DE
CPUS=$(nproc)
STACK_SERVER=litespeed
STACK_LSPHP_CHILDREN=8

stack_init "$(mktemp -d /tmp/dw-bench-count-load.XXXXXX)"
trap 'stack_stop; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT
ANSWERS=$STACK_DIR/answers
mkdir -p "$ANSWERS" && chmod 1777 "$ANSWERS"
[[ ${DW_BENCH_COUNT_LOAD_MEMORY_ONLY:-0} == 1 ]] && ROUNDS=0
make_snapshots 250 2500
php bench/count/bucket-snapshot.php "$STACK_DIR/snapshot-2500.json" "$STACK_DIR/snapshot-2500b.json" 1024 30 41 \
  2>>"$RAW/bucket-snapshot.txt"
install_snapshot 250
write_geos_lua

# Hardware counters (perf stat's cycles), if this machine has them.
PERF=none
if command -v perf >/dev/null && perf stat -x, -e cycles:u -- true 2>&1 | grep -q '^[0-9]'; then PERF=cycles; fi
printf '{"measured":"%s","rounds":%d,"n_cli":%d,"n_child":%d,"seconds":%d,"quick":"%s","cpus":%d,"children":%d,"geo":"%s","perf":"%s","load_start":"%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$ROUNDS" "$N_CLI" "$N_CHILD" "$SECONDS_PER_RUN" "$QUICK" "$CPUS" "$STACK_LSPHP_CHILDREN" "$GEO" "$PERF" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RAW/params.json"

# ---- 1. CLI: two processes at once beside one alone ------------------------------------------
# Every process maps the same counter file (answers-<uid>.bin) and counts in a slot of its
# own. "one" runs on the last CPU; "two" runs one process on CPU 0 and one on the last.
cli_spin() { # CPU COUNT MODE ROUND
  taskset -c "$1" php -d "extension=$STACK_SO" -d "dw_router.count_answers=$2" -d "dw_router.answers_dir=$ANSWERS" \
    bench/count/spin.php "$STACK_SNAPSHOT" "$GEO" "$N_CLI" |
    php -r '$j = json_decode(stream_get_contents(STDIN), true); $j += ["part" => "cli", "count" => (int) $argv[1], "mode" => $argv[2], "round" => (int) $argv[3], "cpu" => (int) $argv[4]];
      echo json_encode($j), "\n";' "$2" "$3" "$4" "$1"
}
LAST=$((CPUS - 1))
for ((round = 1; round <= ROUNDS; round++)); do
  for count in $(((round % 2)) && echo "1 0" || echo "0 1"); do
    log "CLI, round $round, count_answers=$count: one alone, then two at once ($N_CLI calls each)"
    cli_spin "$LAST" "$count" one "$round" >>"$RAW/cli.jsonl"
    if ((CPUS >= 2)); then
      cli_spin 0 "$count" two "$round" >"$STACK_DIR/two-0.json" &
      first=$!
      cli_spin "$LAST" "$count" two "$round" >"$STACK_DIR/two-1.json"
      wait "$first"
      cat "$STACK_DIR/two-0.json" "$STACK_DIR/two-1.json" >>"$RAW/cli.jsonl"
    fi
  done
done

if ! why=$(stack_litespeed_available 2>&1); then
  echo "{\"no_litespeed\":\"$why\"}" >"$RAW/no-litespeed.json"
  echo "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RAW/load-end.txt"
  php bench/count/report.php "$RAW"
  exit 0
fi

# A server with counting on or off (the answers directory as tests/lsphp/run gives it).
start_server() { # NAME COUNT [K=V env...]
  local name=$1 count=$2
  shift 2
  STACK_HTTP_PORT= STACK_LSPHP_MAX_REQS= STACK_LSPHP_ENV=("$@")
  STACK_LSPHP_INI="dw_router.answers_dir = $ANSWERS
dw_router.count_answers = $count"
  stack_start_litespeed "$name" yes
  cp bench/count/spin.php "$STACK_DIR/$name/docroot/spin.php"
  chmod a+r "$STACK_DIR/$name/docroot/spin.php"
}

# ---- 2. eight lsphp children answering one geo at once, beside one alone ---------------------
log "starting OLS + lsphp twice (8 children each, both CPUs): count_answers=1 and =0"
start_server spin-on 1
URL_SPIN_ON=$STACK_URL
start_server spin-off 0
URL_SPIN_OFF=$STACK_URL
spin_at() { # URL COUNT MODE ROUND PARALLEL N
  local i pids=()
  for ((i = 0; i < $5; i++)); do
    curl -fsS --max-time 120 "$1/spin.php?geo=$GEO&n=$6" >"$STACK_DIR/spin-$i.json" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for ((i = 0; i < $5; i++)); do
    php -r '$j = json_decode(file_get_contents($argv[5]), true); $j += ["part" => "children", "count" => (int) $argv[1], "mode" => $argv[2], "round" => (int) $argv[3], "parallel" => (int) $argv[4]];
      echo json_encode($j), "\n";' "$2" "$3" "$4" "$5" "$STACK_DIR/spin-$i.json"
  done
}
# Warm: eight children in each server, opcache filled, every memo of the geo filled.
spin_at "$URL_SPIN_ON" 1 warm 0 8 1000 >/dev/null
spin_at "$URL_SPIN_OFF" 0 warm 0 8 1000 >/dev/null
for ((round = 1; round <= ROUNDS; round++)); do
  for count in $(((round % 2)) && echo "1 0" || echo "0 1"); do
    url=$URL_SPIN_OFF
    ((count)) && url=$URL_SPIN_ON
    log "8 children, round $round, count_answers=$count: one child alone, then eight at once ($N_CHILD calls each)"
    spin_at "$url" "$count" one "$round" 1 "$N_CHILD" >>"$RAW/children.jsonl"
    spin_at "$url" "$count" eight "$round" 8 "$N_CHILD" >>"$RAW/children.jsonl"
  done
done
stack_stop_litespeed

# ---- 3. CPU per request behind OpenLiteSpeed -------------------------------------------------
# The servers on the last CPU, wrk on the others (as 22-lsphp.sh); the server processes'
# own CPU time (as 23-cache.sh), which other jobs on the machine do not inflate.
SERVER_CPU= CLIENT=()
if ((CPUS >= 2)); then
  SERVER_CPU=$LAST
  CLIENT=(taskset -c "0-$((CPUS - 2))")
fi
server_ticks() { # SERVER ROOT: ticks (user + system, with reaped children) of OLS and lsphp
  local root=$1 pids=() p c
  read -r p <"$root/run/ols.pid" && pids+=("$p")
  [[ -f $root/run/lsphp/pids ]] && while read -r p; do pids+=("$p"); done <"$root/run/lsphp/pids"
  for p in "${pids[@]}"; do
    for c in $(pgrep -P "$p"); do pids+=("$c"); done
  done
  for p in "${pids[@]}"; do cat "/proc/$p/stat" 2>/dev/null; done |
    awk '{sub(/^.*\) /, ""); t += $12 + $13 + $14 + $15} END {print t + 0}'
}
TICK_US=$((1000000 / $(getconf CLK_TCK)))
STACK_SERVER_CPUS=$SERVER_CPU
log "starting OLS + lsphp twice on CPU ${SERVER_CPU:-any}: count_answers=1 and =0"
start_server http-on 1
URL_ON=$STACK_URL ROOT_ON=$STACK_OLS_ROOT
start_server http-off 0
URL_OFF=$STACK_URL ROOT_OFF=$STACK_OLS_ROOT
STACK_SERVER_CPUS=
# Counting is what each server says it is (one child's traffic()).
on_says=$(curl -fsS "$URL_ON/spin.php?n=1" | php -r 'echo json_decode(stream_get_contents(STDIN), true)["counting"] ? "on" : "off";')
off_says=$(curl -fsS "$URL_OFF/spin.php?n=1" | php -r 'echo json_decode(stream_get_contents(STDIN), true)["counting"] ? "on" : "off";')
[[ $on_says == on && $off_says == off ]] || { log "counting is $on_says / $off_says where on / off was asked"; exit 1; }
export DW_BENCH_GEOS
DW_BENCH_GEOS=$(geos 250 countries)
for url in "$URL_ON" "$URL_OFF"; do "${CLIENT[@]}" wrk -t1 -c8 -d1s -s "$STACK_DIR/geos.lua" "$url" >/dev/null; done
for ((round = 1; round <= ROUNDS; round++)); do
  for count in $(((round % 2)) && echo "1 0" || echo "0 1"); do
    url=$URL_OFF root=$ROOT_OFF
    ((count)) && url=$URL_ON root=$ROOT_ON
    log "front.php under wrk, round $round, count_answers=$count"
    out=$RAW/wrk-$count-$round.txt
    t0=$(server_ticks "$root")
    "${CLIENT[@]}" wrk -t1 -c8 -d"${SECONDS_PER_RUN}s" -s "$STACK_DIR/geos.lua" "$url" >"$out"
    t1=$(server_ticks "$root")
    requests=$(awk '/ requests in / {print $1}' "$out")
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    errors=$(grep -cE 'Socket errors|Non-2xx' "$out" || true)
    awk -v c="$count" -v r="$round" -v n="$requests" -v t=$((t1 - t0)) -v us="$TICK_US" -v rps="$rps" -v e="$errors" \
      'BEGIN {printf "{\"part\":\"http\",\"count\":%d,\"round\":%d,\"requests\":%d,\"ticks\":%d,\"cpu_us\":%.3f,\"rps\":%s,\"errors\":%d}\n", c, r, n, t, (n > 0 ? t * us / n : 0), rps, e}' >>"$RAW/http.jsonl"
  done
done
stack_stop_litespeed

# ---- 4. private memory per child at 2,500 regions --------------------------------------------
install_snapshot 2500
DW_BENCH_GEOS=$(geos 2500)
children_uss() { # SERVER ROOT VARIANT
  local parent pid
  parent=$(head -n1 "$1/run/lsphp/pids")
  for pid in $(pgrep -P "$parent"); do
    awk -v v="$2" -v pid="$pid" '/^Private_Clean:/ {pc = $2} /^Private_Dirty:/ {pd = $2} /^Rss:/ {rss = $2}
      END {printf "{\"part\":\"memory\",\"variant\":\"%s\",\"pid\":%d,\"uss_kb\":%d,\"rss_kb\":%d}\n", v, pid, pc + pd, rss}' \
      "/proc/$pid/smaps_rollup"
  done
}
for variant in routing-off count-off count-on count-off-page count-off-buckets count-on-buckets; do
  log "2,500 regions, $variant: 8 children under wrk, then their private memory"
  page=/
  case $variant in
    routing-off) start_server "mem-$variant" 1 DW_ROUTING=off ;;
    count-off) start_server "mem-$variant" 0 ;;
    count-on) start_server "mem-$variant" 1 ;;
    count-off-page)
      # The bucketed page on the table without buckets (its bucket is then null): the
      # page's own cost, the control of the two below.
      start_server "mem-$variant" 0
      cp bench/count/bucketed.php "$STACK_DIR/mem-$variant/docroot/bucketed.php"
      chmod a+r "$STACK_DIR/mem-$variant/docroot/bucketed.php"
      page=/bucketed.php
      ;;
    count-off-buckets | count-on-buckets)
      # N = 1024 and stored assignments (bucket-snapshot.php), the table preloaded in
      # MINIT as the others; each request a random bucket: the children answer many
      # (region, origin) pairs, where a plain visitor of a geo reaches one.
      install_snapshot 2500b
      start_server "mem-$variant" "$([[ $variant == count-on-buckets ]] && echo 1 || echo 0)"
      cp bench/count/bucketed.php "$STACK_DIR/mem-$variant/docroot/bucketed.php"
      chmod a+r "$STACK_DIR/mem-$variant/docroot/bucketed.php"
      page=/bucketed.php
      ;;
  esac
  DW_BENCH_PATH=$page wrk -t1 -c8 -d2s -s "$STACK_DIR/geos.lua" "$STACK_URL" >/dev/null
  children_uss "$STACK_OLS_ROOT" "$variant" >>"$RAW/memory.jsonl"
  stack_stop_litespeed "$STACK_OLS_ROOT"
done

cut -d' ' -f1-3 /proc/loadavg >"$RAW/load-end.txt"
php bench/count/report.php "$RAW"
