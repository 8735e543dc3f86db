#!/usr/bin/env bash
# dw-agent's /metrics and /healthz beside the worst counter file and clients that never
# read (issue 40, finding 5): runs tests/slow-clients/run, whose render phase asks 100
# scrapes and 100 /healthz of the release agent serially, first alone (the baseline) and
# then beside 64 clients that send GET /metrics and never read, with the most hostile
# counter file the layout allows in --answers-dir, and reports its p99s, answers and the
# agent's peak resident size. A bench/ plug-in (see bench/README.md): prints its Markdown
# section on stdout, logs on stderr, raw results in $DW_BENCH_RAW.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/31-metrics-render}
mkdir -p "$RAW"
log() { echo "31-metrics-render: $*" >&2; }
[[ -x target/release/dw-agent ]] || { log "target/release/dw-agent not built (make build)"; exit 1; }
log "tests/slow-clients/run (about 3 minutes)"
status=0
DW_SLOW_CONNECTIONS=${DW_SLOW_CONNECTIONS:-200} DW_SLOW_SCRAPES=${DW_SLOW_SCRAPES:-10} \
  tests/slow-clients/run >"$RAW/slow-clients.log" 2>&1 || status=$?
cat "$RAW/slow-clients.log" >&2
cp target/test-logs/slow-clients/render-*.txt "$RAW/" 2>/dev/null || true
line=$(grep -m1 '^    p99 scrape:' "$RAW/slow-clients.log" || true)
[[ -n $line ]] || { log "no p99 line: the render phase did not run"; exit 1; }
read -r scrape_base scrape_attack health_base health_attack < <(
  sed -E 's/.*baseline ([0-9.]+) ms, attack ([0-9.]+) ms; p99 \/healthz: baseline ([0-9.]+) ms, attack ([0-9.]+) ms.*/\1 \2 \3 \4/' <<<"$line")
size=$(sed -nE 's/^    \/metrics with the maximal file: ([0-9]+) bytes/\1/p' "$RAW/slow-clients.log")
render=$(grep -E '^  (ok|FAIL) +render:' "$RAW/slow-clients.log" | sed -E 's/^  (ok|FAIL) +render: //')
healthz=$(grep -E '^  (ok|FAIL) +healthz:' "$RAW/slow-clients.log" | sed -E 's/^  (ok|FAIL) +healthz: //')
rss=$(grep -E '^  (ok|FAIL) +rss:' "$RAW/slow-clients.log" | sed -nE 's/.* ([0-9]+) KiB, within.*/\1/p; s/.*size ([0-9]+) KiB within.*/\1/p' | head -n1)
met() { awk -v v="$1" -v t="$2" 'BEGIN { print (v + 0 <= t + 0) ? "yes" : "no" }'; }
mib() { awk -v k="$1" 'BEGIN { if (k == "") print "?"; else printf "%.1f MiB", k / 1024 }'; }
cat <<MD
## dw-agent /metrics beside a maximal counter file and clients that never read (\`bench/31-metrics-render.sh\`)

How measured: \`tests/slow-clients/run\` (its render phase) against the release \`dw-agent\`
of \`scripts/stack\` on loopback: the most hostile counter file the layout allows in
\`--answers-dir\` (\`crates/agent/examples/answers_file.rs\`: 4,096 label sets of 128-byte
values the agent escapes threefold; /metrics is $size bytes), then 100 scrapes of
\`/metrics\` and 100 \`/healthz\` with curl, one after the other (3 s timeout each, 0.1 s
apart), first alone (the baseline), then beside 64 clients from 127.0.0.2 (uid 65534) that
each send \`GET /metrics\` and never read, reopening every 3 s. Times are curl's
\`time_total\`, so a scrape includes the render and the 6.5 MB transfer. Peak resident size is
the agent's VmHWM over the whole suite. 2 cores shared with every other process.

| Measure | Result | Target | Met |
|---|---|---|---|
| Scrape, p99, alone | $scrape_base ms | - | - |
| Scrape, p99, beside 64 clients that never read | $scrape_attack ms ($render) | >= 99 % answered | $( [[ $status == 0 ]] && echo yes || echo "see log" ) |
| \`/healthz\`, p99, alone | $health_base ms | - | - |
| \`/healthz\`, p99, beside them | $health_attack ms ($healthz) | <= 50 ms | $(met "$health_attack" 50) |
| Agent peak resident size (VmHWM) | $(mib "$rss") | <= 96 MiB (534 MiB before) | $(met "${rss:-999999}" 98304) |
MD
exit "$status"
