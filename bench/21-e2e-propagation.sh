#!/usr/bin/env bash
# Propagation through the whole stack: from an etcd commit to the first HTTP response that
# carries the new revision, p50/p99 over hundreds of changes, at the example's 32 regions
# and at 2,500 regions, on each web stack: OpenLiteSpeed -> lsphp (where LiteSpeed is
# found) and nginx -> php-fpm. A bench/ plug-in (see bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
require_built_extension
mkdir -p "$RAW"
rm -f "$RAW"/*.json
CHANGES=500
[[ $QUICK == 1 ]] && CHANGES=50

SERVERS=(nginx)
if stack_litespeed_available 2>"$RAW/litespeed-why.txt"; then SERVERS=(litespeed nginx); fi

for server in "${SERVERS[@]}"; do
  STACK_SERVER=$server STACK_HTTP_PORT= STACK_ETCD= STACK_AGENT_METRICS=
  stack_init "$(mktemp -d /tmp/dw-bench-prop.XXXXXX)"
  trap 'stack_stop; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT
  log "$server: starting the stack in $STACK_DIR"
  stack_start
  stack_seed >/dev/null
  stack_wait_revision "$(stack_etcd_revision)"

  log "$server: $CHANGES changes at 32 regions"
  php tests/e2e/lib/propagation.php series "$STACK_ETCD" "$STACK_URL" --changes "$CHANGES" --key region/DE \
    >"$RAW/series-$server-32.json"
  # Changes 2 ms after the previous one became visible: inside dw-agent's
  # --coalesce-window (10 ms), so most of them wait for the window; what that costs.
  log "$server: $CHANGES changes at 32 regions, 2 ms apart (inside the coalescing window)"
  php tests/e2e/lib/propagation.php series "$STACK_ETCD" "$STACK_URL" --changes "$CHANGES" --key region/DE \
    --gap-ms 2 >"$RAW/series-$server-32-burst.json"

  log "$server: seeding 2,500 regions"
  php examples/generate.php --regions 2500 --out "$STACK_DIR/gen-2500.json" >/dev/null
  revision=$(php tests/e2e/lib/propagation.php seed "$STACK_ETCD" "$STACK_DIR/gen-2500.json")
  stack_wait_revision "$revision"
  log "$server: $CHANGES changes at 2,500 regions"
  php tests/e2e/lib/propagation.php series "$STACK_ETCD" "$STACK_URL" --changes "$CHANGES" --key region/DE \
    >"$RAW/series-$server-2500.json"
  snapshot_bytes=$(stat -c %s "$STACK_SNAPSHOT")
  stack_stop
  rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"
  trap - EXIT
done

php -r '
[$raw, $quick, $bytes, $why] = [$argv[1], $argv[2] === "1", (int) $argv[3], trim((string) @file_get_contents($argv[1] . "/litespeed-why.txt"))];
$stacks = ["litespeed" => "OpenLiteSpeed -> lsphp (PHP_LSAPI_CHILDREN=8)", "nginx" => "nginx -> php-fpm (4 static workers)"];
echo "## Propagation: etcd commit to the first HTTP response with the change\n\n";
if ($quick) echo "> Quick run (DW_BENCH_QUICK=1): numbers not to quote.\n\n";
echo "How measured: the whole stack of `make demo` (etcd, dw-agent, PHP with `dw_router.so` behind\n",
     "a web server), once with OpenLiteSpeed in front of lsphp and once with nginx in front of\n",
     "php-fpm. A client (`tests/e2e/lib/propagation.php series`) writes a changed\n",
     "`region/DE` through etcd\x27s JSON gateway; the clock starts when etcd answers the put (the change\n",
     "is committed) and stops at the end of the first HTTP response of `php/front.php` whose\n",
     "`X-DW-Revision` is at least the put\x27s revision, polling back to back (one HTTP/1.0 request\n",
     "at a time, about 0.3 ms each), then waits 20 ms before the next change. The path measured:\n",
     "etcd watch -> dw-agent -> temp file, fsync, rename -> inotify in each worker -> parse -> swap.\n\n",
     "| stack | regions | changes | measured | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | target p99 <= 20 ms |\n|---|---|---|---|---|---|---|---|---|\n";
foreach ($stacks as $server => $label) foreach (["32", "2500", "32-burst"] as $n) {
    $file = "$raw/series-$server-$n.json";
    if (!is_file($file)) continue;
    $s = json_decode(file_get_contents($file), true);
    $burst = $n === "32-burst";
    printf("| %s | %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %s |\n", $label,
        $burst ? "32, changes 2 ms apart (inside `--coalesce-window`)" : number_format((int) $n), $s["changes"], $s["measured"],
        $s["p50_ms"], $s["p90_ms"], $s["p99_ms"], $s["max_ms"],
        $burst ? "(a change within 10 ms of a publication waits up to 10 ms)" : ($s["p99_ms"] <= 20 && $s["timeouts"] === 0 ? "met" : "not met"));
}
if (!is_file("$raw/series-litespeed-32.json")) echo "\nOpenLiteSpeed + lsphp not measured: $why\n";
printf("\nThe 2,500-region snapshot is %s bytes; every change rewrites and reparses all of it.\n", number_format($bytes));
' "$RAW" "$QUICK" "$snapshot_bytes"
