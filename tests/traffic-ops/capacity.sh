# shellcheck shell=bash
# The pieces of the capacity proof on a real stack, shared by tests/traffic-ops/capacity-real
# (the test) and scripts/demo (its capacity scene): one PHP process with the extension
# counting its answers (tests/traffic-ops/capacity-drive.php), the dw-agent that serves
# those counters, Prometheus scraping that agent each second, and the comparison of dwctl's
# predicted per-origin load with the counters' deltas (tests/traffic-ops/capacity-compare.php).
# Source it after scripts/stack and stack_init:
#   cap_answers_dir DIR          a directory for the counters (mode 1777, as dw_router's
#                                default is: the agent reads what any PHP user writes);
#                                sets CAP_ANSWERS; give the agent `--answers-dir DIR`
#   cap_start_prometheus TARGET  Prometheus (process `cap-prometheus`) scraping TARGET
#                                (host:port) each second; sets CAP_PROM; stops with the stack
#   cap_counts                   per origin, the answers Prometheus has: JSON {origin: n}
#   cap_drive N SECONDS OUT      N answers of the mix spread over SECONDS (0: at once), then
#                                until Prometheus has every answer sent so far (CAP_SENT)
#   cap_drive_start N SECONDS OUT / cap_drive_wait N
#                                the same in the background: start it, then wait for it
#   cap_compare MODE PLAN C0 C1 OUT WHAT
#                                the prediction in PLAN (dwctl ... --output json) against
#                                the deltas C1 - C0 of the drive OUT; MODE `verdicts`: one
#                                line per origin, `ok|bad WHAT: ...`; `table`: predicted
#                                and measured side by side (capacity-compare.php)
# Settings: CAP_NODE (the agent's --node-id: only its answers are counted; empty: all),
# CAP_KEYS (distinct sticky keys of a drive; default half of its N: every sticky answer
# its own key).

CAP_SENT=0
CAP_NODE=${CAP_NODE:-}
CAP_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

cap_answers_dir() {
  CAP_ANSWERS=$1
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

cap_total_is() { [[ $(cap_counts | php -r 'echo array_sum(json_decode(stream_get_contents(STDIN), true) ?: []);') == "$1" ]]; }

# The driver's command line: the extension counting into CAP_ANSWERS, resolving against
# STACK_SNAPSHOT.
cap_driver() { # N SECONDS OUT
  php -d "extension=$STACK_SO" -d dw_router.count_answers=1 -d "dw_router.answers_dir=$CAP_ANSWERS" \
    "$CAP_LIB/capacity-drive.php" "$STACK_SNAPSHOT" "$1" "$2" "${CAP_KEYS:-$(($1 / 2))}" "$3"
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
