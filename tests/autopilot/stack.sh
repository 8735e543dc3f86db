# shellcheck shell=bash
# The autopilot's real stack, shared by tests/autopilot/run (the proof) and scripts/demo (its
# autopilot scene): etcd, two nodes (a dw-agent each, with its own snapshot, node id and
# answers directory, and a PHP CLI process with the extension counting into it:
# tests/autopilot/drive.php), Prometheus scraping both agents every second, and the real
# `dwctl autopilot` evaluating every 2 s against that Prometheus.
# Each node's answers go through its own OpenLiteSpeed + lsphp (scripts/stack's
# stack_start_litespeed: the extension loaded in lsphp, reading that node's snapshot and
# counting into that node's answers directory): the driver (tests/autopilot/drive.php, a PHP
# CLI process) sends HTTP requests to php/front.php there, the geo in CF-IPCountry and a
# sticky key per request. AP_SERVER=cli instead answers from the driver process itself (the
# extension loaded in PHP CLI, counting), where OpenLiteSpeed is not available.
# The fleet (tests/autopilot/routing.json, rendezvous pick, every answer sticky with its own
# key): DE → a 80 / b 20, FR → b 50 / c 50; capacities a 50, b 100, c 60 answers per second
# (targets 40, 80, 48 at the default headroom 0.8). The load is set in AP_CONTROL ("DE 40
# FR 40": answers per second of the whole fleet; each node answers half).
# Source it after scripts/stack and stack_init:
#   ap_start            etcd, the routing, the capacities, both agents, both drivers,
#                       Prometheus; sets AP_PROM, AP_CONTROL, AP_COUNTS (the drivers'
#                       per-second logs), AP_REV0 (etcd's revision once seeded)
#   ap_rate DE FR       the load from now on (answers per second, whole fleet)
#   ap_start_autopilot  `dwctl --output json autopilot` with AP_AUTOPILOT_ARGS (its events
#                       in $STACK_DIR/logs/autopilot.log); sets AP_METRICS
#   ap_weights GEO      the region's weights now, JSON
#   ap_usable           Prometheus has a full window of both nodes' counters
#   ap_stop_servers     stops both nodes' OpenLiteSpeed (and their lsphp)
# Settings: AP_RESTORE_AFTER (10: the shortened --restore-after), AP_MIN_INTERVAL (10),
# AP_SERVER (litespeed, or cli), AP_LSPHP_CHILDREN (4: lsphp children per node).

AP_CAPACITY_A=50 AP_CAPACITY_B=100 AP_CAPACITY_C=60
AP_RESTORE_AFTER=${AP_RESTORE_AFTER:-10}
AP_MIN_INTERVAL=${AP_MIN_INTERVAL:-10}
AP_SERVER=${AP_SERVER:-litespeed}
AP_LSPHP_CHILDREN=${AP_LSPHP_CHILDREN:-4}
AP_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

ap_rate() { printf 'DE %s FR %s\n' "$1" "$2" >"$AP_CONTROL.tmp" && mv "$AP_CONTROL.tmp" "$AP_CONTROL"; }

ap_node() { # N METRICS_PORT
  local dir=$STACK_DIR/node$1
  mkdir -p "$dir/answers" "$dir/snap" && chmod 1777 "$dir/answers"
  stack_spawn "agent$1" "$STACK_AGENT" --endpoints "$STACK_ETCD" --snapshot "$dir/snap/routing.json" \
    --metrics-addr "127.0.0.1:$2" --node-id "edge-$1" --answers-dir "$dir/answers" \
    --backoff-initial 50ms --backoff-max 1s --nodes-prefix off
  stack_until "dw-agent $1 /healthz" curl -fsS --max-time 2 "http://127.0.0.1:$2/healthz" &&
    stack_until "node $1's snapshot" test -s "$dir/snap/routing.json" || return 1
  # The driver stops by itself after 600 s at the latest (the test stops it sooner).
  if [[ $AP_SERVER == litespeed ]]; then
    # This node's OpenLiteSpeed + lsphp: its snapshot, counting into its answers directory
    # (STACK_* given for this call only; STACK_URL and the server's root stay set).
    STACK_SNAPSHOT=$dir/snap/routing.json STACK_HTTP_PORT='' STACK_LSPHP_CHILDREN=$AP_LSPHP_CHILDREN \
      STACK_LSPHP_INI="dw_router.count_answers = 1
dw_router.answers_dir = $dir/answers" stack_start_litespeed "ols$1" yes || return 1
    AP_URLS+=("$STACK_URL")
    stack_spawn "drive$1" php "$AP_LIB/drive.php" "$STACK_URL" "$AP_CONTROL" 0.5 "$dir/counts.jsonl" 600
  else
    stack_spawn "drive$1" php -d "extension=$STACK_SO" -d dw_router.count_answers=1 \
      -d "dw_router.answers_dir=$dir/answers" "$AP_LIB/drive.php" "$dir/snap/routing.json" \
      "$AP_CONTROL" 0.5 "$dir/counts.jsonl" 600
  fi
  AP_COUNTS+=("$dir/counts.jsonl")
}

ap_start() {
  local p1 p2 pp
  AP_CONTROL=$STACK_DIR/control AP_COUNTS=() AP_URLS=()
  if [[ $AP_SERVER == litespeed ]] && ! stack_litespeed_available; then
    stack_log "AP_SERVER=litespeed without OpenLiteSpeed and lsphp (AP_SERVER=cli answers from PHP CLI)"
    return 1
  fi
  ap_rate 0 0
  stack_start_etcd || return 1
  {
    stack_dwctl apply "$AP_LIB/routing.json" &&
      stack_dwctl origin capacity a "$AP_CAPACITY_A" &&
      stack_dwctl origin capacity b "$AP_CAPACITY_B" &&
      stack_dwctl origin capacity c "$AP_CAPACITY_C"
  } >"$STACK_DIR/logs/apply.log" 2>&1 || { stack_log "seeding failed: $(tail -n 5 "$STACK_DIR/logs/apply.log")"; return 1; }
  p1=$(stack_free_port) && p2=$(stack_free_port) && pp=$(stack_free_port) || return 1
  AP_AGENTS=(127.0.0.1:$p1 127.0.0.1:$p2)
  ap_node 1 "$p1" && ap_node 2 "$p2" || return 1
  AP_PROM=http://127.0.0.1:$pp
  cat >"$STACK_DIR/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: dw-agent
    static_configs: [{targets: [127.0.0.1:$p1, 127.0.0.1:$p2]}]
YAML
  stack_spawn prometheus prometheus --config.file "$STACK_DIR/prometheus.yml" \
    --storage.tsdb.path "$STACK_DIR/prometheus" --web.listen-address "127.0.0.1:$pp" --log.level warn
  stack_until "Prometheus on $AP_PROM" curl -fsS --max-time 2 "$AP_PROM/-/ready" || return 1
  AP_REV0=$(stack_etcd_revision)
}

ap_stop_servers() { [[ $AP_SERVER == litespeed ]] && stack_stop_litespeed; return 0; }

ap_prom_value() {
  curl -fsS --max-time 2 -G "$AP_PROM/api/v1/query" --data-urlencode "query=$1" |
    php -r '$a = json_decode(stream_get_contents(STDIN), true); echo $a["data"]["result"][0]["value"][1] ?? "", "\n";'
}

# A full 10 s window of both nodes' counters (12 scrapes each).
ap_usable() {
  local v
  v=$(ap_prom_value 'min(count_over_time(up{job="dw-agent"}[15s]))') && [[ -n $v ]] &&
    php -r "exit((float) '$v' >= 12 ? 0 : 1);" &&
    v=$(ap_prom_value 'count(count by (node) (dw_router_answers_total))') && [[ $v == 2 ]]
}

ap_start_autopilot() {
  local p
  p=$(stack_free_port) || return 1
  AP_METRICS=127.0.0.1:$p
  DWCTL_PROMETHEUS_URL=$AP_PROM stack_spawn autopilot "$STACK_DWCTL" --endpoints "$STACK_ETCD" --output json \
    autopilot --interval 2 --window 10s --for 2 --min-interval "$AP_MIN_INTERVAL" \
    --restore-after "$AP_RESTORE_AFTER" --max-moved-per-minute 0.5 --metrics "$AP_METRICS" \
    "${AP_AUTOPILOT_ARGS[@]}"
  stack_until "the autopilot's /metrics" curl -fsS --max-time 2 "http://$AP_METRICS/metrics"
}

ap_weights() {
  stack_dwctl region get "$1" --output json | php -r 'echo json_encode(json_decode(stream_get_contents(STDIN), true)["value"]["weight"] ?? null), "\n";'
}
