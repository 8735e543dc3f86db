# shellcheck shell=bash
# tests/cache/run, part 11 (sourced: uses its helpers and the stack): the purge secret goes
# only to the web server (issue 33, item 4). OpenLiteSpeed is stopped; a process of uid
# 65534 (the uid lsphp and OLS's workers run as here: any PHP code on the node) binds its
# port and answers 200 to anything (tests/cache/lib/squatter.php); a change is committed.
#
#   - the squatter receives nothing it can reuse: no byte of any request (so no bearer
#     token), though the agent connects to it
#   - its 200 is never counted as a landed purge: dw_agent_purge_failures_total counts the
#     attempts (at least 2: the failure and its retry), requests - failures stays put
#   - once the squatter is gone and OpenLiteSpeed is back on the port, a retry lands (no
#     new change): the requests counter moves, the failures counter does not
echo "== cache: a squatter on the purge port while OpenLiteSpeed is down gets nothing"
SQUAT_LOG=$LOG/squatter.log
: >"$SQUAT_LOG"
chmod 0666 "$SQUAT_LOG"
stack_stop_litespeed
# Purges that landed: requests - failures, from one scrape. The agent counts an attempt
# before its failure, so a scrape between the two sees one more "landed" for a moment (CI
# saw that once, at load 9); a purge that truly landed stays counted. settled_landed reads
# up to 5 scrapes 100 ms apart and gives the first that equals EXPECTED, else the last.
landed() {
  local text
  text=$(metrics_text)
  echo $(($(metric_sum dw_agent_purge_requests_total "$text") - $(metric_sum dw_agent_purge_failures_total "$text")))
}
settled_landed() { # EXPECTED
  local i now
  for ((i = 0; i < 5; i++)); do
    now=$(landed)
    [[ $now == "$1" ]] && break
    sleep 0.1
  done
  echo "$now"
}
setpriv --reuid=65534 --regid=65534 --clear-groups php tests/cache/lib/squatter.php "$STACK_HTTP_PORT" "$SQUAT_LOG" \
  >"$LOG/squatter.out" 2>&1 &
SQUAT_PID=$!
for ((i = 0; i < 50; i++)); do grep -q listening "$SQUAT_LOG" && break; sleep 0.1; done
check 'grep -q listening "$SQUAT_LOG"' "a process of uid 65534 holds 127.0.0.1:$STACK_HTTP_PORT (OpenLiteSpeed stopped)" "$(cat "$LOG/squatter.out")"
sq_f0=$(metric dw_agent_purge_failures_total) sq_l0=$(landed)
stack_dwctl region set GB '{"shard":"eu-3","origins":["lon-a","ams-a"],"weight":{"lon-a":50,"ams-a":50}}' >"$LOG/squat-change.log" 2>&1 ||
  { cat "$LOG/squat-change.log"; fail "dwctl region set GB (squatter on the port)"; }
sq_f1=$sq_f0
for ((i = 0; i < 100 && sq_f1 < sq_f0 + 2; i++)); do sleep 0.1; sq_f1=$(metric dw_agent_purge_failures_total); done
sleep 1 # a retry more, if it were to land on the squatter
sq_conns=$(grep -c '^conn ' "$SQUAT_LOG")
sq_bytes=$(awk '$1 == "conn" {s += $2} END {print s + 0}' "$SQUAT_LOG")
check '((sq_conns >= 1 && sq_bytes == 0))' \
  "the squatter got $sq_conns connection(s) from the agent and $sq_bytes bytes: no request, no token" \
  "$(grep -c 7574686f72697a6174696f6e "$SQUAT_LOG") carried an Authorization header"
sq_l1=$(settled_landed "$sq_l0")
check '((sq_f1 >= sq_f0 + 2 && sq_l1 == sq_l0))' \
  "its 200 is not counted as landed: failures $sq_f0 -> $sq_f1 (counted and retried), landed purges stay $sq_l0 (now $sq_l1)"
kill "$SQUAT_PID" 2>/dev/null
wait "$SQUAT_PID" 2>/dev/null
sq_f2=$(metric dw_agent_purge_failures_total) sq_l2=$(landed)
if stack_start_litespeed; then
  t1=$(now_us)
  for ((i = 0; i < 150; i++)); do (($(landed) > sq_l2)) && break; sleep 0.1; done
  check '(($(landed) > sq_l2))' "OpenLiteSpeed back on the port: a retry lands ($(ms_since "$t1") ms after its start, no new change; failures since: $(($(metric dw_agent_purge_failures_total) - sq_f2)))"
else
  fail "OpenLiteSpeed starts again after the squatter"
fi
