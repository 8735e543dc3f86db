# shellcheck shell=bash
# tests/cache/run, part 1b (sourced: uses its req/seen/check/pass/fail and $STACK_URL):
# what the page cache keys on is what routing reads (issue 33, item 1).
#
#   lscache    how OpenLiteSpeed's LSCache reads each Cookie header below, found by
#              behaviour on tests/cache/www/t-cookie.php (a page of its own): a page stored
#              for `dw_sticky=K`, for `dw_sticky=X`, for `dw_sticky=` and for no cookie, then
#              the header: the one it hits is how LSCache read it. Checked against the
#              table docs/deploy-litespeed.md gives ("How LSCache reads the cookie"), so a
#              fixture that reads otherwise fails here first.
#   poison     each header on the routed page (front.php, DW_CACHE_TTL): sent twice, then a
#              cookie-less DE visitor gets DE's own answer, a `dw_sticky=K` visitor K's
#              (another origin than DE's), a `dw_sticky=X` visitor X's and an empty
#              `dw_sticky=` DE's own, on that URL. (On the front.php before issue 33, 7 of
#              the 40 failed: dot, space, open bracket, dot then exact, ...)
#   geo        the same for the geo: no CF-IPCountry with the rewritten URL, two
#              CF-IPCountry headers, CF_IPCountry beside it: a DE visitor gets DE's answer.
#   controls   an exact `dw_sticky=K` and a cookie-less page are still cached (hits).

# The headers, one per line: LABEL|HEADER[|HEADER]; {K} and {X} are the two sticky keys.
COOKIE_CASES=$(cat <<'EOF'
exact|Cookie: dw_sticky={K}
after another, no space|Cookie: a=1;dw_sticky={K}
after another, a space|Cookie: a=1; dw_sticky={K}
after another, 3 spaces|Cookie: a=1;   dw_sticky={K}
after another, a tab|Cookie: a=1;	dw_sticky={K}
dot|Cookie: dw.sticky={K}
space|Cookie: dw sticky={K}
open bracket|Cookie: dw[sticky={K}
bracket pair (PHP: array dw)|Cookie: dw[sticky]={K}
array|Cookie: dw_sticky[]={K}
trailing open bracket|Cookie: dw_sticky[={K}
space before =|Cookie: dw_sticky ={K}
space after =|Cookie: dw_sticky= {K}
upper case|Cookie: DW_STICKY={K}
mixed case|Cookie: Dw_Sticky={K}
encoded underscore|Cookie: dw%5Fsticky={K}
encoded dot|Cookie: dw%2Esticky={K}
encoded d|Cookie: %64w_sticky={K}
encoded value|Cookie: dw_sticky=%{KHEX}
plus in value|Cookie: dw_sticky={K}+
prefix|Cookie: xdw_sticky={K}
suffix|Cookie: dw_stickyx={K}
no value|Cookie: dw_sticky
empty value|Cookie: dw_sticky=
duplicate K then X|Cookie: dw_sticky={K}; dw_sticky={X}
duplicate X then K|Cookie: dw_sticky={X}; dw_sticky={K}
dot then exact|Cookie: dw.sticky={K}; dw_sticky={X}
exact then dot|Cookie: dw_sticky={X}; dw.sticky={K}
empty then dot|Cookie: dw_sticky=; dw.sticky={K}
dot then empty|Cookie: dw.sticky={K}; dw_sticky=
comma-separated|Cookie: a=1, dw_sticky={K}
comma, dot|Cookie: a=1,dw.sticky={K}
lower-case header name, dot|cookie: dw.sticky={K}
two headers: K, other|Cookie: dw_sticky={K}|Cookie: a=1
two headers: other, K|Cookie: a=1|Cookie: dw_sticky={K}
two headers: K, X|Cookie: dw_sticky={K}|Cookie: dw_sticky={X}
two headers: X, K|Cookie: dw_sticky={X}|Cookie: dw_sticky={K}
two headers: dot, exact|Cookie: dw.sticky={K}|Cookie: dw_sticky={X}
two headers: exact, dot|Cookie: dw_sticky={X}|Cookie: dw.sticky={K}
two headers: dot, empty|Cookie: dw.sticky={K}|Cookie: dw_sticky=
EOF
)
# How LSCache reads each (K, X, empty: the dw_sticky value it keys on; none: no dw_sticky;
# other: none of those pages), in COOKIE_CASES order, as docs/deploy-litespeed.md states it.
LSCACHE_READS=(K K K K K none none none none none none none other other other none none none
  other other none none none none K X X X empty empty none none none K none K X none X none)

# cookie_headers CASE: the curl -H arguments of CASE, one per line (K and X substituted).
cookie_headers() {
  local line=$1 h
  line=${line//\{KHEX\}/$STICKY_KHEX}
  line=${line//\{K\}/$STICKY_K}
  line=${line//\{X\}/$STICKY_X}
  IFS='|' read -r -a h <<<"$line"
  printf '%s\n' "${h[@]:1}"
}
# creq URL [CURL ARGS]: a GET of URL; sets R_CODE R_CACHE R_MADE R_PHP R_ORIGIN R_REV R_CC.
creq() {
  local url=$1 line
  shift
  line=$(curl -s -o /dev/null --max-time 10 "$@" \
    -w '%{http_code}|%header{x-litespeed-cache}|%header{x-t-made}|%header{x-t-php}|%header{x-dw-origin}|%header{x-dw-revision}|%header{x-litespeed-cache-control}' "$url")
  IFS='|' read -r R_CODE R_CACHE R_MADE R_PHP R_ORIGIN R_REV R_CC <<<"$line"
  echo "$url $* -> $line" >>"$LOG/cookies.log"
}
# with_case CASE URL [CURL ARGS]: creq with CASE's headers.
with_case() {
  local case=$1 url=$2 args=() h
  shift 2
  while IFS= read -r h; do [[ -n $h ]] && args+=(-H "$h"); done < <(cookie_headers "$case")
  creq "$url" "${args[@]}" "$@"
}

echo "== cache: what LSCache keys on is what routing reads (cookie names, duplicates, geo)"
# K: a sticky key that moves DE (fra-a 98, fra-b 2) off its cookie-less answer; X one that does not.
fresh DE; de_own=$R_ORIGIN
STICKY_K=$(php -r 'for ($i = 0; $i < 5000; $i++) { if (crc32("k$i" . "fra-afra-b") % 100 >= 98) { echo "k$i"; break; } }')
STICKY_X=x1
STICKY_KHEX=$(printf '%02X' "'${STICKY_K:0:1}")${STICKY_K:1}
fresh DE -b "dw_sticky=$STICKY_K"; k_own=$R_ORIGIN
fresh DE -b "dw_sticky=$STICKY_X"; x_own=$R_ORIGIN
check '[[ $de_own == fra-a && $k_own == fra-b && $x_own == fra-a ]]' \
  "sticky keys: cookie-less DE -> $de_own, dw_sticky=$STICKY_K -> $k_own (moves), dw_sticky=$STICKY_X -> $x_own"

# -- lscache: how the fixture reads each header
probe_n=0
lscache_read() { # CASE: prints K, X, empty, none or other
  local case=$1 c url made
  for c in K X empty none; do
    probe_n=$((probe_n + 1))
    url="$STACK_URL/t-cookie.php?probe=$probe_n-$$"
    case $c in
      K) creq "$url" -H "Cookie: dw_sticky=$STICKY_K" ;;
      X) creq "$url" -H "Cookie: dw_sticky=$STICKY_X" ;;
      empty) creq "$url" -H "Cookie: dw_sticky=" ;;
      none) creq "$url" ;;
    esac
    made=$R_MADE
    with_case "$case" "$url"
    if [[ $R_CACHE == hit && $R_MADE == "$made" ]]; then echo "$c"; return; fi
  done
  echo other
}
i=0 reads_ok=1
while IFS= read -r case; do
  got=$(lscache_read "$case")
  want=${LSCACHE_READS[$i]:-?}
  # the empty value reads as no cookie where LSCache keys them alike (then "empty" hits first)
  [[ $got == empty && $want == none ]] && got=none
  with_case "$case" "$STACK_URL/t-cookie.php?nocache=1&n=$i-$$"
  printf '    %-34s LSCache reads: %-5s PHP reads: %s\n' "${case%%|*}" "$got" "$R_PHP"
  [[ $got == "$want" ]] || { reads_ok=0; echo "    ^ docs/deploy-litespeed.md says: $want"; }
  i=$((i + 1))
done <<<"$COOKIE_CASES"
check '((reads_ok && i == ${#LSCACHE_READS[@]}))' "LSCache (OpenLiteSpeed 1.9) reads each of $i Cookie headers as docs/deploy-litespeed.md states"

# -- poison: the routed page
poison_n=0
while IFS= read -r case; do
  poison_n=$((poison_n + 1))
  url="$STACK_URL/?ck=$poison_n-$$"
  with_case "$case" "$url" -H 'CF-IPCountry: DE'
  a1="$R_CACHE $R_ORIGIN"
  with_case "$case" "$url" -H 'CF-IPCountry: DE'
  a2="$R_CACHE $R_ORIGIN"
  creq "$url" -H 'CF-IPCountry: DE'; v0="$R_CACHE $R_ORIGIN"; o0=$R_ORIGIN
  creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: dw_sticky=$STICKY_K"; vk="$R_CACHE $R_ORIGIN"; ok=$R_ORIGIN
  creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: dw_sticky=$STICKY_X"; vx="$R_CACHE $R_ORIGIN"; ox=$R_ORIGIN
  creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: dw_sticky="; ve="$R_CACHE $R_ORIGIN"; oe=$R_ORIGIN
  check '[[ $o0 == "$de_own" && $ok == "$k_own" && $ox == "$x_own" && $oe == "$de_own" ]]' \
    "${case%%|*}: then cookie-less -> $v0, K -> $vk, X -> $vx, empty dw_sticky -> $ve (attack: $a1, $a2)" \
    "want $de_own, $k_own, $x_own, $de_own"
done <<<"$COOKIE_CASES"

# -- controls: the ordinary pages are still cached
url="$STACK_URL/?ck=control-$$"
creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: a=1; dw_sticky=$STICKY_K"
creq "$url" -H 'CF-IPCountry: DE' -H "Cookie: a=1; dw_sticky=$STICKY_K"
check '[[ $R_CACHE == hit && $R_ORIGIN == "$k_own" ]]' "control: 'a=1; dw_sticky=K' is cached (a hit naming $k_own)" "$R_CACHE $R_ORIGIN"
creq "$url" -H 'CF-IPCountry: DE' -H 'Cookie: a=1'
creq "$url" -H 'CF-IPCountry: DE' -H 'Cookie: a=1'
check '[[ $R_CACHE == hit && $R_ORIGIN == "$de_own" ]]' "control: a cookie-less page is cached (a hit naming $de_own)" "$R_CACHE $R_ORIGIN"

# -- geo: the country PHP routes by is the one in the cache key
fresh FR; fr_own=$R_ORIGIN
geo_case() { # LABEL ATTACK-PATH [CURL ARGS]: attack twice, then DE and FR visitors on /?gk=N
  local label=$1 path=$2 g0 g1
  shift 2
  poison_n=$((poison_n + 1))
  local q="gk=$poison_n-$$"
  creq "$STACK_URL${path//\{Q\}/$q}" "$@"; creq "$STACK_URL${path//\{Q\}/$q}" "$@"
  local a="$R_CACHE $R_ORIGIN"
  creq "$STACK_URL/?$q" -H 'CF-IPCountry: DE'; g0=$R_ORIGIN
  creq "$STACK_URL/index.php?$q" -H 'CF-IPCountry: FR'; g1=$R_ORIGIN
  check '[[ $g0 == "$de_own" && $g1 == "$fr_own" ]]' "geo, $label: then DE -> $g0, FR -> $g1 (attack: $a)" "want $de_own, $fr_own"
}
geo_case 'no CF-IPCountry, the rewritten URL' '/index.php?dw_geo=DE&{Q}'
geo_case 'no CF-IPCountry, the rewritten URL (FR)' '/index.php?dw_geo=FR&{Q}'
geo_case 'two CF-IPCountry headers, DE then FR' '/?{Q}' -H 'CF-IPCountry: DE' -H 'CF-IPCountry: FR'
geo_case 'two CF-IPCountry headers, FR then DE' '/?{Q}' -H 'CF-IPCountry: FR' -H 'CF-IPCountry: DE'
geo_case 'CF-IPCountry DE and CF_IPCountry FR' '/?{Q}' -H 'CF-IPCountry: DE' -H 'CF_IPCountry: FR'
geo_case 'CF_IPCountry FR and CF-IPCountry DE' '/?{Q}' -H 'CF_IPCountry: FR' -H 'CF-IPCountry: DE'
geo_case 'lower-case cf-ipcountry: fr' '/?{Q}' -H 'cf-ipcountry: fr'
