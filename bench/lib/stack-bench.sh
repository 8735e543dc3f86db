# shellcheck shell=bash
# What the plug-ins that run the whole stack (20-e2e-http, 21-e2e-propagation, 22-lsphp)
# share: their settings, scripts/stack, and the snapshots and request mix they load it
# with. Sourced from the repository root; run-bench runs only bench/*.sh, not this.
#
#   ROOT RAW QUICK STACK_SO   the repository, the plug-in's raw results directory
#                             (DW_BENCH_RAW), DW_BENCH_QUICK, the extension (DW_BENCH_SO)
#   log MSG...                a line on stderr, prefixed with the plug-in's name
#   require_built_extension   exits when STACK_SO is not built
#   make_snapshots SIZE...    $STACK_DIR/snapshot-SIZE.json: examples/generate.php's SIZE
#                             regions at revision SIZE, so a swap can be seen over HTTP
#   install_snapshot SIZE     puts that snapshot in place by rename, as dw-agent does
#   geos SIZE [MIX]           the geos wrk rotates over, comma-separated (MIX: spread or
#                             countries)
#   write_geos_lua            $STACK_DIR/geos.lua: a wrk script sending GET $DW_BENCH_PATH
#                             (default /) with CF-IPCountry rotating over $DW_BENCH_GEOS

BENCH_NAME=$(basename "$0" .sh)
ROOT=$PWD
RAW=${DW_BENCH_RAW:-$ROOT/target/bench/$BENCH_NAME}
QUICK=${DW_BENCH_QUICK:-0}
export STACK_SO=${DW_BENCH_SO:-$ROOT/target/release/libdw_router.so}
# shellcheck source=scripts/stack
source scripts/stack

log() { echo "$BENCH_NAME: $*" >&2; }

require_built_extension() {
  [[ -f $STACK_SO ]] || { log "$STACK_SO not built (make build)"; exit 1; }
}

make_snapshots() {
  local n
  for n in "$@"; do
    php examples/generate.php --regions "$n" --out "$STACK_DIR/gen-$n.json" >/dev/null
    php -r '$s = json_decode(file_get_contents($argv[1]), true); $s["revision"] = (int) $argv[2];
      file_put_contents($argv[3], json_encode($s, JSON_UNESCAPED_SLASHES));' \
      "$STACK_DIR/gen-$n.json" "$n" "$STACK_DIR/snapshot-$n.json"
  done
}

install_snapshot() {
  cp "$STACK_DIR/snapshot-$1.json" "$STACK_SNAPSHOT.tmp"
  mv "$STACK_SNAPSHOT.tmp" "$STACK_SNAPSHOT"
}

# The geos wrk rotates over, from the snapshot's region keys. spread (the default): the
# example's real countries and synthetic ones spread over the table (63 present at this
# size), plus ZZ, which has no region (the policy's default answers). countries: what
# CF-IPCountry sends, the table's two-letter codes, plus XX and T1 (no region either).
geos() { # SIZE [spread|countries]
  php -r '$s = json_decode(file_get_contents($argv[1]), true); $geos = [];
    foreach (array_keys($s["kvs"]) as $k) if (str_starts_with($k, "/dw/routing/region/")) $geos[] = substr($k, 19);
    if ($argv[2] === "countries") {
      $pick = array_values(array_filter($geos, fn ($g) => strlen($g) === 2)); $pick[] = "XX"; $pick[] = "T1";
    } else {
      $step = max(1, intdiv(count($geos), 63)); $pick = [];
      for ($i = 0; $i < count($geos) && count($pick) < 63; $i += $step) $pick[] = $geos[$i];
      $pick[] = "ZZ";
    }
    echo implode(",", $pick);' "$STACK_DIR/snapshot-$1.json" "${2:-spread}"
}

write_geos_lua() {
  cat >"$STACK_DIR/geos.lua" <<'LUA'
local requests = {}
local next_request = 0
function init(args)
  local path = os.getenv("DW_BENCH_PATH") or "/"
  local i = 0
  for geo in string.gmatch(os.getenv("DW_BENCH_GEOS"), "[^,]+") do
    i = i + 1
    requests[i] = wrk.format("GET", path, { ["CF-IPCountry"] = geo })
  end
end
function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end
LUA
}
