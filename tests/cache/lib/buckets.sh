# shellcheck shell=bash
# tests/cache/run, part 1c (sourced after lib/cookies.sh: uses its creq/with_case, req,
# check/pass/fail and $STACK_URL): visitor buckets in the page cache (issue 41).
#
#   two cookies  the fixture's vary rule takes two cookies: t-cookie.php stored with no
#                cookie, dw_sticky=K, dw_bucket=1, both, and dw_sticky=K with dw_bucket=2;
#                each asked again is a hit of its own copy (5 distinct copies), and a
#                cookie the rule does not name (a=1) shares the cookie-less copy
#   hostile      each hostile dw_bucket header of issue 41 (999, -1, 01, 1e2, dw.bucket,
#                dw bucket, DW_BUCKET, duplicates, two headers, a 4 KB value) sent twice to
#                the routed page with buckets off: then a cookie-less DE visitor gets DE's
#                own answer, a dw_sticky=K visitor K's, and no response sets a cookie
#                (buckets off changes nothing)

echo "== cache: the vary rule takes two cookies (dw_sticky, dw_bucket)"
two_url="$STACK_URL/t-cookie.php?two=$$"
two_cases=('' "dw_sticky=$STICKY_K" 'dw_bucket=1' "dw_sticky=$STICKY_K; dw_bucket=1" "dw_bucket=2; dw_sticky=$STICKY_K")
two_stored=() two_made=()
for i in "${!two_cases[@]}"; do
  c=${two_cases[$i]}
  if [[ -n $c ]]; then creq "$two_url" -H "Cookie: $c"; else creq "$two_url"; fi
  two_stored[i]=$R_CACHE two_made[i]=$R_MADE
done
two_ok=1
for i in "${!two_cases[@]}"; do
  c=${two_cases[$i]}
  if [[ -n $c ]]; then creq "$two_url" -H "Cookie: $c"; else creq "$two_url"; fi
  printf '    %-36s stored %-4s then %-4s %s\n' "${c:-(no cookie)}" "${two_stored[i]}" "$R_CACHE" \
    "$([[ $R_MADE == "${two_made[i]}" ]] && echo 'its own copy' || echo 'ANOTHER copy')"
  [[ ${two_stored[i]} == miss && $R_CACHE == hit && $R_MADE == "${two_made[i]}" ]] || two_ok=0
done
two_distinct=$(printf '%s\n' "${two_made[@]}" | sort -u | wc -l)
check '((two_ok && two_distinct == 5))' \
  "two cookies: 5 pages stored apart by (dw_sticky, dw_bucket), each a hit of its own copy" "$two_distinct distinct"
creq "$two_url" -H 'Cookie: a=1'
check '[[ $R_CACHE == hit && $R_MADE == "${two_made[0]}" ]]' "two cookies: a=1 alone gets the cookie-less copy" "$R_CACHE"

# The hostile dw_bucket headers (issue 41), one per line: LABEL|HEADER[|HEADER].
BUCKET_CASES=$(cat <<'CASES'
999|Cookie: dw_bucket=999
-1|Cookie: dw_bucket=-1
01|Cookie: dw_bucket=01
1e2|Cookie: dw_bucket=1e2
dot|Cookie: dw.bucket=1
space|Cookie: dw bucket=1
upper case|Cookie: DW_BUCKET=1
duplicate 1 then 2|Cookie: dw_bucket=1; dw_bucket=2
duplicate 1 then 1|Cookie: dw_bucket=1; dw_bucket=1
dot then exact|Cookie: dw.bucket=1; dw_bucket=2
two headers: 1, 2|Cookie: dw_bucket=1|Cookie: dw_bucket=2
a 4 KB value|Cookie: dw_bucket={4K}
CASES
)
BUCKET_4K=$(printf '1%.0s' {1..4096})
# bucket_headers CASE: sets BUCKET_ARGS, CASE's curl -H arguments ({4K}: 4096 digits).
bucket_headers() {
  local line=${1//\{4K\}/$BUCKET_4K} h one
  IFS='|' read -r -a h <<<"$line"
  BUCKET_ARGS=()
  for one in "${h[@]:1}"; do BUCKET_ARGS+=(-H "$one"); done
}
# bucket_case CASE URL [CURL ARGS]: creq with CASE's headers.
bucket_case() {
  local url=$2
  bucket_headers "$1"
  shift 2
  creq "$url" "${BUCKET_ARGS[@]}" "$@"
}
# set_cookie_of CASE URL [CURL ARGS]: the Set-Cookie values of a GET with CASE's headers
# (creq's line does not carry them).
set_cookie_of() {
  local url=$2
  bucket_headers "$1"
  shift 2
  curl -s -o /dev/null -D - --max-time 10 "${BUCKET_ARGS[@]}" "$@" "$url" | tr -d '\r' | sed -n 's/^[Ss]et-[Cc]ookie: //p'
}

echo "== cache: hostile dw_bucket cookies (buckets off): no variant poisoned, no cookie set"
while IFS= read -r case; do
  poison_n=$((poison_n + 1))
  url="$STACK_URL/?bk=$poison_n-$$"
  bucket_case "$case" "$url" -H 'CF-IPCountry: DE'
  a1="$R_CACHE $R_ORIGIN"
  bucket_case "$case" "$url" -H 'CF-IPCountry: DE'
  a2="$R_CACHE $R_ORIGIN"
  set=$(set_cookie_of "$case" "$url" -H 'CF-IPCountry: DE')
  creq "$url" -H 'CF-IPCountry: DE'; v0="$R_CACHE $R_ORIGIN"; o0=$R_ORIGIN
  creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: dw_sticky=$STICKY_K"; vk="$R_CACHE $R_ORIGIN"; ok=$R_ORIGIN
  check '[[ $o0 == "$de_own" && $ok == "$k_own" && -z $set ]]' \
    "${case%%|*}: then cookie-less -> $v0, K -> $vk (attack: $a1, $a2; no Set-Cookie)" \
    "want $de_own, $k_own${set:+; Set-Cookie: $set}"
done <<<"$BUCKET_CASES"
