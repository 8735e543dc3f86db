# Sourced by tests/monitoring/run (uses its `check`, `passed`, `failed`): the Grafana
# dashboard against a real Prometheus scraping real agents and the fleet exporter, all on
# 127.0.0.1 with free ports. Every process started here is stopped on exit (trap), every
# wait is bounded (STACK_START_TIMEOUT, 30 s each). Last, php/status.php on an agent's heartbeat.
# The traffic panels read dw_router_answers_total: until the nodes count answers (issue 29's
# counting half), a FIXTURE target (tests/traffic-ops/fixture.php under `php -S`, known
# rates, the two agents' node ids) serves them in job dw-agent; Prometheus loads the rules
# file, so the recording rule the top-k panel reads has values. A dry-run dwctl autopilot
# (its rates from a traffic file) serves the autopilot panel's series in job dw-autopilot;
# once Prometheus has scraped its decision counters at 0, fra-a's capacity is lowered below
# its load, so that the dry run decides a relief and the annotation "Autopilot actions"
# (changes() of those counters) has an event to show. Every annotation query is evaluated
# as a range query (dashboard.php).
DASHBOARD=packaging/monitoring/dw-router-dashboard.json
# shellcheck source=scripts/stack
source scripts/stack
dashboard_started=$SECONDS
missing=()
for tool in etcd prometheus curl php "$STACK_AGENT" "$STACK_DWCTL"; do
  command -v "$tool" >/dev/null || [[ -x $tool ]] || missing+=("$tool")
done
if ((${#missing[@]})); then
  check "dashboard: tools present (${missing[*]} missing: run inside scripts/devenv; cargo build --release)" false
  return 0
fi
stack_init "$(mktemp -d /tmp/dw-monitoring.XXXXXX)" "$(mktemp -d /tmp/dw-monitoring-snap.XXXXXX)/a1/routing.json" || return 0
dashboard_stop() {
  local name
  for name in prometheus fixture autopilot exporter agent2 agent1 etcd; do stack_kill "$name" TERM; done
  rm -rf "$STACK_DIR" "$(dirname "$(dirname "$STACK_SNAPSHOT")")"
}
trap dashboard_stop EXIT

# Each agent reports to /dw/nodes/ (the exporter reads the reports) under its own node id.
dashboard_agent() { # NAME SNAPSHOT METRICS_ADDR
  mkdir -p "$(dirname "$2")"
  stack_spawn "$1" "$STACK_AGENT" --endpoints "$STACK_ETCD" --snapshot "$2" --metrics-addr "$3" \
    --node-id "mon-$1" --backoff-initial 50ms --backoff-max 1s --heartbeat-interval 1s
}
dashboard_setup() {
  local p1 p2 p3 p4 p5 p6
  stack_start_etcd || return 1
  p1=$(stack_free_port) && p2=$(stack_free_port) && p3=$(stack_free_port) && p4=$(stack_free_port) &&
    p5=$(stack_free_port) && p6=$(stack_free_port) || return 1
  AGENTS="127.0.0.1:$p1 127.0.0.1:$p2" EXPORTER=127.0.0.1:$p3 PROMETHEUS=http://127.0.0.1:$p4
  stack_dwctl apply examples/routing.json >"$STACK_DIR/logs/apply.log" 2>&1 || return 1
  dashboard_agent agent1 "$STACK_SNAPSHOT" "127.0.0.1:$p1"
  dashboard_agent agent2 "$(dirname "$(dirname "$STACK_SNAPSHOT")")/a2/routing.json" "127.0.0.1:$p2"
  stack_spawn exporter "$STACK_DWCTL" --endpoints "$STACK_ETCD" status --serve "$EXPORTER" --interval 0.5
  # dwctl autopilot (a dry run, its rates from a file): the autopilot panel's series.
  printf '{"geos":{"DE":{"sticky":10},"AT":{"sticky":5}}}\n' >"$STACK_DIR/traffic.json"
  stack_dwctl origin capacity fra-a 20 >>"$STACK_DIR/logs/apply.log" 2>&1 &&
    stack_dwctl origin capacity fra-b 20 >>"$STACK_DIR/logs/apply.log" 2>&1 || return 1
  stack_spawn autopilot "$STACK_DWCTL" --endpoints "$STACK_ETCD" autopilot --dry-run \
    --traffic "$STACK_DIR/traffic.json" --interval 1 --metrics "127.0.0.1:$p6"
  DW_FIXTURE_T0=$(date +%s.%N) DW_FIXTURE_NODES="mon-agent1 mon-agent2" \
    stack_spawn fixture php -S "127.0.0.1:$p5" tests/traffic-ops/fixture.php
  cat >"$STACK_DIR/prometheus.yml" <<YAML
global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}
rule_files: ["$PWD/$RULES"]
scrape_configs:
  - job_name: dw-agent
    static_configs: [{targets: [127.0.0.1:$p1, 127.0.0.1:$p2, 127.0.0.1:$p5]}]
  - job_name: dw-fleet
    static_configs: [{targets: ["$EXPORTER"]}]
  - job_name: dw-autopilot
    static_configs: [{targets: ["127.0.0.1:$p6"]}]
YAML
  stack_spawn prometheus prometheus --config.file "$STACK_DIR/prometheus.yml" \
    --storage.tsdb.path "$STACK_DIR/prometheus" --web.listen-address "127.0.0.1:$p4" --log.level warn
  local addr
  for addr in $AGENTS; do stack_until "dw-agent /healthz on $addr" curl -fsS --max-time 2 "http://$addr/healthz" || return 1; done
  # Changes while the agents watch: watch events, publications, the histograms observe them.
  stack_dwctl drain fra-b >>"$STACK_DIR/logs/apply.log" 2>&1 &&
    stack_dwctl restore fra-b >>"$STACK_DIR/logs/apply.log" 2>&1 || return 1
}
# prom_value QUERY: the first result's value ("" when none).
prom_value() {
  curl -fsS --max-time 2 -G "$PROMETHEUS/api/v1/query" --data-urlencode "query=$1" 2>/dev/null |
    php -r '$a = json_decode(stream_get_contents(STDIN), true); echo $a["data"]["result"][0]["value"][1] ?? "", "\n";'
}
prom_at_least() { local v; v=$(prom_value "$1") && [[ -n $v ]] && php -r "exit((float) '$v' >= $2 ? 0 : 1);"; }

echo "== dashboard: etcd, 2 dw-agents, the fleet exporter, Prometheus (logs in $STACK_DIR/logs)"
if ! dashboard_setup; then
  check "dashboard: the stack starts" false
  tail -n 20 "$STACK_DIR"/logs/*.log
  return 0
fi
# Every target up, both nodes in the fleet's view at the head, and some seconds of samples
# (rate() and increase() need two in their window).
if stack_until "4 targets up" prom_at_least 'count(up{job=~"dw-agent|dw-fleet"} == 1)' 4 &&
  stack_until "2 nodes current" prom_at_least 'max(dw_fleet_nodes{status="current"})' 2 &&
  stack_until "5 s of samples" prom_at_least 'min(count_over_time(up[10s]))' 5 &&
  stack_until "the autopilot's loads" prom_at_least 'count(dwctl_autopilot_origin_load)' 2 &&
  stack_until "the autopilot's decision counters at 0" prom_at_least 'count(dwctl_autopilot_decisions_total == 0)' 4 &&
  stack_dwctl origin capacity fra-a 5 >>"$STACK_DIR/logs/apply.log" 2>&1 &&
  stack_until "a dry-run decision scraped" prom_at_least 'sum(dwctl_autopilot_decisions_total)' 1; then
  check "dashboard: Prometheus scrapes 2 agents, the fleet exporter and the autopilot" true
  php tests/monitoring/dashboard.php "$DASHBOARD" "$PROMETHEUS" 10s >"$STACK_DIR/dashboard.out" 2>&1
  cat "$STACK_DIR/dashboard.out"
  passed=$((passed + $(grep -c '^  ok ' "$STACK_DIR/dashboard.out")))
  failed=$((failed + $(grep -c '^  FAIL ' "$STACK_DIR/dashboard.out")))
  grep -q '^  ok .*panel' "$STACK_DIR/dashboard.out" || check "dashboard: at least one panel query evaluated" false
  grep -q '^  ok .*annotation' "$STACK_DIR/dashboard.out" || check "dashboard: at least one annotation query evaluated" false
else
  check "dashboard: Prometheus scrapes 2 agents, the fleet exporter and the autopilot" false
  # What the summary shows first: the wait that gave up is above (stack: gave up ...), then
  # which processes are gone (one that could not bind its port exits at once).
  for name in etcd agent1 agent2 exporter autopilot fixture prometheus; do
    stack_alive "$name" || echo "  FAIL dashboard: $name is not running (logs/$name.log)"
  done
  echo "       up: $(prom_value 'count(up == 1)') of $(prom_value 'count(up)') targets," \
    "current nodes: $(prom_value 'max(dw_fleet_nodes{status="current"})')"
  for log in prometheus exporter autopilot apply agent1 agent2 fixture etcd; do tail -n 12 "$STACK_DIR/logs/$log.log"; done
fi
# php/status.php on a real agent's heartbeat (the userland twin: php -n): 200 while the
# agent watches, 503 once etcd is gone (the agent's heartbeat says stale within a second).
dashboard_status() { # EXPECTED_CODE
  local answer
  answer=$(DW_SNAPSHOT_PATH=$STACK_SNAPSHOT php -n -r 'ob_start(); include "php/status.php"; $b = ob_get_clean(); echo http_response_code(), " ", $b;')
  echo "$answer" >"$STACK_DIR/status.out"
  [[ $answer == "$1 "* ]]
}
check "status.php: 200 for a current agent's node" stack_until "status.php 200" dashboard_status 200
stack_kill etcd TERM
check "status.php: 503 once the agent lost etcd" stack_until "status.php 503" dashboard_status 503
sed 's/^/       /' "$STACK_DIR/status.out"
echo "   (dashboard part: $((SECONDS - dashboard_started)) s)"
