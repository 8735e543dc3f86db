#!/usr/bin/env bash
# What counting resolve()'s answers costs (issue 29, docs/traffic.md): callgrind
# instructions inside resolve()'s handler per call, with dw_router.count_answers=1 beside
# =0, for the memoised call (no sticky key), a sticky call and a bucketed call (issue 41:
# a visitor bucket, on the same snapshot with policy/global's buckets at 1024), at 250
# regions.
# A bench/ plug-in (see bench/README.md): prints its Markdown section on stdout, logs on
# stderr, raw results in $DW_BENCH_RAW.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SO=${DW_BENCH_SO:-$ROOT/target/release/libdw_router.so}
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/12-count}
QUICK=${DW_BENCH_QUICK:-0}
# Optional: a build of the commit before counting existed (the same resolve() without any
# counting code), for a third column. Not built here: give its path.
BASELINE=${DW_BENCH_BASELINE_SO:-}
# Optional: a build of an earlier commit with counting (e.g. the one before a change to the
# counting protocol), measured with counting on beside this build's count_answers=1.
PREVIOUS=${DW_BENCH_PREVIOUS_SO:-}
[[ -f $SO ]] || { echo "12-count: $SO not built (make build)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "12-count: valgrind missing (run inside scripts/devenv)" >&2; exit 1; }
mkdir -p "$RAW"
rm -f "$RAW"/cg-* "$RAW"/polled-*
WORK=$(mktemp -d /dev/shm/dw-bench-count.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
N=20000
[[ $QUICK == 1 ]] && N=5000
log() { echo "12-count: $*" >&2; }

php examples/generate.php --regions 250 --out "$WORK/snapshot.json" >/dev/null
# The same snapshot with visitor buckets on (N = 1024, each region its default assignment).
php -r '$s = json_decode(file_get_contents($argv[1]), true); $k = $s["prefix"] . "policy/global";
  $p = json_decode($s["kvs"][$k] ?? "{}", true) ?: []; $p["buckets"] = 1024; $s["kvs"][$k] = json_encode($p);
  file_put_contents($argv[2], json_encode($s, JSON_UNESCAPED_SLASHES));' "$WORK/snapshot.json" "$WORK/snapshot-buckets.json"
# An old file: a snapshot younger than the reader's change window is checked again during
# the first run (a reload inside its measured loop, seen as 18 instructions a call).
touch -d "-1 minute" "$WORK/snapshot.json" "$WORK/snapshot-buckets.json"
# Instructions per call in part 2 (the measured loop) of a callgrind run.
per_call() { # mode count_answers [so] [tag]
  local tag=${4:-$2}
  local out=$RAW/cg-$1-$tag.out try
  # When the router's watcher ends up polling (seen now and then on the shared box, the
  # cause not pinned down: no inotify instance to be had is the likely one), every call
  # also reads the clock, ~40-80 instructions that are not resolve()'s own. Such a run is
  # done again, at most 3 times.
  for try in 1 2 3; do
    rm -rf "$WORK/answers"
    valgrind --tool=callgrind --dump-before=usleep --toggle-collect='*resolve_handler*' \
      --callgrind-out-file="$out" \
      php -d "extension=${3:-$SO}" -d "dw_router.count_answers=$2" -d "dw_router.answers_dir=$WORK/answers" \
      bench/count/loop.php "$WORK/snapshot$([[ $1 == bucket ]] && echo -buckets).json" "$1" "$N" 2>"$RAW/cg-$1-$tag.log" >/dev/null \
      || { tail -20 "$RAW/cg-$1-$tag.log" >&2; exit 1; }
    rm -f "$RAW/polled-$1-$tag"
    grep -q clock_gettime "$out.2" || break
    : >"$RAW/polled-$1-$tag"
    log "$1 $tag: the router polled, run $try of 3"
  done
  local ir
  ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$out.2")
  awk -v ir="$ir" -v n="$N" 'BEGIN { printf "%.1f", ir / n }'
}
declare -A ir
for mode in memo sticky bucket; do
  for on in 0 1; do
    log "callgrind, $mode, count_answers=$on, $N calls"
    ir[$mode-$on]=$(per_call "$mode" "$on")
  done
  if [[ -n $BASELINE && $mode != bucket ]]; then
    log "callgrind, $mode, baseline $BASELINE, $N calls"
    ir[$mode-base]=$(per_call "$mode" base "$BASELINE")
  fi
  if [[ -n $PREVIOUS && $mode != bucket ]]; then
    log "callgrind, $mode, previous build $PREVIOUS, count_answers=1, $N calls"
    ir[$mode-prev]=$(per_call "$mode" 1 "$PREVIOUS" prev)
  fi
done
load=$(cut -d' ' -f1-3 /proc/loadavg)
cat <<MD
## Counting answers: resolve() with and without dw_router.count_answers

How measured: \`bench/12-count.sh\`. One PHP CLI process per figure, 250 regions
(\`examples/generate.php\`), the extension's default router of an explicit path;
callgrind counts instructions inside \`resolve()\`'s handler only
(\`--toggle-collect='*resolve_handler*'\`), over $N calls after a warm-up that fills every
memo and registers every label set (the warm-up is callgrind's part 1, the measured loop
part 2). \`memo\`: no sticky key, 50 country codes in turn (the front controller's call).
\`sticky\`: the same with 64 sticky keys (no memo: the label id from the table's sticky cache).
\`bucket\`: the same with visitor buckets 0 to 63, on the same snapshot with
\`policy/global\`'s \`buckets\` at 1024 (no country memo: the answering region's
assignment, a binary search of its runs, then the pair's route array; the label id from
the same cache as sticky answers). Target (issue 41): a bucketed call costs no more than
the sticky call, both with counting on.
Instruction counts do not depend on the machine's load (${load} during this run); the
figures under load (two processes at once, eight lsphp children, CPU per request behind
OpenLiteSpeed, memory per child) are \`13-count-load.sh\`'s, in the next section.
MD
if [[ -n $BASELINE ]]; then
  echo
  echo "\`before\`: the build before counting existed (\`DW_BENCH_BASELINE_SO\`); \`added\` and \`ratio\` compare counting on with it."
  echo
  echo "| call | before | count_answers=0 | count_answers=1 | added | ratio | target |"
  echo "|---|---|---|---|---|---|---|"
else
  echo
  echo "| call | count_answers=0 | count_answers=1 | added | ratio | target |"
  echo "|---|---|---|---|---|---|"
fi
for mode in memo sticky bucket; do
  off=${ir[$mode-0]} on=${ir[$mode-1]} base=${ir[$mode-base]:-}
  [[ $mode == bucket ]] && base=
  ref=${base:-$off}
  added=$(awk -v a="$on" -v b="$ref" 'BEGIN { printf "%.1f", a - b }')
  ratio=$(awk -v a="$on" -v b="$ref" 'BEGIN { printf "%.3f", a / b }')
  met() { awk -v v="$1" -v t="$2" 'BEGIN { print (v <= t ? "met" : "not met") }'; }
  if [[ $mode == bucket ]]; then
    target="≤ sticky's ${ir[sticky-1]} (counting on): $(met "$on" "${ir[sticky-1]}")"
  elif [[ $mode == memo ]]; then
    target="≤ 8 added: $(met "$added" 8); ≤ 1.10x: $(met "$ratio" 1.10)"
  else
    target="≤ 1.10x: $(met "$ratio" 1.10)"
  fi
  if [[ -n $BASELINE && $mode == bucket ]]; then
    echo "| $mode | - | $off | $on | $added | ${ratio}x | $target |"
    continue
  fi
  echo "| $mode |${base:+ $base |} $off | $on | $added | ${ratio}x | $target |"
done
if [[ -n $PREVIOUS ]]; then
  echo
  echo "Counting on, this build against an earlier build with counting (\`DW_BENCH_PREVIOUS_SO\`$( [[ -n ${DW_BENCH_PREVIOUS_NAME:-} ]] && echo ": $DW_BENCH_PREVIOUS_NAME")), both \`count_answers=1\`:"
  echo
  echo "| call | earlier build | this build | change | target |"
  echo "|---|---|---|---|---|"
  for mode in memo sticky; do
    prev=${ir[$mode-prev]} on=${ir[$mode-1]}
    change=$(awk -v a="$on" -v b="$prev" 'BEGIN { printf "%+.2f%%", (a / b - 1) * 100 }')
    within=$(awk -v a="$on" -v b="$prev" 'BEGIN { d = a / b - 1; if (d < 0) d = -d; print (d <= 0.02 ? "met" : "not met") }')
    echo "| $mode | $prev | $on | $change | within 2 %: $within |"
  done
fi
polled=$(cd "$RAW" && for f in polled-*; do [[ -e $f ]] && printf '%s ' "${f#polled-}"; done; true)
if [[ -n $polled ]]; then
  echo
  echo "Polled in all 3 runs (the router's watcher polled: each call then also reads the clock, not resolve()'s own cost): ${polled% }."
fi
