#!/usr/bin/env bash
# dwctl at 100,000 regions and 10,000 node reports (issue 21): the wall time of each
# command, from the scale test (crates/ctl/tests/it/scale.rs), which seeds its own etcd.
set -euo pipefail
log=$DW_BENCH_RAW/scale.log
cargo test --offline --release -p dwctl --test it scale::every_command -- --nocapture >"$log" 2>&1 || {
  tail -30 "$log" >&2
  exit 1
}
cat <<'HEAD'
## dwctl at 100k regions and 10k nodes

How measured: `cargo test --release -p dwctl --test it scale::every_command`: one etcd 3.5
(`--unsafe-no-fsync`, loopback) seeded with 100,000 region values (~100 bytes) and
10,000 live node reports (~1 KB each, 20 rejected keys listed), 10 MB of each prefix,
far past tonic's default 4 MiB response limit that made every command below exit 1 on
main at 50,000 regions. Each command is the `dwctl` binary run once, wall clock
including process start and connecting; reads go in pages of 1,000 keys at one
revision. One run on a shared 2-core machine: read the figures as orders of magnitude.

| command | exit | seconds |
|---|---|---|
HEAD
grep -P '^dwctl-scale\t' "$log" | while IFS=$'\t' read -r _ command code seconds; do
  printf '| `%s` | %s | %s |\n' "${command:0:90}" "$code" "$seconds"
done
