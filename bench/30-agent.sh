#!/usr/bin/env bash
# dw-agent: propagation (put -> snapshot renamed), fleet fan-out, resident memory.
# Starts its own etcd; see crates/agent/benches/agent.rs.
set -euo pipefail
exec cargo bench --offline -p dw-agent --bench agent
