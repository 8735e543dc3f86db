#!/usr/bin/env bash
# The fleet: real dw-agent processes (each with its own snapshot on tmpfs and its node report)
# on one etcd, connected directly and through one and three `etcd grpc-proxy` processes, grown
# in batches to each fleet size; then 10,000 simulated watch streams through the proxies.
# The timing is done by crates/agent/examples/fleet_probe.rs; this script runs the processes
# and reads /proc. DW_BENCH_FLEET_SIZES (e.g. "100 200") and DW_BENCH_WATCHERS override the sizes.
set -euo pipefail
ROOT=$PWD
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/50-fleet}
QUICK=${DW_BENCH_QUICK:-0}
if [[ $QUICK == 1 ]]; then
  SIZES=${DW_BENCH_FLEET_SIZES:-"25 50"} WATCHERS=${DW_BENCH_WATCHERS:-1000} CHANGES=2 IDLE_S=2
else
  SIZES=${DW_BENCH_FLEET_SIZES:-"250 500 1000"} WATCHERS=${DW_BENCH_WATCHERS:-10000} CHANGES=3 IDLE_S=5
fi
# DW_BENCH_REPORT_ONLY=1: the section again from the last run's raw results (same settings).
if [[ ${DW_BENCH_REPORT_ONLY:-0} == 1 ]]; then
  exec php "$ROOT/bench/fleet/report.php" "$RAW" "$QUICK" "$CHANGES" "$IDLE_S"
fi
mkdir -p "$RAW"
rm -f "$RAW"/*.tsv
BATCH=50           # agents started at once
MODES="direct proxy1 proxy3"
KEY=/dw/routing/region/DE

log() { echo "[fleet $(date -u +%T)] $*" >&2; }

log "building dw-agent, dwctl and fleet_probe"
# Two runs: `--bin` would apply to every package named, leaving dwctl's binary stale.
cargo build --offline --release -p dw-agent -p dwctl --bins >&2
cargo build --offline --release -p dw-agent --example fleet_probe >&2
AGENT=$ROOT/target/release/dw-agent
DWCTL=$ROOT/target/release/dwctl
PROBE=$ROOT/target/release/examples/fleet_probe

# Descriptors: every agent holds two etcd connections, etcd and each proxy one per agent.
ulimit -n "$(ulimit -Hn)"
WORK=$(mktemp -d /dev/shm/dw-fleet.XXXXXX) # tmpfs: snapshots, etcd's data, logs
mkdir -p "$WORK/logs"

AGENT_PIDS=()
PROXY_PIDS=()
ETCD_PID=
stop_pids() { # SIGTERM, then SIGKILL after 10 s: every pid given
  (($#)) || return 0
  kill -TERM "$@" 2>/dev/null || true
  local i
  for ((i = 0; i < 100; i++)); do
    any_alive "$@" || break
    sleep 0.1
  done
  kill -KILL "$@" 2>/dev/null || true
  wait "$@" 2>/dev/null || true
}
any_alive() { # true while one of the pids runs (an exited child not yet waited for is a zombie, Z)
  local pid stat
  for pid; do
    read -r -a stat 2>/dev/null <"/proc/$pid/stat" || continue
    [[ ${stat[2]:-Z} != Z ]] && return 0
  done
  return 1
}
cleanup() {
  stop_pids "${AGENT_PIDS[@]}"
  stop_pids "${PROXY_PIDS[@]}"
  [[ -n $ETCD_PID ]] && stop_pids "$ETCD_PID"
  cp "$WORK"/logs/* "$RAW/" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
  php -r '$s = stream_socket_server("tcp://127.0.0.1:0", $e, $m) or exit(1);
    echo substr(strrchr(stream_socket_get_name($s, false), ":"), 1), "\n";'
}
until_true() { # TRIES COMMAND...: every 0.1 s
  local tries=$1 i
  shift
  for ((i = 0; i < tries; i++)); do "$@" && return 0; sleep 0.1; done
  return 1
}
cpu_ticks() { # summed utime+stime of the pids, in clock ticks (1/100 s)
  (($#)) || { echo 0; return; }
  local files=() pid
  for pid in "$@"; do files+=("/proc/$pid/stat"); done
  # The command name (field 2) may hold spaces: count fields after the closing parenthesis.
  awk '{ sub(/.*\) /, ""); t += $12 + $13 } END { print t + 0 }' "${files[@]}" 2>/dev/null
}
cpu_ns() { # summed CPU time of the pids in ns (/proc/PID/schedstat: exact, not in 10 ms ticks)
  (($#)) || { echo 0; return; }
  local files=() pid
  for pid in "$@"; do files+=("/proc/$pid/schedstat"); done
  awk '{ t += $1 } END { printf "%d\n", t }' "${files[@]}" 2>/dev/null
}
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
etcd_status() { # "revision dbsize"
  etcdctl --endpoints "$ETCD" endpoint status -w json |
    php -r '$s = json_decode(stream_get_contents(STDIN), true)[0]["Status"];
      echo $s["header"]["revision"], " ", $s["dbSize"], "\n";'
}
now_ms() { date +%s%3N; }

# ---- etcd and the proxies ------------------------------------------------------------------

ETCD_PORT=$(free_port)
ETCD=http://127.0.0.1:$ETCD_PORT
PEER=http://127.0.0.1:$(free_port)
etcd --name fleet --data-dir "$WORK/etcd" --listen-client-urls "$ETCD" --advertise-client-urls "$ETCD" \
  --listen-peer-urls "$PEER" --initial-advertise-peer-urls "$PEER" --initial-cluster "fleet=$PEER" \
  --log-level warn 2>"$WORK/logs/etcd.log" &
ETCD_PID=$!
until_true 100 etcdctl --endpoints "$ETCD" endpoint health >/dev/null 2>&1 || { log "etcd did not start"; exit 1; }
"$DWCTL" --endpoints "$ETCD" apply "$ROOT/examples/routing.json" >/dev/null

PROXIES=()
start_proxies() { # COUNT
  local i port
  for ((i = 0; i < $1; i++)); do
    port=$(free_port)
    etcd grpc-proxy start --endpoints="$ETCD" --listen-addr="127.0.0.1:$port" \
      --metrics-addr="http://127.0.0.1:$(free_port)" 2>"$WORK/logs/proxy-$i.log" >/dev/null &
    PROXY_PIDS+=($!)
    PROXIES+=("http://127.0.0.1:$port")
    until_true 100 etcdctl --endpoints "127.0.0.1:$port" get /dw/none >/dev/null 2>&1 ||
      { log "grpc-proxy on $port did not start"; exit 1; }
  done
}
stop_proxies() { stop_pids "${PROXY_PIDS[@]}"; PROXY_PIDS=(); PROXIES=(); }

# ---- the fleet -----------------------------------------------------------------------------

SNAPSHOTS=$WORK/snapshots.txt
published() { # agents whose snapshot exists
  local n=0 i
  for ((i = 0; i < ${#AGENT_PIDS[@]}; i++)); do [[ -f $WORK/a/$i/routing.json ]] && n=$((n + 1)); done
  echo $n
}
grow_fleet() { # TO ENDPOINTS: start agents up to TO, BATCH at a time, each batch published
  local to=$1 endpoints=$2 i from
  while ((${#AGENT_PIDS[@]} < to)); do
    from=${#AGENT_PIDS[@]}
    for ((i = from; i < from + BATCH && i < to; i++)); do
      mkdir -p "$WORK/a/$i"
      "$AGENT" --endpoints "$endpoints" --snapshot "$WORK/a/$i/routing.json" \
        --metrics-addr 127.0.0.1:0 --node-id "fleet-$i" --labels bench=fleet --log warn \
        2>>"$WORK/logs/agents.log" &
      AGENT_PIDS+=($!)
      echo "$WORK/a/$i/routing.json" >>"$SNAPSHOTS"
    done
    # Bounded: 60 s per batch; a batch that does not publish stops the growth.
    if ! until_true 600 all_published; then
      log "only $(published) of ${#AGENT_PIDS[@]} agents published; not growing further"
      return 1
    fi
  done
}
all_published() { (($(published) >= ${#AGENT_PIDS[@]})); }
stop_fleet() { stop_pids "${AGENT_PIDS[@]}"; AGENT_PIDS=(); rm -rf "$WORK/a" "$SNAPSHOTS"; }
alive() { local n=0 pid; for pid in "${AGENT_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && n=$((n + 1)); done; echo $n; }

field() { # NAME LINE...: the value of NAME=value
  local name=$1 word
  shift
  for word in $*; do [[ $word == "$name="* ]] && { echo "${word#*=}"; return; }; done
  echo -
}

CHANGE_NO=0
# One size of one mode: idle costs, then CHANGES changes; a row in fleet.tsv and idle.tsv.
measure() { # MODE SIZE STATUS_ENDPOINTS
  local mode=$1 size=$2 status_eps=$3 n t0 t1 e0 e1 p0 p1 a0 a1 rss_list
  n=$(alive)
  # Idle: CPU of etcd, the proxies and the agents over IDLE_S with no change.
  sleep 1.5 # the last reports of the growth land
  t0=$(now_ms) e0=$(cpu_ticks "$ETCD_PID") p0=$(cpu_ticks "${PROXY_PIDS[@]}") a0=$(cpu_ticks "${AGENT_PIDS[@]}")
  sleep "$IDLE_S"
  t1=$(now_ms) e1=$(cpu_ticks "$ETCD_PID") p1=$(cpu_ticks "${PROXY_PIDS[@]}") a1=$(cpu_ticks "${AGENT_PIDS[@]}")
  local idle_ms=$((t1 - t0))
  local etcd_idle=$((e1 - e0)) proxy_idle=$((p1 - p0)) agents_idle=$((a1 - a0))
  local files=() pid
  for pid in "${AGENT_PIDS[@]}"; do files+=("/proc/$pid/status"); done
  rss_list=$(awk '/^VmRSS:/ {print $2}' "${files[@]}" 2>/dev/null | sort -n)
  local rss_median rss_max
  rss_median=$(awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}' <<<"$rss_list")
  rss_max=$(tail -1 <<<"$rss_list")
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$n" "$idle_ms" "$etcd_idle" "$proxy_idle" \
    "$agents_idle" "$rss_median" "$rss_max" "$(rss_kib "$ETCD_PID")" >>"$RAW/idle.tsv"
  local c out rev db0 db1 rev_after etcd_rss0
  read -r _ db0 < <(etcd_status)
  etcd_rss0=$(rss_kib "$ETCD_PID")
  for ((c = 0; c < CHANGES; c++)); do
    CHANGE_NO=$((CHANGE_NO + 1))
    t0=$(now_ms) e0=$(cpu_ticks "$ETCD_PID") p0=$(cpu_ticks "${PROXY_PIDS[@]}") a0=$(cpu_ns "${AGENT_PIDS[@]}")
    out=$("$PROBE" change --commit "$ETCD" --key "$KEY" --snapshots "$SNAPSHOTS" --expect "$n" \
      --value "{\"shard\":\"eu-1\",\"origins\":[\"fra-a\",\"fra-b\"],\"weight\":{\"fra-a\":50,\"fra-b\":$((CHANGE_NO % 50 + 1))}}" \
      --dwctl "$DWCTL" --status-endpoints "$status_eps" --timeout-ms 8000) || { log "probe failed"; return 1; }
    log "$mode $n agents: $(tr '\n' ' ' <<<"$out")"
    sleep 1.2 # a report held back by the 1 s coalescing would land now
    t1=$(now_ms) e1=$(cpu_ticks "$ETCD_PID") p1=$(cpu_ticks "${PROXY_PIDS[@]}") a1=$(cpu_ns "${AGENT_PIDS[@]}")
    read -r rev_after db1 < <(etcd_status)
    rev=$(field revision $out)
    # Revisions after the commit are report transactions (one revision each; nothing else writes).
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$n" "$rev" \
      "$(field put_ms $out)" "$(field renamed $out)" "$(field ctime_p50_ms $out)" "$(field ctime_p99_ms $out)" \
      "$(field ctime_max_ms $out)" "$(field inotify_p99_ms $out)" "$(field inotify_max_ms $out)" \
      "$(field status_ms $out)" "$((rev_after - rev))" "$((t1 - t0))" "$((e1 - e0))" "$((p1 - p0))" "$((a1 - a0))" \
      >>"$RAW/fleet.tsv"
  done
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$n" "$etcd_rss0" "$(rss_kib "$ETCD_PID")" "$db0" "$db1" >>"$RAW/etcd.tsv"
}

MAX_AGENTS=
for mode in $MODES; do
  case $mode in
    direct) endpoints=$ETCD ;;
    proxy1) start_proxies 1; endpoints=${PROXIES[0]} ;;
    proxy3) start_proxies 3; endpoints=$(IFS=,; echo "${PROXIES[*]}") ;;
  esac
  for size in $SIZES; do
    [[ -n $MAX_AGENTS ]] && ((size > MAX_AGENTS)) && size=$MAX_AGENTS
    ((size > ${#AGENT_PIDS[@]})) || continue
    log "$mode: growing to $size agents"
    started=$(now_ms)
    grow_fleet "$size" "$endpoints" || true
    log "$mode: $(alive) agents running, $(published) published, $(($(now_ms) - started)) ms to start"
    if [[ -z $MAX_AGENTS ]]; then
      # Memory: what the largest size would take at the agents' RSS now, with 50 % headroom.
      per=$(rss_kib "${AGENT_PIDS[0]}")
      avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo)
      MAX_AGENTS=$(((avail - 2 * 1024 * 1024) * 2 / 3 / per + ${#AGENT_PIDS[@]}))
      log "one agent: $per KiB RSS; $avail KiB available: room for about $MAX_AGENTS agents"
    fi
    if (($(alive) == 0)); then
      log "$mode: no agent running; see agents.log"
      break
    fi
    measure "$mode" "$size" "$endpoints"
  done
  # Sessions the agents ended in this mode, by cause (their warn lines), for the section.
  ended=$({ grep -o 'session with etcd ended cause="[a-z_]*"' "$WORK/logs/agents.log" || true; } |
    sed 's/.*cause="//; s/"$//' | sort | uniq -c | awk '{printf "%s%s=%s", sep, $2, $1; sep=","}')
  printf '%s\t%s\n' "$mode" "${ended:-none}" >>"$RAW/sessions.tsv"
  : >"$WORK/logs/agents.log"
  stop_fleet
  stop_proxies
done

# ---- simulated watchers through three proxies ----------------------------------------------

start_proxies 3
log "watchers: $WATCHERS streams through ${#PROXIES[@]} proxies"
e0=$(cpu_ticks "$ETCD_PID") p0=$(cpu_ticks "${PROXY_PIDS[@]}")
"$PROBE" watchers --commit "$ETCD" --endpoints "$(IFS=,; echo "${PROXIES[*]}")" --streams "$WATCHERS" \
  --connections $((WATCHERS / 250 + 1)) --key /dw/routing/bench/watchers --changes "$CHANGES" \
  --timeout-ms 60000 >"$RAW/watchers.txt"
e1=$(cpu_ticks "$ETCD_PID") p1=$(cpu_ticks "${PROXY_PIDS[@]}")
echo "etcd_ticks=$((e1 - e0)) proxy_ticks=$((p1 - p0))" >>"$RAW/watchers.txt"
log "watchers: $(tr '\n' ' ' <"$RAW/watchers.txt")"
stop_proxies

# ---- the section ---------------------------------------------------------------------------

php "$ROOT/bench/fleet/report.php" "$RAW" "$QUICK" "$CHANGES" "$IDLE_S"
