# shellcheck shell=bash
# The pieces of the capacity proof on a real stack, shared by tests/traffic-ops/capacity-real
# (the test) and scripts/demo (its capacity scene): the traffic (CAP_DRIVE), the dw-agent that
# serves the extension's answer counters, Prometheus scraping that agent each second, and the
# comparison of dwctl's predicted per-origin load with the counters' deltas
# (tests/traffic-ops/capacity-compare.php). Two drives of the same mix (DE 2/5, AT, CH, FR
# 1/5 each, every other answer sticky):
#   CAP_DRIVE=http  HTTP requests (tests/traffic-ops/capacity-http.php, CAP_PARALLEL at a
#                   time) to php/front.php behind the stack's web server (STACK_URL): the
#                   lsphp children behind OpenLiteSpeed count their answers, as on a node;
#                   start the web stack with CAP_LSPHP_INI in its php.ini (the test)
#   CAP_DRIVE=cli   (default) one PHP CLI process with the extension resolving the mix
#                   (tests/traffic-ops/capacity-drive.php) and counting into CAP_ANSWERS:
#                   no web server involved (make demo's scene)
# Source it after scripts/stack and stack_init:
#   cap_answers_dir DIR          a directory for the counters (mode 1777, as dw_router's
#                                default is: the agent reads what any PHP user writes, and
#                                lsphp run as `nobody` creates its answers-<uid>.bin there);
#                                sets CAP_ANSWERS and CAP_LSPHP_INI (the php.ini line that
#                                points the extension there: give it to STACK_LSPHP_INI);
#                                give the agent `--answers-dir DIR`
#   cap_start_prometheus TARGET  Prometheus (process `cap-prometheus`) scraping TARGET
#                                (host:port) each second; sets CAP_PROM; stops with the stack
#   cap_counts                   per origin, the answers Prometheus has: JSON {origin: n}
#   cap_sync_sent                CAP_SENT from the agent's /metrics: answers made outside
#                                a drive (a web stack's start-up requests) count as sent
#   cap_drive N SECONDS OUT      N answers of the mix spread over SECONDS (0: at once), then
#                                until Prometheus has every answer sent so far (CAP_SENT)
#   cap_drive_start N SECONDS OUT / cap_drive_wait N
#                                the same in the background: start it, then wait for it
#   cap_compare MODE PLAN C0 C1 OUT WHAT
#                                the prediction in PLAN (dwctl ... --output json) against
#                                the deltas C1 - C0 of the drive OUT; MODE `verdicts`: one
#                                line per origin, `ok|bad WHAT: ...`; `table`: predicted
#                                and measured side by side; `guard`: each origin's
#                                measured load within its guard (capacity-compare.php)
# Settings: CAP_NODE (the agent's --node-id: only its answers are counted; empty: all),
# CAP_KEYS (distinct sticky keys of a drive; default half of its N: every sticky answer
# its own key), CAP_DRIVE (cli|http), CAP_PARALLEL (http: requests in flight; default
# STACK_LSPHP_CHILDREN, so that every lsphp child is kept busy).

CAP_SENT=0
CAP_NODE=${CAP_NODE:-}
CAP_DRIVE=${CAP_DRIVE:-cli}
CAP_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cap_answers_dir() {
  CAP_ANSWERS=$1
  CAP_LSPHP_INI="dw_router.answers_dir = $CAP_ANSWERS"
  mkdir -p "$CAP_ANSWERS" && chmod 1777 "$CAP_ANSWERS"
}

cap_start_prometheus() {
  local port
  port=$(stack_free_port) || return 1
  CAP_PROM=http://127.0.0.1:$port
  cat >"$STACK_DIR/cap-prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s}
scrape_configs:
  - job_name: dw-agent
    static_configs: [{targets: [$1]}]
YAML
  stack_spawn cap-prometheus prometheus --config.file "$STACK_DIR/cap-prometheus.yml" \
    --storage.tsdb.path "$STACK_DIR/cap-prometheus" --web.listen-address "127.0.0.1:$port" --log.level warn
  stack_until "Prometheus on $CAP_PROM" curl -fsS --max-time 2 "$CAP_PROM/-/ready"
}

cap_counts() {
  local selector=''
  [[ -n $CAP_NODE ]] && selector="{node=\"$CAP_NODE\"}"
  curl -fsS --max-time 2 -G "$CAP_PROM/api/v1/query" --data-urlencode "query=sum by (origin) (dw_router_answers_total$selector)" |
    php -r '$o = []; foreach (json_decode(stream_get_contents(STDIN), true)["data"]["result"] ?? [] as $r) $o[$r["metric"]["origin"] ?? ""] = (int) $r["value"][1]; ksort($o); echo json_encode($o);'
}

# CAP_SENT := every answer the agent serves now (its /metrics, no scrape in between): the
# answers something other than a drive made (the web stack's start-up requests) are then
# counted as sent, so that cap_drive waits for exactly its own on top of them.
cap_sync_sent() {
  local n
  n=$(curl -fsS --max-time 2 "http://$STACK_AGENT_METRICS/metrics" |
    awk '/^dw_router_answers_total[{ ]/ {n += $NF} END {printf "%d\n", n}') || return 1
  [[ $n =~ ^[0-9]+$ ]] || return 1
  CAP_SENT=$n
}

cap_total_is() { [[ $(cap_counts | php -r 'echo array_sum(json_decode(stream_get_contents(STDIN), true) ?: []);') == "$1" ]]; }

# The driver's command line. cli: the extension counting into CAP_ANSWERS, resolving against
# STACK_SNAPSHOT; http: requests to STACK_URL, whose PHP counts. Either is stopped after
# CAP_DRIVER_TIMEOUT seconds (default 300; a drive takes SECONDS plus what the server
# needs), so a driver that never ends fails the test instead of hanging it.
cap_driver() { # N SECONDS OUT
  case $CAP_DRIVE in
    http)
      timeout "${CAP_DRIVER_TIMEOUT:-300}" php "$CAP_LIB/capacity-http.php" "$STACK_URL" "$1" "$2" "${CAP_KEYS:-$(($1 / 2))}" \
        "${CAP_PARALLEL:-${STACK_LSPHP_CHILDREN:-8}}" "$3" ;;
    cli)
      timeout "${CAP_DRIVER_TIMEOUT:-300}" php -d "extension=$STACK_SO" -d dw_router.count_answers=1 -d "dw_router.answers_dir=$CAP_ANSWERS" \
        "$CAP_LIB/capacity-drive.php" "$STACK_SNAPSHOT" "$1" "$2" "${CAP_KEYS:-$(($1 / 2))}" "$3" ;;
    *) echo "capacity.sh: CAP_DRIVE must be cli or http, not '$CAP_DRIVE'" >&2; return 2 ;;
  esac
}

cap_drive() { # N SECONDS OUT
  cap_driver "$@" || return 1
  CAP_SENT=$((CAP_SENT + $1))
  stack_until "Prometheus at $CAP_SENT answers" cap_total_is "$CAP_SENT"
}

cap_drive_start() { # N SECONDS OUT
  cap_driver "$@" >>"$STACK_DIR/logs/cap-drive.log" 2>&1 &
  echo $! >"$STACK_DIR/pids/cap-drive"
}

cap_drive_wait() { # N: the background drive's N
  local pid
  pid=$(stack_pid cap-drive) || return 1
  wait "$pid" || { tail -n 5 "$STACK_DIR/logs/cap-drive.log" >&2; rm -f "$STACK_DIR/pids/cap-drive"; return 1; }
  rm -f "$STACK_DIR/pids/cap-drive"
  CAP_SENT=$((CAP_SENT + $1))
  stack_until "Prometheus at $CAP_SENT answers" cap_total_is "$CAP_SENT"
}

cap_compare() { # MODE PLAN C0 C1 OUT WHAT
  php "$CAP_LIB/capacity-compare.php" "$@"
}
