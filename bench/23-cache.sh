#!/usr/bin/env bash
# Routed pages in LiteSpeed's page cache (issue 19), on OpenLiteSpeed + lsphp with LSCache on
# (ols-run start --cache, varying on the dw_sticky cookie, CF-IPCountry put into the cache key
# as ?dw_geo= by a vhost rewrite rule, as tests/cache/run sets it up), etcd and one dw-agent
# with --purge-url pointing at the cached server's php/purge.php:
#   1. throughput: the cached routed page (php/front.php, DW_CACHE_TTL=300: hits) beside the
#      same page uncached (DW_CACHE_TTL unset), interleaved rounds, medians, the ratio, over
#      22-lsphp.sh's "countries" geos at 250 regions
#   2. commit to purge: `dwctl region set` swaps a region's origin weights; the time from
#      dwctl's return to the first request of that page that is a miss made at the commit's
#      revision (polled every few ms), and beside it to the uncached page's new revision
# A bench/ plug-in (see bench/README.md): Markdown on stdout, log on stderr, raw results in
# $DW_BENCH_RAW; DW_BENCH_REPORT_ONLY=1 renders the section again from the last raw results.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
if ! why=$(stack_litespeed_available 2>&1); then
  printf '## OpenLiteSpeed page cache (LSCache): cached routed pages, commit to purge\n\nNot measured: %s\n' "$why"
  exit 0
fi
if [[ ${DW_BENCH_REPORT_ONLY:-0} == 1 ]]; then
  exec php bench/cache/report.php "$RAW"
fi
require_built_extension
mkdir -p "$RAW"
rm -f "$RAW"/*.jsonl "$RAW"/*.txt "$RAW"/params.json

ROUNDS=5 SECONDS_PER_RUN=4 CHANGES=${DW_BENCH_CACHE_CHANGES:-50}
if [[ $QUICK == 1 ]]; then ROUNDS=2 SECONDS_PER_RUN=2 CHANGES=${DW_BENCH_CACHE_CHANGES:-10}; fi
SIZE=250 TTL=300 GEO=DE
POLL_MS=2 BOUND_MS=5000
# The agent's settings, given explicitly so that the section states what ran.
COALESCE=10ms REPEAT=1s REPEAT_MS=1000
STACK_SERVER=litespeed
STACK_LSPHP_CHILDREN=8
# What tests/cache/run gives ols-run (scripts/stack passes STACK_OLS_ARGS on).
STACK_OLS_ARGS=(--cache --cache-vary-cookie dw_sticky,dw_bucket
  --rewrite-rule 'RewriteCond %{HTTP:CF-IPCountry} ^([A-Z0-9-]{1,8})$'
  --rewrite-rule 'RewriteRule ^/?(index\.php)?$ /index.php?dw_geo=%1 [QSA,L]')

PURGE=yes
if ! "$STACK_AGENT" --help 2>&1 | grep -q -- --purge-url; then
  PURGE="no: $STACK_AGENT has no --purge-url (build dw-agent from a tree with it)"
  log "$PURGE"
fi

stack_init "$(mktemp -d /tmp/dw-bench-cache.XXXXXX)"
# The logs are kept in $RAW/logs (the state directory is removed).
trap 'stack_stop; rm -rf "$RAW/logs"; cp -r "$STACK_DIR/logs" "$RAW/logs" 2>/dev/null; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT

# The table: examples/generate.php's 250 regions (22-lsphp.sh's), as the desired state that
# `dwctl apply` takes.
make_snapshots "$SIZE"
php -r '$s = json_decode(file_get_contents($argv[1]), true); $out = ["policy" => null, "regions" => []];
  foreach ($s["kvs"] as $k => $v) {
    $v = json_decode($v, true); unset($v["updated"]);
    if ($k === "/dw/routing/policy/global") $out["policy"] = $v;
    elseif (str_starts_with($k, "/dw/routing/region/")) $out["regions"][substr($k, 19)] = $v;
  }
  file_put_contents($argv[2], json_encode($out, JSON_UNESCAPED_SLASHES));' "$STACK_DIR/snapshot-$SIZE.json" "$STACK_DIR/routing.json"
write_geos_lua

CPUS=$(nproc)
SERVER_CPU= CLIENT=()
if ((CPUS >= 2)); then
  SERVER_CPU=$((CPUS - 1))
  CLIENT=(taskset -c "0-$((CPUS - 2))")
fi
cpu_busy() { awk -v c="cpu$1" '$1 == c {print $2 + $3 + $4 + $7 + $8 + $9}' /proc/stat; }
# The CPU time (ticks: user + system, with waited-for children) of one server's processes:
# OpenLiteSpeed's main process and its children, the lsphp parents it started and theirs.
# Unlike the busy time of the server CPU, it does not count what other jobs on the machine
# run there.
server_ticks() { # SERVER ROOT
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

CACHED_PORT=$(stack_free_port)
# Part 1 runs with an agent that does not purge (no change is made during it); part 2
# restarts it with --purge-url.
STACK_AGENT_ARGS=(--coalesce-window "$COALESCE")
log "starting etcd, dw-agent ${STACK_AGENT_ARGS[*]}"
stack_start_etcd
stack_start_agent
# Both servers on the server CPU; etcd and the agent are not pinned (they idle in part 1).
STACK_SERVER_CPUS=$SERVER_CPU
log "starting OLS --cache + lsphp twice: the page uncached (DW_CACHE_TTL unset) and cached (DW_CACHE_TTL=$TTL)"
STACK_HTTP_PORT= STACK_LSPHP_ENV=()
stack_start_litespeed plain yes
URL_PLAIN=$STACK_URL PLAIN_PORT=$STACK_HTTP_PORT ROOT_PLAIN=$STACK_OLS_ROOT
STACK_HTTP_PORT=$CACHED_PORT STACK_LSPHP_ENV=("DW_CACHE_TTL=$TTL")
stack_start_litespeed cached yes
URL_CACHED=$STACK_URL ROOT_CACHED=$STACK_OLS_ROOT
stack_seed "$STACK_DIR/routing.json" >"$STACK_DIR/logs/seed.log" 2>&1 || { cat "$STACK_DIR/logs/seed.log" >&2; exit 1; }
rev=$(stack_etcd_revision)
stack_wait_revision "$rev"
STACK_URL=$URL_PLAIN stack_wait_revision "$rev"
log "seeded $SIZE regions, revision $rev"

cache_of() { curl -fsS --max-time 5 -o /dev/null -H "CF-IPCountry: $2" -w '%header{x-litespeed-cache} %header{x-dw-revision}' "$1/"; }
cache_of "$URL_CACHED" "$GEO" >/dev/null
probe=$(cache_of "$URL_CACHED" "$GEO")
[[ $probe == "hit $rev" ]] || { log "the cached server does not cache the $GEO page (second request: '$probe')"; exit 1; }
probe_plain=$(cache_of "$URL_PLAIN" "$GEO")
[[ $probe_plain == " $rev" ]] || { log "the uncached server's page is not uncached at revision $rev ('$probe_plain')"; exit 1; }
child=$(stack_lsphp_children | head -n1)
PINNED=$(awk '/^Cpus_allowed_list:/ {print $2}' "/proc/$child/status" 2>/dev/null || echo unknown)
printf '{"measured":"%s","rounds":%d,"seconds":%d,"quick":"%s","lsphp":"%s","children":%d,"server_cpu":"%s","pinned":"%s","cpus":%d,"size":%d,"ttl":%d,"geo":"%s","changes":%d,"poll_ms":%d,"bound_ms":%d,"coalesce":"%s","repeat":"%s","purge":"%s","load":"%s"}\n' \
  "$(date -u +%Y-%m-%dT%H:%MZ)" "$ROUNDS" "$SECONDS_PER_RUN" "$QUICK" "$(lsphp -v | head -n1 | cut -d' ' -f1-3)" "$STACK_LSPHP_CHILDREN" \
  "$SERVER_CPU" "$PINNED" "$CPUS" "$SIZE" "$TTL" "$GEO" "$CHANGES" "$POLL_MS" "$BOUND_MS" "$COALESCE" "$REPEAT" "$PURGE" \
  "$(cut -d' ' -f1-3 /proc/loadavg)" >"$RAW/params.json"

# ---- 1. throughput: cached page vs the same page uncached ------------------------------------
export DW_BENCH_GEOS
DW_BENCH_GEOS=$(geos "$SIZE" countries)
# Warm-up: every geo's page into the cache (and the uncached server's children warm).
for url in "$URL_PLAIN" "$URL_CACHED"; do "${CLIENT[@]}" wrk -t1 -c8 -d1s -s "$STACK_DIR/geos.lua" "$url" >/dev/null; done
VARIANTS=(plain cached)
declare -A URL_OF=([plain]=$URL_PLAIN [cached]=$URL_CACHED) ROOT_OF=([plain]=$ROOT_PLAIN [cached]=$ROOT_CACHED)
for ((round = 1; round <= ROUNDS; round++)); do
  for ((k = 0; k < ${#VARIANTS[@]}; k++)); do
    variant=${VARIANTS[$(((round + k) % ${#VARIANTS[@]}))]}
    log "throughput round $round, $variant"
    out=$RAW/wrk-$variant-$round.txt
    busy0=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
    own0=$(server_ticks "${ROOT_OF[$variant]}")
    "${CLIENT[@]}" wrk -t1 -c8 -d"${SECONDS_PER_RUN}s" --latency -s "$STACK_DIR/geos.lua" "${URL_OF[$variant]}" >"$out"
    busy1=$([[ -n $SERVER_CPU ]] && cpu_busy "$SERVER_CPU" || echo 0)
    own1=$(server_ticks "${ROOT_OF[$variant]}")
    rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
    requests=$(awk '/ requests in / {print $1}' "$out")
    p99=$(awk '$1 == "99%" {print $2}' "$out")
    errors=$(grep -cE 'Socket errors|Non-2xx' "$out" || true)
    cpu_us=$(awk -v b=$((busy1 - busy0)) -v t="$TICK_US" -v r="$requests" 'BEGIN {printf "%.3f", (r > 0 ? b * t / r : 0)}')
    own_us=$(awk -v b=$((own1 - own0)) -v t="$TICK_US" -v r="$requests" 'BEGIN {printf "%.3f", (r > 0 ? b * t / r : 0)}')
    echo "{\"variant\":\"$variant\",\"round\":$round,\"rps\":$rps,\"requests\":$requests,\"p99\":\"$p99\",\"errors\":$errors,\"cpu_us\":$cpu_us,\"own_us\":$own_us}" >>"$RAW/throughput.jsonl"
  done
done
# Checked, not assumed: after the runs each geo's cached page is a hit.
hits=0 total=0
for g in ${DW_BENCH_GEOS//,/ }; do
  total=$((total + 1))
  [[ $(cache_of "$URL_CACHED" "$g") == hit* ]] && hits=$((hits + 1))
done
echo "{\"geos\":$total,\"hits\":$hits}" >"$RAW/hits.json"
log "after the runs: $hits of $total geos' cached pages are hits"
STACK_SERVER_CPUS=

# ---- 2. commit to purge ----------------------------------------------------------------------
if [[ $PURGE == yes ]]; then
  STACK_AGENT_ARGS+=(--purge-url "http://127.0.0.1:$CACHED_PORT/purge.php" --purge-repeat-after "$REPEAT")
  log "restarting dw-agent ${STACK_AGENT_ARGS[*]}"
  stack_stop_agent
  stack_start_agent
  value_a=$(php -r '$r = json_decode(file_get_contents($argv[1]), true)["regions"][$argv[2]]; echo json_encode($r, JSON_UNESCAPED_SLASHES);' "$STACK_DIR/routing.json" "$GEO")
  # The same region with its first two origins' weights swapped.
  value_b=$(php -r '$r = json_decode($argv[1], true); [$a, $b] = array_slice($r["origins"], 0, 2);
    [$r["weight"][$a], $r["weight"][$b]] = [$r["weight"][$b], $r["weight"][$a]]; echo json_encode($r, JSON_UNESCAPED_SLASHES);' "$value_a")
  log "$CHANGES changes of region/$GEO: $value_a <-> $value_b"
  php bench/cache/purge-latency.php "$STACK_DWCTL" "$STACK_ETCD" "$CACHED_PORT" "$PLAIN_PORT" "$GEO" "$value_a" "$value_b" \
    "$CHANGES" "$POLL_MS" "$BOUND_MS" "$REPEAT_MS" >"$RAW/purge.jsonl" || log "purge-latency.php reported failures (see $RAW/purge.jsonl)"
  curl -fsS --max-time 5 "http://$STACK_AGENT_METRICS/metrics" | grep -E '^dw_agent_purge_' >"$RAW/agent-purge-metrics.txt" || true
fi

stack_stop
php bench/cache/report.php "$RAW"
