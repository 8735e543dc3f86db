#!/usr/bin/env bash
# The long chaos run (tests/chaos/run): a 3-member etcd, three nodes (php-fpm and
# OpenLiteSpeed + lsphp), load, a dwctl writer and a seeded nemesis, every answer recomputed
# by the userland twin from etcd's history. DW_CHAOS_BENCH_DURATION (default 10m; 1m with
# DW_BENCH_QUICK=1) and DW_CHAOS_BENCH_SEED (default 424242). A bench/ plug-in (see
# bench/README.md): its figures, not a pass/fail verdict, though a wrong answer is reported.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/40-chaos}
mkdir -p "$RAW"
duration=${DW_CHAOS_BENCH_DURATION:-10m}
[[ ${DW_BENCH_QUICK:-0} == 1 ]] && duration=${DW_CHAOS_BENCH_DURATION:-1m}
seed=${DW_CHAOS_BENCH_SEED:-424242}
echo "40-chaos: tests/chaos/run --duration $duration --seed $seed" >&2
# The LiteSpeed node's pool restarts are LiteSpeed's own detached restart (the default,
# DW_CHAOS_LSPHP_RESTART=graceful); its kill-lsphp faults' OpenLiteSpeed stalls are counted
# apart (docs/deploy-litespeed.md), as in `make chaos`.
DW_CHAOS_LSPHP_RESTART=${DW_CHAOS_LSPHP_RESTART:-graceful} \
  tests/chaos/run --duration "$duration" --seed "$seed" --markdown "$RAW/chaos.md" >"$RAW/run.log" 2>&1
rc=$?
echo "## Chaos soak: every answer checked against etcd (\`bench/40-chaos.sh\`)"
echo
echo "\`tests/chaos/run --duration $duration --seed $seed\` with \`DW_CHAOS_LSPHP_RESTART=${DW_CHAOS_LSPHP_RESTART:-graceful}\`; its checks ended:"
echo "\`$(grep -E '^chaos: [0-9]+ passed' "$RAW/run.log" | tail -n1)\` (exit $rc). Failed checks, if any:"
echo
grep -E '^  FAIL ' "$RAW/run.log" | sed 's/^  /- /' || echo "- none"
echo
if [[ -s $RAW/chaos.md ]]; then
  sed 's/^### /### /' "$RAW/chaos.md"
else
  echo "No figures were written; the log's tail:"
  echo '```'
  tail -n 20 "$RAW/run.log"
  echo '```'
fi
