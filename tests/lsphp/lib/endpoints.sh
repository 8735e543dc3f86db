# shellcheck shell=bash
# tests/lsphp/run, "endpoints" (sourced: uses its pass/fail and the stack): every script in
# php/ runs on the project's minimal lsphp (scripts/build-lsphp, --disable-all), behind
# OpenLiteSpeed, with dw_router.so (issue 33, item 2).
#
#   functions   every global function php/*.php calls (tests/lsphp/lib/functions.php, from
#               their tokens) exists in lsphp; the optional ones (each guarded by
#               function_exists) are listed
#   status      php/status.php with the agent's own heartbeat: 200 "ok"; with planted
#               heartbeats (tests/lsphp/www/t-status.php: current, 1000 s old, old with
#               DW_STATUS_MAX_AGE=3600 and =abc, stale, not JSON): the codes and reasons of
#               tests/phpt/130; an error of its own (a relative DW_SNAPSHOT_PATH: a
#               ValueError) answers 503 with display_errors on; ?require=cache answers 503
#               while the heartbeat's purge_failing_since is set, 200 on an older agent's
#   purge       php/purge.php: GET 405, POST without the secret 403
EP_DOCROOT=$STACK_DIR/litespeed/docroot
cp tests/lsphp/www/*.php "$EP_DOCROOT/" && chmod a+r "$EP_DOCROOT"/*.php

echo "== endpoints: php/ on the minimal lsphp ($(lsphp -v | head -n1 | cut -d' ' -f1-3))"
ep_names=$(php tests/lsphp/lib/functions.php php/*.php)
ep_required=$(awk '$2 == "required" {print $1}' <<<"$ep_names" | paste -sd,)
ep_optional=$(awk '$2 == "optional" {print $1}' <<<"$ep_names" | paste -sd,)
ep_got=$(curl -sS --max-time 10 "$STACK_URL/t-functions.php?names=$ep_required")
ep_n=$(awk '$1 == "checked" {print $2}' <<<"$ep_got")
ep_missing=$(awk '$1 == "missing" {print $2}' <<<"$ep_got" | paste -sd' ')
if [[ -n $ep_n && $ep_n -ge 50 && -z $ep_missing ]]; then
  pass "functions: all $ep_n functions php/ calls exist in lsphp"
else
  fail "functions: every function php/ calls exists in lsphp (checked ${ep_n:-none}; missing: ${ep_missing:-?}; got: $ep_got)"
fi
ep_opt=$(curl -sS --max-time 10 "$STACK_URL/t-functions.php?names=$ep_optional" | awk '$1 == "missing" {print $2}' | paste -sd' ')
echo "    optional (guarded by function_exists), absent here: ${ep_opt:-none}"

# status_of QUERY: "CODE REASON" of t-status.php?QUERY (or of status.php for "-").
status_of() {
  local url body code
  if [[ $1 == - ]]; then url="$STACK_URL/status.php"; else url="$STACK_URL/t-status.php?$1"; fi
  body=$(curl -sS --max-time 10 -o - -w '\n%{http_code}' "$url")
  code=${body##*$'\n'}
  body=${body%$'\n'*}
  printf '%s %s' "$code" "$(php -r '$j = json_decode($argv[1], true); echo is_array($j) ? ($j["reason"] ?? "(no reason)") : "(no JSON: " . substr(preg_replace("/\s+/", " ", $argv[1]), 0, 160) . ")";' "$body")"
}
ep_check() { # QUERY WANT-PATTERN WHAT
  local got; got=$(status_of "$1")
  # shellcheck disable=SC2053
  if [[ $got == $2 ]]; then pass "status: $3: $got"; else fail "status: $3: want '$2', got '$got'"; fi
}
# The agent's heartbeat says current within one --heartbeat-interval (5 s) of the seed.
for ((i = 0; i < 100; i++)); do [[ $(status_of -) == '200 ok' ]] && break; sleep 0.1; done
ep_check - '200 ok' "php/status.php with the agent's own heartbeat"
EP_DIR=$(dirname "$STACK_SNAPSHOT")/endpoints
mkdir -p "$EP_DIR" && chmod 0755 "$EP_DIR"
cp "$STACK_SNAPSHOT" "$EP_DIR/routing.json" && chmod 0644 "$EP_DIR/routing.json"
ep_beat() { # AGE STATE [EXTRA JSON MEMBERS]: a heartbeat AGE s old
  printf '{"time":%d,"interval":5,"state":"%s","revision":7,"agent_state":"watching"%s}\n' \
    $(($(date +%s) - $1)) "$2" "${3:+,$3}" >"$EP_DIR/hb.tmp"
  chmod 0644 "$EP_DIR/hb.tmp" && mv "$EP_DIR/hb.tmp" "$EP_DIR/routing.json.heartbeat"
}
snap="snap=$EP_DIR/routing.json"
ep_beat 0 current
ep_check "$snap" '200 ok' 'a current heartbeat'
ep_beat 1000 current
ep_check "$snap" '503 heartbeat is 10?? s old (at most 15)' 'a heartbeat 1000 s old'
ep_check "$snap&max_age=3600" '200 ok' '1000 s old, DW_STATUS_MAX_AGE=3600'
ep_check "$snap&max_age=900" '503 heartbeat is 10?? s old (at most 900)' '1000 s old, DW_STATUS_MAX_AGE=900'
ep_check "$snap&max_age=abc" '503 heartbeat is 10?? s old (at most 15)' '1000 s old, DW_STATUS_MAX_AGE=abc (the default)'
ep_check "$snap&max_age=3601" '503 heartbeat is 10?? s old (at most 15)' '1000 s old, DW_STATUS_MAX_AGE=3601 (the default)'
ep_beat 0 stale '"reason":"no etcd session"'
ep_check "$snap" '503 agent: stale: no etcd session' 'a stale agent'
ep_beat 0 current '"purge_failing_since":1764783000'
ep_check "$snap" '200 ok' 'purges failing, no ?require=cache (routing health is unchanged)'
ep_check "$snap&require=cache" '503 purges failing since 2025-12-03T17:30:00Z (* s): cached pages may be stale' 'purges failing, ?require=cache'
ep_beat 0 current
ep_check "$snap&require=cache" '200 ok' "?require=cache, an older agent's heartbeat (no purge_failing_since)"
printf 'not json\n' >"$EP_DIR/routing.json.heartbeat"
ep_check "$snap" "503 heartbeat file is not the agent's JSON" 'a heartbeat that is not JSON'
ep_check "snap=rel/path.json&display_errors=1" '503 *' 'an error of its own (a relative DW_SNAPSHOT_PATH), display_errors on'

code=$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' "$STACK_URL/purge.php")
[[ $code == 405 ]] && pass "purge: GET purge.php: 405" || fail "purge: GET purge.php: want 405, got $code"
code=$(curl -s -o /dev/null --max-time 10 -w '%{http_code}' -X POST --data-binary 'all' "$STACK_URL/purge.php")
[[ $code == 403 ]] && pass "purge: POST without the secret: 403" || fail "purge: POST without the secret: want 403, got $code"
