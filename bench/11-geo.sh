#!/usr/bin/env bash
# resolve() at each step of the geography chain (issue 18): a country hit, a subdivision
# hit, a subdivision falling to its country, a country falling to its continent bucket,
# beside today's figure (the same country hit on a snapshot with no bucket or subdivision
# keys, the same with a stage open on this node, and, with DW_BENCH_BASELINE_SO naming a build from before the chain, that build). Wall clock (interleaved rounds, medians) and callgrind instructions.
# A bench/ plug-in (see bench/README.md): Markdown on stdout, logs on stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SO=${DW_BENCH_SO:-$ROOT/target/release/libdw_router.so}
BASELINE_SO=${DW_BENCH_BASELINE_SO:-}
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/11-geo}
QUICK=${DW_BENCH_QUICK:-0}
ROUNDS=7 TARGET_MS=200 CG_ITERATIONS=20000
if [[ $QUICK == 1 ]]; then ROUNDS=3 TARGET_MS=50 CG_ITERATIONS=2000; fi
[[ -f $SO ]] || { echo "11-geo: $SO not built (make build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "11-geo: valgrind missing (run inside scripts/devenv)" >&2; exit 1; }
mkdir -p "$RAW"
rm -f "$RAW"/*.json "$RAW"/cg-*
WORK=$(mktemp -d /dev/shm/dw-bench-geo.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
log() { echo "11-geo: $*" >&2; }

# Today's shape: 250 regions of country keys (bench/10-router.sh's snapshot). The chain's
# shape: the same plus a subdivision key and Europe's bucket.
php examples/generate.php --regions 250 --out "$WORK/plain.json" >/dev/null
php -r '$s = json_decode(file_get_contents($argv[1]), true);
  $r = fn ($shard, $o) => json_encode(["shard" => $shard, "origins" => $o, "weight" => array_fill_keys($o, 50)]);
  $s["kvs"]["/dw/routing/region/US-CA"] = $r("us-2", ["sjc-a", "iad-a"]);
  $s["kvs"]["/dw/routing/region/continent/EU"] = $r("eu-1", ["fra-a", "ams-a"]);
  file_put_contents($argv[2], json_encode($s));' "$WORK/plain.json" "$WORK/chain.json"
# A stage open, this node in its cohort (issue 22): the agent's overlay is in kvs (region/DE
# staged to another shard) and the top-level `stages` names it; no stage key is copied.
php -r '$s = json_decode(file_get_contents($argv[1]), true);
  $s["kvs"]["/dw/routing/region/DE"] = json_encode(["shard" => "eu-staged", "origins" => ["fra-a", "ams-a"], "weight" => ["fra-a" => 50, "ams-a" => 50]]);
  $s["stages"] = [["id" => "bench-canary", "revision" => $s["revision"]]];
  file_put_contents($argv[2], json_encode($s));' "$WORK/plain.json" "$WORK/staged.json"

PHP_ARGS=(-d opcache.enable_cli=1 -d opcache.jit=off)
VARIANTS_CHAIN="DE,US-CA,US-NY,DE-BY,SI,DE:visitor-7,SI:visitor-7"
VARIANTS_PLAIN="DE,DE:visitor-7"
run_set() { # label so snapshot variants
  local label=$1 so=$2 snapshot=$3 variants=$4
  log "wall clock: $label"
  php "${PHP_ARGS[@]}" -d "extension=$so" -d "dw_router.snapshot_path=$snapshot" bench/router/geo.php \
    wall "$ROUNDS" "$TARGET_MS" "$variants" >"$RAW/wall-$label.json"
  log "callgrind: $label"
  valgrind --tool=callgrind --dump-before=usleep --callgrind-out-file="$RAW/cg-$label.out" \
    php "${PHP_ARGS[@]}" -d "extension=$so" -d "dw_router.snapshot_path=$snapshot" bench/router/geo.php \
    callgrind "$CG_ITERATIONS" "$variants" >"$RAW/cg-$label.order.json" 2>"$RAW/cg-$label.log" \
    || { tail -20 "$RAW/cg-$label.log" >&2; exit 1; }
}
run_set chain "$SO" "$WORK/chain.json" "$VARIANTS_CHAIN"
run_set plain "$SO" "$WORK/plain.json" "$VARIANTS_PLAIN"
run_set staged "$SO" "$WORK/staged.json" "$VARIANTS_PLAIN"
if [[ -n $BASELINE_SO && -f $BASELINE_SO ]]; then
  run_set before "$BASELINE_SO" "$WORK/plain.json" "$VARIANTS_PLAIN"
fi
php bench/router/geo-report.php "$RAW" "$QUICK"
