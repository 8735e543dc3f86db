#!/usr/bin/env bash
# HTTP throughput of php/front.php behind nginx + php-fpm (pm=static, 4 workers each), at 250
# and 2,500 regions, in one run: the same page without routing, with the dw_router
# extension, and with the userland twin (APCu); then memory per php-fpm worker.
# A bench/ plug-in (see bench/README.md): Markdown on stdout, log on stderr, raw results in
# $DW_BENCH_RAW.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
require_built_extension
command -v wrk >/dev/null || { log "wrk missing (run inside scripts/devenv)"; exit 1; }
mkdir -p "$RAW"
rm -f "$RAW"/*.json "$RAW"/*.jsonl "$RAW"/*.txt

ROUNDS=5 SECONDS_PER_RUN=4
if [[ $QUICK == 1 ]]; then ROUNDS=1 SECONDS_PER_RUN=2; fi
SIZES=(250 2500)
VARIANTS=(none ext twin)

stack_init "$(mktemp -d /tmp/dw-bench-http.XXXXXX)"
trap 'stack_stop; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT

make_snapshots "${SIZES[@]}"
install_snapshot 250

# Three php-fpm masters of 4 workers: "fpm" with the extension, "fpm-twin" and "fpm-plain"
# without it (the twin is the fallback there; the plain one serves the page without routing).
fastcgi() { # pool, extra fastcgi_param lines
  printf '            include /etc/nginx/fastcgi_params;\n'
  printf '            fastcgi_param SCRIPT_FILENAME %s/php/front.php;\n' "$ROOT"
  printf '            fastcgi_param SCRIPT_NAME /front.php;\n'
  printf '%s\n' "$2"
  printf '            fastcgi_pass unix:%s/%s.sock;\n' "$STACK_DIR" "$1"
}
STACK_NGINX_EXTRA="        location /twin {
$(fastcgi fpm-twin "            fastcgi_param DW_SNAPSHOT_PATH $STACK_SNAPSHOT;")
        }
        location /none {
$(fastcgi fpm-plain "            fastcgi_param DW_ROUTING off;")
        }"
log "starting php-fpm x3 and nginx in $STACK_DIR"
stack_start_fpm fpm yes
stack_start_fpm fpm-twin no
stack_start_fpm fpm-plain no
stack_start_nginx

path_of() { case $1 in none) echo /none ;; ext) echo / ;; twin) echo /twin ;; esac; }
pool_of() { case $1 in none) echo fpm-plain ;; ext) echo fpm ;; twin) echo fpm-twin ;; esac; }
# CPU time (clock ticks, user + system) the pool's workers have used so far.
pool_ticks() { local pid total=0; for pid in $(stack_fpm_workers "$1"); do
  total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$total"; }
TICKS=$(getconf CLK_TCK)

write_geos_lua

for n in "${SIZES[@]}"; do
  install_snapshot "$n"
  export DW_BENCH_GEOS
  DW_BENCH_GEOS=$(geos "$n")
  for variant in ext twin; do
    stack_until "$variant serving revision $n" bash -c \
      '[[ $(curl -fsS -o /dev/null -D - "$0" | tr -d "\r" | awk -F": " "tolower(\$1)==\"x-dw-revision\"{print \$2}") == "$1" ]]' \
      "$STACK_URL$(path_of "$variant")" "$n"
  done
  # Warm every worker (opcache, APCu, the extension's table).
  for variant in "${VARIANTS[@]}"; do
    DW_BENCH_PATH=$(path_of "$variant") wrk -t1 -c8 -d1s -s "$STACK_DIR/geos.lua" "$STACK_URL" >/dev/null
  done
  for ((round = 1; round <= ROUNDS; round++)); do
    for variant in "${VARIANTS[@]}"; do
      log "$n regions, round $round, $variant"
      out=$RAW/wrk-$n-$variant-$round.txt
      ticks0=$(pool_ticks "$(pool_of "$variant")")
      DW_BENCH_PATH=$(path_of "$variant") wrk -t1 -c8 -d"${SECONDS_PER_RUN}s" --latency -s "$STACK_DIR/geos.lua" \
        "$STACK_URL" >"$out"
      ticks=$(($(pool_ticks "$(pool_of "$variant")") - ticks0))
      requests=$(awk '/requests in/ {print $1}' "$out")
      cpu_us=$(awk -v t="$ticks" -v hz="$TICKS" -v r="$requests" 'BEGIN {printf "%.1f", t * 1e6 / hz / r}')
      rps=$(awk '/^Requests\/sec:/ {print $2}' "$out")
      p50=$(awk '$1 == "50%" {print $2}' "$out")
      p99=$(awk '$1 == "99%" {print $2}' "$out")
      errors=$(grep -cE 'Socket errors|Non-2xx' "$out" || true)
      echo "{\"size\":$n,\"variant\":\"$variant\",\"round\":$round,\"rps\":$rps,\"p50\":\"$p50\",\"p99\":\"$p99\",\"errors\":$errors,\"cpu_us\":$cpu_us}" \
        >>"$RAW/throughput.jsonl"
    done
  done
done

# Memory of each worker after serving 2,500 regions: RSS and PSS (shared pages split among
# the processes sharing them) from /proc/PID/smaps_rollup.
for pool in fpm fpm-twin fpm-plain; do
  for pid in $(stack_fpm_workers "$pool"); do
    awk -v pool="$pool" -v pid="$pid" '/^Rss:/ {rss = $2} /^Pss:/ {pss = $2}
      /^Private_Clean:/ {pc = $2} /^Private_Dirty:/ {pd = $2}
      END {printf "{\"pool\":\"%s\",\"pid\":%d,\"rss_kb\":%d,\"pss_kb\":%d,\"uss_kb\":%d}\n", pool, pid, rss, pss, pc + pd}' \
      "/proc/$pid/smaps_rollup"
  done
done >"$RAW/memory.jsonl"

php -r '
$rows = array_map(fn ($l) => json_decode($l, true), file($argv[1], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES));
$mem = array_map(fn ($l) => json_decode($l, true), file($argv[2], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES));
[$rounds, $seconds, $quick] = [(int) $argv[3], (int) $argv[4], $argv[5] === "1"];
$median = function (array $v): float { sort($v); $n = count($v); return $n % 2 ? $v[intdiv($n, 2)] : ($v[$n / 2 - 1] + $v[$n / 2]) / 2; };
echo "## HTTP throughput and memory per worker (nginx + php-fpm, php/front.php)\n\n";
if ($quick) echo "> Quick run (DW_BENCH_QUICK=1): numbers not to quote.\n\n";
echo "How measured: nginx (1 worker) in front of three php-fpm 8.4 masters of 4 static workers\n",
     "each (opcache on, JIT off): one with `dw_router.so` (page: `php/front.php`, routes by\n",
     "`CF-IPCountry`), one without it (the same page through `php/bootstrap.php` uses the userland\n",
     "twin with APCu), one without it serving the same page with routing switched off\n",
     "(`DW_ROUTING=off`: same headers and body, no router). `wrk -t1 -c8` for {$seconds} s per run,\n",
     "rotating 64 geos of the snapshot (one without a region); the three variants interleaved, $rounds\n",
     "round(s) each, after a 1 s warm-up; the median req/s is reported. The snapshot is replaced by\n",
     "rename between the sizes, as dw-agent does. Client, server and PHP share the machine\x27s cores,\n",
     "so ratios measured side by side matter more than absolute numbers.\n\n";
echo "| regions | no routing (req/s) | extension (req/s) | userland twin (req/s) | extension / no routing | twin / no routing | errors |\n|---|---|---|---|---|---|---|\n";
$cpuTable = "";
$targets = [];
foreach ([250, 2500] as $n) {
    $by = [];
    $cpu = [];
    $errors = 0;
    foreach ($rows as $r) if ($r["size"] === $n) { $by[$r["variant"]][] = $r["rps"]; $cpu[$r["variant"]][] = $r["cpu_us"]; $errors += $r["errors"]; }
    $m = array_map($median, $by);
    $c = array_map($median, $cpu);
    $cpuTable .= sprintf("| %s | %.0f | %.0f (+%.0f) | %.0f (+%.0f) |\n", number_format($n), $c["none"], $c["ext"],
        $c["ext"] - $c["none"], $c["twin"], $c["twin"] - $c["none"]);
    $ratio = $m["ext"] / $m["none"];
    $targets[$n] = $ratio;
    printf("| %s | %s | %s | %s | %.3f | %.3f | %d |\n", number_format($n), number_format($m["none"]),
        number_format($m["ext"]), number_format($m["twin"]), $ratio, $m["twin"] / $m["none"], $errors);
}
echo "\n";
foreach ($targets as $n => $ratio) {
    printf("Target, extension >= 0.97x the page without routing, %s regions: **%s** (%.3f).\n",
        number_format($n), $ratio >= 0.97 ? "met" : "not met", $ratio);
}
echo "\nCPU time of the php-fpm workers per request (user + system from /proc/PID/stat over each run,\n",
     "divided by the requests; median over the rounds, µs): steadier than req/s on a shared machine.\n\n",
     "| regions | no routing | extension | userland twin |\n|---|---|---|---|\n", $cpuTable;
echo "\nEvery run (req/s; latency p50 / p99):\n\n| regions | round | no routing | extension | twin |\n|---|---|---|---|---|\n";
$cell = [];
foreach ($rows as $r) $cell[$r["size"]][$r["round"]][$r["variant"]] = sprintf("%s (%s / %s)", number_format($r["rps"]), $r["p50"], $r["p99"]);
foreach ($cell as $n => $byRound) foreach ($byRound as $round => $v)
    printf("| %s | %d | %s | %s | %s |\n", number_format($n), $round, $v["none"] ?? "", $v["ext"] ?? "", $v["twin"] ?? "");
echo "\nMemory per php-fpm worker after the runs (2,500-region snapshot in use), mean of 4 workers, KiB.\n",
     "RSS counts shared pages (opcache, the binary) in full; PSS splits them among the sharers;\n",
     "USS is the worker\x27s private memory (what one more worker costs):\n\n",
     "| pool | RSS | PSS | USS |\n|---|---|---|---|\n";
$names = ["fpm-plain" => "without the extension, page without routing", "fpm" => "with the extension, routing",
          "fpm-twin" => "without the extension, userland twin (APCu shm not included in USS)"];
$usses = [];
foreach ($names as $pool => $label) {
    $w = array_values(array_filter($mem, fn ($m) => $m["pool"] === $pool));
    if ($w === []) continue;
    $avg = fn ($k) => array_sum(array_column($w, $k)) / count($w);
    $usses[$pool] = $avg("uss_kb");
    printf("| %s | %s | %s | %s |\n", $label, number_format($avg("rss_kb")), number_format($avg("pss_kb")), number_format($avg("uss_kb")));
}
if (isset($usses["fpm"], $usses["fpm-plain"])) {
    printf("\nThe extension adds %s KiB of private memory per worker at 2,500 regions (its parsed table and per-process watcher; the snapshot file\x27s mapping is shared by the workers and shows in PSS, not USS).\n",
        number_format($usses["fpm"] - $usses["fpm-plain"]));
}
' "$RAW/throughput.jsonl" "$RAW/memory.jsonl" "$ROUNDS" "$SECONDS_PER_RUN" "$QUICK"
