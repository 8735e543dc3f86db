#!/usr/bin/env bash
# The page cache's hit ratio with visitor buckets (issue 41), N = 4, 16, 64 and 256 beside
# buckets off, under a Zipf page mix:
#   1. measured on OpenLiteSpeed + lsphp + LSCache (as tests/cache/buckets starts it: the vary
#      on dw_sticky,dw_bucket, CF-IPCountry into the key, php/front.php with DW_CACHE_TTL=300)
#      by bench/buckets/measure.php: Zipf(1.0) over PAGES pages, REQUESTS returning visits
#      per configuration, visitors whose dw_bucket the server drew; hits by LSCache's
#      x-litespeed-cache header, checked by X-DW-Clock repeats; the cache purged (and the
#      purge checked) between configurations; beside the model for the same figures
#   2. the model (bench/buckets/hit-ratio.php: one geo, one TTL window, no eviction; its
#      closed form checked against a seeded draw of the same model) for the larger request
#      counts a window holds, which cannot be measured here (1,000,000 requests would take
#      about an hour on this machine)
# A bench/ plug-in (see bench/README.md): prints its Markdown section on stdout, logs on
# stderr, raw results in $DW_BENCH_RAW. DW_BENCH_QUICK=1: 2,000 requests per configuration.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib/stack-bench.sh
source bench/lib/stack-bench.sh
mkdir -p "$RAW"
rm -f "$RAW"/measured.jsonl "$RAW"/measured.md "$RAW"/model.md
args=()
[[ $QUICK == 1 ]] && args+=(--quick)
log "bench/buckets/hit-ratio.php ${args[*]}"
php bench/buckets/hit-ratio.php "${args[@]}" >"$RAW/model.md"

# ---- 1. measured on OpenLiteSpeed + LSCache --------------------------------------------------
PAGES=10000 REQUESTS=10000 VISITORS=10000 SEED=41 TTL=300
[[ $QUICK == 1 ]] && REQUESTS=2000 VISITORS=2000
NS=(0 4 16 64 256)
measure() {
  local why
  if ! why=$(stack_litespeed_available 2>&1); then
    MEASURED="Not measured: $why"
    return 0
  fi
  require_built_extension
  STACK_SERVER=litespeed
  STACK_TEST_HOOKS=1 # X-DW-Clock: a hit repeats the clock of the response that was stored
  STACK_LSPHP_ENV=("DW_CACHE_TTL=$TTL")
  # What tests/cache/buckets gives ols-run.
  STACK_OLS_ARGS=(--cache --cache-vary-cookie dw_sticky,dw_bucket
    --rewrite-rule 'RewriteCond %{HTTP:CF-IPCountry} ^([A-Z0-9-]{1,8})$'
    --rewrite-rule 'RewriteRule ^/?(index\.php)?$ /index.php?dw_geo=%1 [QSA,L]')
  stack_init "$(mktemp -d /tmp/dw-bench-bucket-cache.XXXXXX)"
  trap 'stack_stop; rm -rf "$RAW/logs"; cp -r "$STACK_DIR/logs" "$RAW/logs" 2>/dev/null; rm -rf "$STACK_DIR" "$(dirname "$STACK_SNAPSHOT")"' EXIT
  log "starting etcd, dw-agent, OpenLiteSpeed --cache + lsphp (DW_CACHE_TTL=$TTL)"
  stack_start_etcd
  stack_start_agent
  stack_start_litespeed
  cp bench/buckets/www/b-purge.php "$STACK_DIR/litespeed/docroot/" && chmod a+r "$STACK_DIR/litespeed/docroot/b-purge.php"
  local n cookie state
  for n in "${NS[@]}"; do
    # tests/cache/buckets.json (region DE fra-a 50 / fra-b 30 / fra-c 20) with buckets N.
    php -r '$s = json_decode(file_get_contents($argv[1]), true); $s["policy"]["buckets"] = (int) $argv[2];
      echo json_encode($s);' tests/cache/buckets.json "$n" >"$STACK_DIR/buckets-$n.json"
    stack_seed "$STACK_DIR/buckets-$n.json" >"$STACK_DIR/logs/apply-$n.log" 2>&1 || { cat "$STACK_DIR/logs/apply-$n.log" >&2; exit 1; }
    stack_wait_revision "$(stack_etcd_revision)"
    # The purge, checked: a probe page stored before it is a miss after it.
    cookie=()
    ((n > 0)) && cookie=(-H 'Cookie: dw_bucket=0')
    probe() { curl -fsS --max-time 5 -o /dev/null -H 'CF-IPCountry: DE' "${cookie[@]}" -w '%header{x-litespeed-cache}' "$STACK_URL/?probe=$n"; }
    probe >/dev/null
    state=$(probe)
    [[ $state == hit* ]] || { log "buckets $n: the probe page is not stored (second request: '$state')"; exit 1; }
    curl -fsS --max-time 5 -o /dev/null "$STACK_URL/b-purge.php"
    state=$(probe)
    [[ $state != hit* ]] || { log "buckets $n: the purge left the probe page stored"; exit 1; }
    log "buckets $n: purged; $REQUESTS requests over $PAGES pages"
    php bench/buckets/measure.php "$STACK_URL" "$n" "$PAGES" "$REQUESTS" "$VISITORS" "$SEED" >>"$RAW/measured.jsonl"
    tail -n1 "$RAW/measured.jsonl" >&2
  done
  stack_stop
  MEASURED=$(php bench/buckets/report.php "$RAW/measured.jsonl")
}
measure
printf '%s\n' "$MEASURED" >"$RAW/measured.md"

cat <<MD
## The page cache's hit ratio by visitor buckets' N (\`bench/24-bucket-cache.sh\`)

How measured, first table: on OpenLiteSpeed + lsphp with LSCache on, started as
\`tests/cache/buckets\` does (\`ols-run start --cache --cache-vary-cookie dw_sticky,dw_bucket\`,
\`CF-IPCountry\` into the key, \`php/front.php\` with \`DW_CACHE_TTL=$TTL\`), one geo (DE),
\`tests/cache/buckets.json\` with \`buckets\` off and N = 4, 16, 64, 256 applied in turn by
\`dwctl apply\`; LSCache emptied between configurations (\`X-LiteSpeed-Purge: *\`, checked on a
probe page stored before it). Per configuration, \`bench/buckets/measure.php\`: with buckets
on, $(printf "%'d" "$VISITORS") new visitors first get their \`dw_bucket\` from the server
(\`BucketCookie\`, \`random_int\`; those cookie-setting pages are never cached and not
counted); then $(printf "%'d" "$REQUESTS") returning visits, each a visitor of that pool with its cookie and a
page drawn by Zipf(1.0) over $(printf "%'d" "$PAGES") pages (\`/?p=I\`), the same seeded sequence of pages for
every N; buckets off: the same pages without a cookie. One client, sequential loopback
requests, so no two requests race on one miss. A hit is LSCache's \`x-litespeed-cache: hit\`,
checked by \`X-DW-Clock\` repeating its variant's first response. Beside it the model's closed
form for the same pages, requests and N, and the ideal for the exact sequence sent (its
requests less its distinct (page, \`dw_bucket\`) variants): measured equal to ideal means
LSCache stored and served every variant as the vary rule says; ideal beside model is the
draw's noise, and the visitor pool's (a pool not much larger than N holds fewer than N
buckets, which the model's uniform bucket per request does not). Seconds include the
visitors' enrolment. The request count is that of the model's first row below (10,000 per
geo per TTL window); the larger windows are the model's alone.

$MEASURED

How measured, second table: the model alone (\`bench/buckets/hit-ratio.php\`), for the larger
request counts per TTL window that cannot be measured here in a few minutes. With buckets on,
LSCache keeps one variant of a page per \`dw_bucket\` value (the vary rule), so a page
requested R times in a TTL window by visitors whose buckets are uniform over N misses once
per distinct (page, bucket) it sees: hit ratio = 1 - E[distinct variants] / R, with
E[distinct] = sum over pages of N (1 - (1 - q/N)^R) for a page of popularity q (buckets off:
N = 1). One geo (each geo is its own key), no eviction, no purge within the window, and
returning visitors only: a new visitor's first page (the one that sets the cookie) is never
cached whatever N is, which lowers every column alike. The closed form is checked against a
seeded draw of the same model (the plug-in fails past 1 point).

$(cat "$RAW/model.md")

Reading: the cost of N is the cache's, and it is steep where a geo's traffic per TTL window
is small beside its page count; it grows with N roughly as the variants per page do. Weights
split to a granularity of 1/N (N = 16: 6.25 % of a region's visitors per bucket). docs/routing.md
("Choosing N") recommends a default from these figures.
MD
