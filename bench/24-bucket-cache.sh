#!/usr/bin/env bash
# The page cache's hit ratio with visitor buckets (issue 41), N = 4, 16, 64 and 256 beside
# buckets off, under a Zipf page mix: a model computed from the variant count
# (bench/buckets/hit-ratio.php: one geo, one TTL window, no eviction; its closed form
# checked against a seeded draw of the same model), not a cache run: LSCache's hit ratio for
# one variant set is the variant count's, and a real run at 1,000,000 requests per window
# would take an hour on this machine. A bench/ plug-in (see bench/README.md): prints its
# Markdown section on stdout, logs on stderr, raw results in $DW_BENCH_RAW.
set -euo pipefail
cd "$(dirname "$0")/.."
RAW=${DW_BENCH_RAW:-target/bench/24-bucket-cache}
mkdir -p "$RAW"
args=()
[[ ${DW_BENCH_QUICK:-} == 1 ]] && args+=(--quick)
echo "24-bucket-cache: bench/buckets/hit-ratio.php ${args[*]}" >&2
php bench/buckets/hit-ratio.php "${args[@]}" >"$RAW/model.md"
cat <<MD
## The page cache's hit ratio by visitor buckets' N (\`bench/24-bucket-cache.sh\`)

How measured: a model, not a cache run (\`bench/buckets/hit-ratio.php\`). With buckets on,
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
