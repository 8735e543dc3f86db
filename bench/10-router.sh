#!/usr/bin/env bash
# The RegionRouter extension against its userland alternatives (issue 2, section 8):
#   1. resolve() per call at 10, 250 and 2,500 regions: extension, userland twin (APCu),
#      compiled routing file (opcache), floor; wall clock and callgrind instructions
#   2. new RegionRouter() + resolve() per request against the floors, and what each engine
#      shortcut buys (callgrind with each one off)
#   3. reload latency: snapshots renamed into place while a worker keeps routing
#   4. memory a worker process adds for a 2,500-region table
# A bench/ plug-in (see bench/README.md): prints its Markdown section on stdout, logs on
# stderr, raw results in $DW_BENCH_RAW.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SO=${DW_BENCH_SO:-$ROOT/target/release/libdw_router.so}
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/10-router}
QUICK=${DW_BENCH_QUICK:-0}
HERE=$ROOT/bench/router

[[ -f $SO ]] || { echo "10-router: $SO not built (make build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "10-router: valgrind missing (run inside scripts/devenv)" >&2; exit 1; }
mkdir -p "$RAW"
rm -f "$RAW"/*.json "$RAW"/*.jsonl "$RAW"/cg-*

# The snapshots live on tmpfs, as in production (/dev/shm is private to this devenv run).
WORK=$(mktemp -d /dev/shm/dw-bench-router.XXXXXX)
READER_PID=
cleanup() {
  [[ -n $READER_PID ]] && kill "$READER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

SIZES=(10 250 2500)
ROUNDS=5 TARGET_MS=250 RELOADS=200
if [[ $QUICK == 1 ]]; then ROUNDS=2 TARGET_MS=50 RELOADS=40; fi

# PHP 8.4 as a production node runs it: opcache on (JIT off, Debian's default), and the
# compiled-file practice needs timestamps checked on every include (config must reload).
PHP_OPCACHE=(-d opcache.enable_cli=1 -d opcache.jit=off -d opcache.validate_timestamps=1
  -d opcache.revalidate_freq=0 -d opcache.file_update_protection=0 -d apc.enable_cli=1)
PHP_EXT=(-d "extension=$SO")

log() { echo "10-router: $*" >&2; }

log "fixtures in $WORK"
for n in "${SIZES[@]}"; do
  php examples/generate.php --regions "$n" --out "$WORK/snapshot-$n.json" >/dev/null
  php -r 'require $argv[1]; DwBench\compile_snapshot($argv[2], $argv[3]);' \
    "$HERE/lib.php" "$WORK/snapshot-$n.json" "$WORK/compiled-$n.php"
done

for n in "${SIZES[@]}"; do
  log "wall clock, $n regions ($ROUNDS rounds)"
  php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-$n.json" \
    "$HERE/resolve.php" --dir "$WORK" --size "$n" --rounds "$ROUNDS" --target-ms "$TARGET_MS" wall \
    >"$RAW/wall-$n.json"
done

# Optional: the same with the tracing JIT on, extension vs floor only, at 250 regions.
log "wall clock with opcache.jit=tracing, 250 regions"
php "${PHP_OPCACHE[@]}" -d opcache.jit=tracing "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-250.json" \
  "$HERE/resolve.php" --dir "$WORK" --size 250 --rounds "$ROUNDS" --target-ms "$TARGET_MS" \
  --variants empty,floor,floor_method,ext,floor_request,ext_request wall >"$RAW/wall-jit-250.json"

for n in "${SIZES[@]}"; do
  # Iterations per variant: about 10 ms of wall-clock work each, 50 to 50,000 (the
  # counts hardly vary per iteration; valgrind runs some 50 times slower).
  plan=$(php -r '$w = json_decode(file_get_contents($argv[1]), true);
    echo json_encode(array_map(fn ($ns) => (int) max(50, min(50000, 1e7 / max($ns, 1))), $w["median"]));' "$RAW/wall-$n.json")
  log "callgrind, $n regions: $plan"
  echo "$plan" >"$RAW/cg-$n.plan.json"
  valgrind --tool=callgrind --dump-before=usleep --callgrind-out-file="$RAW/cg-$n.out" \
    php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-$n.json" \
    "$HERE/resolve.php" --dir "$WORK" --size "$n" callgrind "$plan" \
    >"$RAW/cg-$n.order.json" 2>"$RAW/cg-$n.valgrind.log" \
    || { tail -20 "$RAW/cg-$n.valgrind.log" >&2; exit 1; }
done

# Where the extension's instructions go at 250 regions: collect only inside its own
# handlers, one dump part per loop (part 2: the resolve loop, part 3: the per-request loop).
plan='{"ext":20000,"ext_request":20000}'
log "callgrind inside the extension's handlers, 250 regions: $plan"
echo "$plan" >"$RAW/cg-handlers.plan.json"
valgrind --tool=callgrind --dump-before=usleep --toggle-collect='*resolve_handler*' \
  --toggle-collect='*construct_handler*' --toggle-collect='*objects::get_constructor*' \
  --toggle-collect='*objects::create_object*' --toggle-collect='*objects::free_object*' \
  --callgrind-out-file="$RAW/cg-handlers.out" \
  php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-250.json" \
  "$HERE/resolve.php" --dir "$WORK" --size 250 callgrind "$plan" \
  >"$RAW/cg-handlers.order.json" 2>"$RAW/cg-handlers.valgrind.log" \
  || { tail -20 "$RAW/cg-handlers.valgrind.log" >&2; exit 1; }

# What each engine shortcut buys (src/engine.rs): the same loops at 250 regions with that
# shortcut alone turned off (ini dw_router.engine_shortcuts), and with every one off.
SHORTCUTS=(bare_new lean_objects frame_arguments immutable_routes route_memo)
plan='{"empty":20000,"ext":20000,"ext_request":20000}'
echo "$plan" >"$RAW/cg-ablation.plan.json"
for off in all "${SHORTCUTS[@]}" none; do
  case $off in
    all) setting=all ;;
    none) setting=none ;;
    *) setting=$(printf '%s\n' "${SHORTCUTS[@]}" | grep -vx "$off" | paste -sd,) ;;
  esac
  log "callgrind with engine shortcuts '$setting', 250 regions: $plan"
  valgrind --tool=callgrind --dump-before=usleep --callgrind-out-file="$RAW/cg-ablation-$off.out" \
    php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-250.json" \
    -d "dw_router.engine_shortcuts=$setting" \
    "$HERE/resolve.php" --dir "$WORK" --size 250 callgrind "$plan" \
    >"$RAW/cg-ablation-$off.order.json" 2>"$RAW/cg-ablation-$off.valgrind.log" \
    || { tail -20 "$RAW/cg-ablation-$off.valgrind.log" >&2; exit 1; }
done

# What a reload costs: the first router of a fresh process reads and parses the snapshot.
log "cold loads"
for n in "${SIZES[@]}"; do
  for rep in 1 2 3 4 5; do
    ext=$(php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-$n.json" \
      "$HERE/load.php" ext "$WORK/snapshot-$n.json")
    twin=$(php "${PHP_OPCACHE[@]}" "$HERE/load.php" twin "$WORK/snapshot-$n.json")
    echo "{\"size\":$n,\"ext_ns\":$ext,\"twin_ns\":$twin}"
  done
done >"$RAW/load.jsonl"

# The same in the core alone (crates/routing/benches/parse.rs): a first read and a reload
# after one region changed, wall clock (median of 51) and callgrind instructions of one call.
PARSE_BENCH=$(cargo bench --offline -p dw-routing --bench parse --no-run 2>&1 |
  grep -o 'target/release/deps/parse-[0-9a-f]*' | tail -1)
[[ -x $PARSE_BENCH ]] || { echo "10-router: dw-routing's parse bench did not build" >&2; exit 1; }
for n in "${SIZES[@]}"; do
  log "core read and reload, $n regions"
  DW_BENCH_JSON=1 "$PARSE_BENCH" "$WORK/snapshot-$n.json" 51 >"$RAW/parse-$n.json"
  for part in cold_start reload; do
    valgrind --tool=callgrind --toggle-collect="parse::$part" --callgrind-out-file="$RAW/cg-parse-$part-$n.out" \
      "$PARSE_BENCH" "$WORK/snapshot-$n.json" 1 >/dev/null 2>"$RAW/cg-parse-$part-$n.log" \
      || { tail -20 "$RAW/cg-parse-$part-$n.log" >&2; exit 1; }
  done
done

reload() { # label size mechanism
  local label=$1 n=$2 mechanism=$3 dir path first=1000000
  dir=$WORK/reload-$label
  mkdir -p "$dir"
  if [[ $mechanism == poll ]]; then
    # The directory does not exist when the router is built, so inotify cannot watch it
    # and the extension falls back to polling (src/watch.rs); the writer creates it.
    path=$dir/later/snapshot.json
  else
    path=$dir/snapshot.json
    cp "$WORK/snapshot-$n.json" "$path"
  fi
  log "reload latency, $label: $RELOADS renames 20 ms apart"
  php "${PHP_OPCACHE[@]}" "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$path" "$HERE/reload-reader.php" \
    "$dir/ready" $((first + RELOADS - 1)) $((RELOADS / 50 + 15)) >"$RAW/reload-$label.reader.json" &
  READER_PID=$!
  php "$HERE/reload-writer.php" "$WORK/snapshot-$n.json" "$path" "$first" "$RELOADS" 20 "$dir/ready" \
    >"$RAW/reload-$label.writer.json"
  wait "$READER_PID"
  READER_PID=
  echo "{\"label\":\"$label\",\"size\":$n,\"requested\":\"$mechanism\",\"loadavg\":\"$(cut -d' ' -f1 /proc/loadavg)\"}" \
    >"$RAW/reload-$label.meta.json"
}
reload inotify-250 250 inotify
reload inotify-2500 2500 inotify
reload poll-250 250 poll

log "memory, 2500 regions"
mem() { # label mode [php args...]
  local label=$1 mode=$2
  shift 2
  php "${PHP_OPCACHE[@]}" "$@" "$HERE/memory.php" "$mode" "$WORK/snapshot-2500.json" "$WORK/compiled-2500.php" \
    >"$RAW/memory-$label.json"
}
mem baseline-noext baseline
mem baseline-ext baseline "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-2500.json"
mem ext ext "${PHP_EXT[@]}" -d "dw_router.snapshot_path=$WORK/snapshot-2500.json"
mem twin twin
mem compiled compiled

php "$HERE/report.php" "$RAW" "$QUICK"
